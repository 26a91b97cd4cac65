//! Matrix-vector product template: Y[M] = A[M x K] . X[K], A row-major.
//!
//! Each work-item owns RPI consecutive rows and walks them together, VW floats at a time with
//! one vector accumulator per row: every vector of X it loads serves RPI rows, and the RPI
//! accumulators are independent chains of fused multiply-adds. With SPLIT > 1 the SPLIT
//! work-items of dimension 0 share the same rows, each a contiguous slice of them (a CPU core
//! streams its own cache lines), and combine their sums through local memory; no atomics.
//! U = 2 keeps a second accumulator per row over alternate vectors (shorter dependency chains
//! where RPI is small). The last K % VW columns are added by the last work-item of a row block.
//!
//! Structural switch: VW (1 scalar, or 4, 8, 16: vloadN along the rows). Tunables: RPI (rows
//! per work-item), SPLIT (work-items per row block), WG (row blocks per work-group), U.
// HAS_EPILOGUE = 1: each element of the product goes through EPILOGUE(acc, row, col) (col is
// 0) before it is stored, an expression a task's binding defines (the task file's
// `[family] epilogue`).
#ifndef HAS_EPILOGUE
#define HAS_EPILOGUE 0
#endif
#if HAS_EPILOGUE
// An epilogue's accessors (kf-search writes a task's col_of(b), row_of(b), at(b) as these);
// the product has one column.
#define KF_COL_OF(c, p) ((p)[c])
#define KF_ROW_OF(r, p) ((p)[r])
#define KF_AT(r, c, p) ((p)[r])
#define STORE_Y(row, value) (Y[row] = EPILOGUE((value), (row), 0))
#else
#define STORE_Y(row, value) (Y[row] = (value))
#endif
#ifndef VW
#define VW 16
#endif
#ifndef RPI
#define RPI 8
#endif
#ifndef SPLIT
#define SPLIT 1
#endif
#ifndef WG
#define WG 1
#endif
#ifndef U
#define U 1
#endif

#if VW == 1
#define VTYPE float
#define VLOAD(p, i) ((p)[i])
#define HSUM(v) (v)
#elif VW == 4
#define VTYPE float4
#define VLOAD(p, i) vload4(i, p)
#define HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VW == 8
#define VTYPE float8
#define VLOAD(p, i) vload8(i, p)
#define HSUM(v) ((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7)))
#elif VW == 16
#define VTYPE float16
#define VLOAD(p, i) vload16(i, p)
#define HSUM(v) (((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7))) \
               + ((((v).s8 + (v).s9) + ((v).sa + (v).sb)) + (((v).sc + (v).sd) + ((v).se + (v).sf))))
#endif

#if VW == 1
__kernel __attribute__((reqd_work_group_size(SPLIT, WG, 1)))
#else
__kernel __attribute__((reqd_work_group_size(SPLIT, WG, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void matvec(const int M, const int K,
            __global const float* A, __global const float* X, __global float* Y) {
    const int s = get_local_id(0);
    const int row0 = get_global_id(1) * RPI;
    const int vectors = K / VW;
    // This work-item's vectors of the rows: a contiguous slice.
    const int per_item = (vectors + SPLIT - 1) / SPLIT;
    const int v_begin = min(vectors, s * per_item);
    const int v_end = min(vectors, v_begin + per_item);
    __global const float* a = A + (long)row0 * K;
    VTYPE acc[RPI];
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        acc[r] = 0.0f;
    }
    int v = v_begin;
#if U > 1
    VTYPE acc2[RPI];
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        acc2[r] = 0.0f;
    }
    for (; v + 1 < v_end; v += 2) {
        const VTYPE x0 = VLOAD(X, v);
        const VTYPE x1 = VLOAD(X, v + 1);
#pragma unroll
        for (int r = 0; r < RPI; ++r) {
            acc[r] = fma(VLOAD(a + (long)r * K, v), x0, acc[r]);
            acc2[r] = fma(VLOAD(a + (long)r * K, v + 1), x1, acc2[r]);
        }
    }
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        acc[r] += acc2[r];
    }
#endif
    for (; v < v_end; ++v) {
        const VTYPE x = VLOAD(X, v);
#pragma unroll
        for (int r = 0; r < RPI; ++r) {
            acc[r] = fma(VLOAD(a + (long)r * K, v), x, acc[r]);
        }
    }
    float sums[RPI];
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        sums[r] = HSUM(acc[r]);
    }
    if (s == SPLIT - 1) {
        for (int k = vectors * VW; k < K; ++k) {
            const float x = X[k];
#pragma unroll
            for (int r = 0; r < RPI; ++r) {
                sums[r] = fma(a[(long)r * K + k], x, sums[r]);
            }
        }
    }
#if SPLIT > 1
    __local float partial[WG][RPI][SPLIT];
    const int ly = get_local_id(1);
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        partial[ly][r][s] = sums[r];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = s; r < RPI; r += SPLIT) {
        float total = 0.0f;
        for (int j = 0; j < SPLIT; ++j) {
            total += partial[ly][r][j];
        }
        STORE_Y(row0 + r, total);
    }
#else
#pragma unroll
    for (int r = 0; r < RPI; ++r) {
        STORE_Y(row0 + r, sums[r]);
    }
#endif
}
