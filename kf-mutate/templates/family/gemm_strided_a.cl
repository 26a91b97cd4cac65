//! SGEMM template with A read through strides and B, C row-major: C[M x N] = A . B, A[m][k] at
//! A[m * SAM + k * SAK] (A stored K x M, a transposed factor: SAM = 1, SAK = M; A stored
//! M x K: SAM = K, SAK = 1). B's rows are SBK floats apart and its columns adjacent (SBN = 1:
//! the kernel reads B with vector loads; SBN is a parameter so that the template shares the
//! strided GEMM template's interface and binding). A task's binding (kf_mutate::TaskBinding)
//! gives the strides as constants, which the compiler folds.
//!
//! Each work-item keeps a TM x (TN * VW) block of C in registers: TM consecutive rows and TN
//! consecutive vectors of VW columns, so its loads of a row of B and its stores of C are
//! contiguous vectors (with vec_type_hint, the CPU runtime keeps one work-item per SIMD
//! thread instead of packing work-items into lanes). Per k it loads TN vectors of B's row k
//! and TM scalars of A (contiguous when A is transposed), each broadcast over the vectors.
//!
//! Structural switch: VW (1 scalar, or 4, 8, 16: vloadN / vstoreN of B and C). Tunables: TM,
//! TN, WG0, WG1 (the work-group), UNROLL (k-loop unroll).
#ifndef VW
#define VW 16
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 2
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
// is stored, an expression a task's binding defines (kf_mutate::TaskBinding::define: a bias, a
// scaling, an activation from the task file's `[family] epilogue`).
#ifndef HAS_EPILOGUE
#define HAS_EPILOGUE 0
#endif
#if HAS_EPILOGUE
// An epilogue's accessors (kf-search writes a task's col_of(b), row_of(b), at(b) as these):
// the element of a per-column vector, of a per-row vector, of a matrix shaped like C.
#define KF_COL_OF(c, p) ((p)[c])
#define KF_ROW_OF(r, p) ((p)[r])
#define KF_AT(r, c, p) ((p)[(long)(r) * N + (c)])
#endif
#if VW == 1
#define VTYPE float
#define VLOAD(p, i) ((p)[i])
#define VSTORE(v, p, i) ((p)[i] = (v))
#elif VW == 4
#define VTYPE float4
#define VLOAD(p, i) vload4(i, p)
#define VSTORE(v, p, i) vstore4(v, i, p)
#elif VW == 8
#define VTYPE float8
#define VLOAD(p, i) vload8(i, p)
#define VSTORE(v, p, i) vstore8(v, i, p)
#else
#define VTYPE float16
#define VLOAD(p, i) vload16(i, p)
#define VSTORE(v, p, i) vstore16(v, i, p)
#endif

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void gemm(const int M, const int N, const int K,
          const int SAM, const int SAK, const int SBK, const int SBN,
          __global const float* A, __global const float* B, __global float* C) {
    // Vector index (in units of VW floats) of this work-item's first column block.
    const int v0 = get_global_id(0) * TN;
    const int row0 = get_global_id(1) * TM;
    const int nv = N / VW;
    VTYPE acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }
    __global const float* a = A + (long)row0 * SAM;
#pragma unroll UNROLL
    for (int k = 0; k < K; ++k) {
        __global const float* brow = B + (long)k * SBK;
        VTYPE b[TN];
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            b[j] = VLOAD(brow, v0 + j);
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float ai = a[(long)i * SAM + (long)k * SAK];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[i][j] = fma((VTYPE)ai, b[j], acc[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
#if HAS_EPILOGUE
            float lanes[VW];
            VSTORE(acc[i][j], lanes, 0);
            for (int q = 0; q < VW; ++q) {
                const int col = (v0 + j) * VW + q;
                C[(long)(row0 + i) * N + col] = EPILOGUE(lanes[q], row0 + i, col);
            }
#else
            VSTORE(acc[i][j], C + (long)(row0 + i) * N, v0 + j);
#endif
        }
    }
}
