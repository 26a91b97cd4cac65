//! SGEMM template in CUDA, row-major: C[M x N] = A[M x K] * B[K x N]; the CUDA rendering of
//! ../gemm_blocked.cl for GPUs (a subset of its switches; see kf-mutate's `cuda` module).
//!
//! Each thread computes a TM x (TN * VW) block of C in registers: TM consecutive rows and TN
//! vectors of VW consecutive columns; vector j of thread x covers the columns
//! (j * WG0 + x) * VW .. + VW of its block's tile, so neighbouring threads of a warp touch
//! neighbouring columns (coalesced). A block is WG0 x WG1 threads and owns a BM x BN tile of C.
//!
//! Structural switches:
//!   VW        1 (scalar) or 4 (float4 loads of B and stores of C)
//!   LOCAL_B   stage TK x BN tiles of B in shared memory (rows padded by PAD floats)
//!   LOCAL_A   stage BM x TK tiles of A in shared memory (rows padded by PAD floats)
//!   SUBGROUP  lane x of a 32-wide warp loads A[row][k + x] and __shfl_sync hands it to the
//!             other lanes (needs VW = 1, WG0 = 32, no LOCAL_A)
//! Tunables: TM, TN, WG0, WG1, TK (K tile), PAD.
// SGEMM (CUDA): each thread computes a TM x (TN * VW) block of C in registers.
#ifndef VW
#define VW 1
#endif
#ifndef LOCAL_A
#define LOCAL_A 0
#endif
#ifndef LOCAL_B
#define LOCAL_B 0
#endif
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#ifndef WG0
#define WG0 32
#endif
#ifndef WG1
#define WG1 1
#endif
#ifndef TK
#define TK 32
#endif
#ifndef PAD
#define PAD 0
#endif

#if VW == 1
typedef float floatv;
__device__ __forceinline__ floatv vload(const float* p) { return *p; }
__device__ __forceinline__ void vstore(floatv v, float* p) { *p = v; }
__device__ __forceinline__ floatv splat(float a) { return a; }
__device__ __forceinline__ floatv vfma(float a, floatv b, floatv c) { return fmaf(a, b, c); }
#else
typedef float4 floatv;
// float4 accesses need 16-byte alignment: columns are multiples of 4 and rows of B, C (and of
// the shared tiles, with PAD a multiple of 4) are whole float4s.
__device__ __forceinline__ floatv vload(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ void vstore(floatv v, float* p) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ floatv splat(float a) { return make_float4(a, a, a, a); }
__device__ __forceinline__ floatv vfma(float a, floatv b, floatv c) {
    return make_float4(fmaf(a, b.x, c.x), fmaf(a, b.y, c.y), fmaf(a, b.z, c.z),
                       fmaf(a, b.w, c.w));
}
#endif

#define BM (WG1 * TM)
#define BN (WG0 * TN * VW)

#if SUBGROUP
#define KU 32
#else
#define KU 1
#endif

extern "C" __global__ void __launch_bounds__(WG0 * WG1)
gemm(const int M, const int N, const int K,
     const float* __restrict__ A,
     const float* __restrict__ B,
     float* __restrict__ C) {
    const int lx = threadIdx.x;
    const int ly = threadIdx.y;
    const int col_base = blockIdx.x * BN;
    const int row0 = blockIdx.y * BM + ly * TM;
#if LOCAL_A || LOCAL_B
    const int lid = ly * WG0 + lx;
#endif
#if LOCAL_A
    const int row_base = blockIdx.y * BM;
    __shared__ float As[BM][TK + PAD];
#endif
#if LOCAL_B
    __shared__ __align__(16) float Bs[TK][BN + PAD];
#endif

    floatv acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            acc[i][j] = splat(0.0f);
        }
    }

    for (int k0 = 0; k0 < K; k0 += TK) {
#if LOCAL_B
        for (int idx = lid; idx < TK * (BN / VW); idx += WG0 * WG1) {
            const int r = idx / (BN / VW);
            const int c = (idx % (BN / VW)) * VW;
            vstore(vload(B + (k0 + r) * N + col_base + c), &Bs[r][c]);
        }
#endif
#if LOCAL_A
        for (int idx = lid; idx < BM * TK; idx += WG0 * WG1) {
            const int r = idx / TK;
            const int c = idx % TK;
            As[r][c] = A[(row_base + r) * K + k0 + c];
        }
#endif
#if LOCAL_A || LOCAL_B
        __syncthreads();
#endif
#pragma unroll 4
        for (int kk = 0; kk < TK; kk += KU) {
#if SUBGROUP
            float a_lane[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                a_lane[i] = A[(row0 + i) * K + k0 + kk + (lx & 31)];
            }
#pragma unroll
            for (int u = 0; u < KU; ++u) {
#else
            {
                const int u = 0;
#endif
                floatv b[TN];
#pragma unroll
                for (int j = 0; j < TN; ++j) {
#if LOCAL_B
                    b[j] = vload(&Bs[kk + u][(j * WG0 + lx) * VW]);
#else
                    b[j] = vload(B + (k0 + kk + u) * N + col_base + (j * WG0 + lx) * VW);
#endif
                }
#pragma unroll
                for (int i = 0; i < TM; ++i) {
#if SUBGROUP
                    const float a = __shfl_sync(0xffffffffu, a_lane[i], u);
#elif LOCAL_A
                    const float a = As[ly * TM + i][kk + u];
#else
                    const float a = A[(row0 + i) * K + k0 + kk + u];
#endif
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        acc[i][j] = vfma(a, b[j], acc[i][j]);
                    }
                }
            }
        }
#if LOCAL_A || LOCAL_B
        __syncthreads();
#endif
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            vstore(acc[i][j], C + (row0 + i) * N + col_base + (j * WG0 + lx) * VW);
        }
    }
}
