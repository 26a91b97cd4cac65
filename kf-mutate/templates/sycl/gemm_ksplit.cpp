//! SGEMM template in SYCL with the K loop split across work-items, row-major:
//! C[M x N] = A[M x K] * B[K x N]; the SYCL rendering of ../gemm_ksplit.cl (same switches and
//! tunables).
//!
//! A work-group is KS x WG0 work-items (SYCL's last dimension, the fastest, runs along a row
//! of C) and owns a TM x BN tile of C (BN = WG0 * TN * VW). The KS work-items of a column each
//! multiply one contiguous slice of K (first pass) and leave their partial TM x (TN * VW) block
//! in work-group local memory; after a barrier the whole group adds the KS partial tiles and
//! writes C (second pass). Rows of the partial tiles are padded by PAD floats.
//!
//! Structural switch (resolved by kf-mutate's structural mutator):
//!   VW   1 (scalar) or 4, 16 (sycl::vec loads of B)
//! Tunables: TM, TN, WG0, KS (slices of K), PAD, UNROLL (unroll of the first pass's k loop).
// SGEMM (SYCL), K split across the work-items of a group; partial sums reduced in local memory.
#include <sycl/sycl.hpp>

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

namespace syclexp = sycl::ext::oneapi::experimental;

#if VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#else
typedef sycl::vec<float, VW> floatv;
// Unaligned vector access (rows of padded local tiles are not vector-aligned).
static inline floatv vload(const float* p) {
    floatv v;
    v.load(0, sycl::address_space_cast<sycl::access::address_space::generic_space,
                                       sycl::access::decorated::no>(p));
    return v;
}
static inline void vstore(const floatv& v, float* p) {
    v.store(0, sycl::address_space_cast<sycl::access::address_space::generic_space,
                                        sycl::access::decorated::no>(p));
}
#define VLOAD(p) vload(p)
#define VSTORE(v, p) vstore((v), (p))
#endif

#define BN (WG0 * TN * VW)

typedef float part_t[KS][TM][BN + PAD];

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::work_group_size<KS, WG0>))
void gemm(const int M, const int N, const int K,
          const float* A,
          const float* B,
          float* C) {
    const sycl::nd_item<2> it = sycl::ext::oneapi::this_work_item::get_nd_item<2>();
    const int lx = it.get_local_id(1);
    const int slice = it.get_local_id(0);
    const int col_base = it.get_group(1) * BN;
    const int row0 = it.get_group(0) * TM;
    static syclexp::work_group_static<part_t> part_tile;
    part_t& part = part_tile;

    // First pass: this work-item's slice of K.
    floatv acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = floatv(0.0f);
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
                acc[i][j] = sycl::fma(floatv(a), b[j], acc[i][j]);
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
    sycl::group_barrier(it.get_group());

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
