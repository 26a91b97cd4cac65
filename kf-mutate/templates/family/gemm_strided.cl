//! SGEMM over strided factors: C[M x N] (row-major) = A · B where A[m][k] is at
//! A[m * SAM + k * SAK] and B[k][n] at B[k * SBK + n * SBN], so one kernel serves transposed
//! factors (A stored K x M: SAM = 1, SAK = M). A task's binding (kf_mutate::TaskBinding) gives
//! the strides as constants, which the compiler folds.
//!
//! Each work-item keeps a TM x TN block of C in registers: rows ly * TM + i of its group's tile
//! and columns j * WG0 + lx, so neighbouring work-items touch neighbouring columns of B and C.
//! Structural switch: LOCAL_A stages a BM x TK tile of A in local memory (read once per group
//! in the order it is stored). Tunables: TM, TN, WG0, WG1, TK, UNROLL.
#ifndef LOCAL_A
#define LOCAL_A 0
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef WG0
#define WG0 16
#endif
#ifndef WG1
#define WG1 4
#endif
#ifndef TK
#define TK 32
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
#define BM (WG1 * TM)
#define BN (WG0 * TN)

__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1)))
void gemm(const int M, const int N, const int K,
          const int SAM, const int SAK, const int SBK, const int SBN,
          __global const float* A,
          __global const float* B,
          __global float* C) {
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    const int col0 = get_group_id(0) * BN + lx;
    const int row0 = get_group_id(1) * BM + ly * TM;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = 0.0f;
        }
    }
#if LOCAL_A
    __local float As[TK][BM];
    const int lid = ly * WG0 + lx;
    const int row_base = get_group_id(1) * BM;
#endif
    for (int k0 = 0; k0 < K; k0 += TK) {
#if LOCAL_A
        // Consecutive work-items take consecutive elements in A's storage order.
        for (int idx = lid; idx < TK * BM; idx += WG0 * WG1) {
            const int r = SAM == 1 ? idx % BM : idx / TK;
            const int k = SAM == 1 ? idx / BM : idx % TK;
            As[k][r] = A[(long)(row_base + r) * SAM + (long)(k0 + k) * SAK];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll UNROLL
        for (int kk = 0; kk < TK; ++kk) {
            const int k = k0 + kk;
            float b[TN];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                b[j] = B[(long)k * SBK + (long)(col0 + j * WG0) * SBN];
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#if LOCAL_A
                const float a = As[kk][ly * TM + i];
#else
                const float a = A[(long)(row0 + i) * SAM + (long)k * SAK];
#endif
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    acc[i][j] = fma(a, b[j], acc[i][j]);
                }
            }
        }
#if LOCAL_A
        barrier(CLK_LOCAL_MEM_FENCE);
#endif
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
#if HAS_EPILOGUE
            C[(long)(row0 + i) * N + col0 + j * WG0] =
                EPILOGUE(acc[i][j], row0 + i, col0 + j * WG0);
#else
            C[(long)(row0 + i) * N + col0 + j * WG0] = acc[i][j];
#endif
        }
    }
}
