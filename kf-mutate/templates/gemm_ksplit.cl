//! SGEMM template with the K loop split across work-items, row-major: C[M x N] = A[M x K] * B[K x N].
//!
//! A work-group is WG0 x KS work-items and owns a TM x BN tile of C (BN = WG0 * TN * VW). The KS
//! work-items of a column each multiply one contiguous slice of K (first pass) and leave their
//! partial TM x (TN * VW) block in local memory; after a barrier the whole group adds the KS
//! partial tiles and writes C (second pass). Rows of the partial tiles are padded by PAD floats.
//!
//! Structural switch (resolved by kf-mutate's structural mutator):
//!   VW   1 (scalar; CPU runtimes vectorise across dimension 0) or 4, 16 (vector loads of B)
//! Tunables: TM, TN, WG0, KS (slices of K), PAD, UNROLL (unroll of the first pass's k loop).
// SGEMM, K split across the work-items of a group; partial sums reduced in local memory.
#ifndef VW
#define VW 1
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 1
#endif
#ifndef WG0
#define WG0 16
#endif
#ifndef KS
#define KS 4
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#if VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif VW == 4
typedef float4 floatv;
#define VLOAD(p) vload4(0, (p))
#define VSTORE(v, p) vstore4((v), 0, (p))
#elif VW == 16
typedef float16 floatv;
#define VLOAD(p) vload16(0, (p))
#define VSTORE(v, p) vstore16((v), 0, (p))
#endif

#define BN (WG0 * TN * VW)

__kernel __attribute__((reqd_work_group_size(WG0, KS, 1)))
void gemm(const int M, const int N, const int K,
          __global const float* A,
          __global const float* B,
          __global float* C) {
    const int lx = get_local_id(0);
    const int slice = get_local_id(1);
    const int col_base = get_group_id(0) * BN;
    const int row0 = get_group_id(1) * TM;
    __local float part[KS][TM][BN + PAD];

    // First pass: this work-item's slice of K.
    floatv acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = (floatv)(0.0f);
        }
    }
    const int chunk = K / KS;
    const int k_begin = slice * chunk;
#pragma unroll UNROLL
    for (int k = k_begin; k < k_begin + chunk; ++k) {
        floatv b[TN];
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            b[j] = VLOAD(B + k * N + col_base + (j * WG0 + lx) * VW);
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const float a = A[(row0 + i) * K + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                acc[i][j] = fma((floatv)(a), b[j], acc[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            VSTORE(acc[i][j], &part[slice][i][(j * WG0 + lx) * VW]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // Second pass: add the KS partial tiles.
    for (int idx = slice * WG0 + lx; idx < TM * BN; idx += WG0 * KS) {
        const int r = idx / BN;
        const int c = idx % BN;
        float sum = 0.0f;
        for (int s = 0; s < KS; ++s) {
            sum += part[s][r][c];
        }
        C[(row0 + r) * N + col_base + c] = sum;
    }
}
