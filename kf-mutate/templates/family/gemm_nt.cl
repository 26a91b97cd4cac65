//! SGEMM with the right factor stored transposed, row-major: C[M x N] = A[M x K] . B[N x K]^T,
//! the product of a linear layer (x . W^T, W stored out x in). Both factors are read along K,
//! VW floats at a time, so every load is contiguous: each work-item keeps a TM x TN block of
//! dot products as VW-wide partial sums in registers, adds each one's lanes at the end and
//! stores the block (through the task's EPILOGUE with HAS_EPILOGUE: a bias, an activation).
//!
//! Work-item (x, y) owns rows y * TM .. + TM and columns x * TN .. + TN; neighbouring
//! work-items along x share A's rows, which stay in cache. Tunables: TM, TN, VW (1, 4, 8, 16),
//! WG0, WG1, UNROLL (k-loop unroll), EPI_VECTOR (the epilogue on TN-wide vectors).
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef VW
#define VW 16
#endif
#ifndef WG0
#define WG0 1
#endif
#ifndef WG1
#define WG1 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
// HAS_EPILOGUE = 1: each element of the product goes through EPILOGUE(acc, row, col) before it
// is stored, an expression a task's binding defines (kf_mutate::TaskBinding::define, from the
// task file's `[family] epilogue`).
#ifndef HAS_EPILOGUE
#define HAS_EPILOGUE 0
#endif
// EPI_VECTOR = 1 (with TN = 4, 8 or 16): the epilogue runs on TN-wide vectors (it must then be
// valid for float vectors, as OpenCL's built-ins are); 0: on each element.
#ifndef EPI_VECTOR
#define EPI_VECTOR 1
#endif
#if HAS_EPILOGUE
// An epilogue's accessors (kf-search writes a task's col_of(b), row_of(b), at(b) as these):
// the element of a per-column vector, of a per-row vector, of a matrix shaped like C.
#define KF_COL_OF(c, p) ((p)[c])
#define KF_ROW_OF(r, p) ((p)[r])
#define KF_AT(r, c, p) ((p)[(long)(r) * N + (c)])
#endif
#if TN == 4
#define TVEC float4
#define TLOAD(p) vload4(0, (p))
#define TSTORE(v, p) vstore4((v), 0, (p))
#elif TN == 8
#define TVEC float8
#define TLOAD(p) vload8(0, (p))
#define TSTORE(v, p) vstore8((v), 0, (p))
#elif TN == 16
#define TVEC float16
#define TLOAD(p) vload16(0, (p))
#define TSTORE(v, p) vstore16((v), 0, (p))
#endif

#define SUM4(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3)
#if VW == 1
#define VTYPE float
#define VLOAD(p) (*(p))
#define HSUM(v) (v)
#elif VW == 4
#define VTYPE float4
#define VLOAD(p) vload4(0, (p))
#define HSUM(v) SUM4(v)
#elif VW == 8
#define VTYPE float8
#define VLOAD(p) vload8(0, (p))
#define HSUM(v) SUM4((v).lo + (v).hi)
#else
#define VTYPE float16
#define VLOAD(p) vload16(0, (p))
#define HSUM(v) SUM4((v).lo.lo + (v).lo.hi + (v).hi.lo + (v).hi.hi)
#endif

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void gemm(const int M, const int N, const int K,
          __global const float* A, __global const float* B, __global float* C) {
    const int col0 = get_global_id(0) * TN;
    const int row0 = get_global_id(1) * TM;
    VTYPE acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = (VTYPE)(0.0f);
        }
    }
    __global const float* a = A + (long)row0 * K;
    __global const float* b = B + (long)col0 * K;
#pragma unroll UNROLL
    for (int k = 0; k < K; k += VW) {
        VTYPE av[TM];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            av[i] = VLOAD(a + (long)i * K + k);
        }
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const VTYPE bv = VLOAD(b + (long)j * K + k);
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                acc[i][j] = fma(av[i], bv, acc[i][j]);
            }
        }
    }
#if HAS_EPILOGUE && EPI_VECTOR && (TN == 4 || TN == 8 || TN == 16)
    // The epilogue on a row's TN columns at once (vector activations): its accessors load
    // vectors of the column-indexed buffers.
#undef KF_COL_OF
#undef KF_ROW_OF
#undef KF_AT
#define KF_COL_OF(c, p) TLOAD((p) + (c))
#define KF_ROW_OF(r, p) ((TVEC)((p)[r]))
#define KF_AT(r, c, p) TLOAD((p) + (long)(r) * N + (c))
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        float sums[TN];
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            sums[j] = HSUM(acc[i][j]);
        }
        const int row = row0 + i;
        TSTORE(EPILOGUE(TLOAD(sums), row, col0), C + (long)row * N + col0);
    }
#else
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int row = row0 + i;
            const int col = col0 + j;
#if HAS_EPILOGUE
            C[(long)row * N + col] = EPILOGUE(HSUM(acc[i][j]), row, col);
#else
            C[(long)row * N + col] = HSUM(acc[i][j]);
#endif
        }
    }
#endif
}
