//! Row-wise softmax template in CUDA, row-major X[ROWS x COLS] -> Y; the CUDA rendering of
//! ../softmax_group.cl for GPUs (its switches VW, ALGO and REDUCE; see kf-mutate's `cuda`
//! module). A block is WG x RPG threads: WG threads share a row, RPG rows per block. Thread l of
//! a row handles the vectors l, l + WG, l + 2 WG, ... of VW floats, so the threads of a warp
//! read neighbouring vectors (coalesced); the per-thread maxima and sums are combined across
//! the row by a reduction.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW        1 (scalar) or 4 (float4 loads and stores; COLS a multiple of 4)
//!   ALGO      0: three sweeps (max; sum of exponentials; normalise, exp computed again)
//!             1: three sweeps, exp computed once (exponentials written to Y and summed, then
//!                Y scaled in place by the thread that wrote it)
//!             2: online softmax (running max and rescaled running sum in one sweep, then
//!                normalise)
//!             3: the row cached in registers: X read once into CHUNKS vectors per thread,
//!                exponentials computed in place, Y written from registers
//!   REDUCE    0: tree reduction in shared memory with __syncthreads (WG a power of two)
//!             1: warp reduction (__shfl_xor_sync); a row is one warp (WG = 32)
//!             2: hierarchical: warp reductions, then the WG / 32 partial results of a row
//!                combined through shared memory after a __syncthreads
//! Tunables: WG (threads per row), RPG (rows per block), CHUNKS (vectors per thread kept in
//! registers by ALGO 3).
// Row-wise softmax (CUDA): WG threads per row, RPG rows per block.
// Every parameter (switches and tunables) is a definition from the manifest (-DVW=4 ...).
#define WARP 32
// NVRTC has no INFINITY macro.
#define NEG_INF __int_as_float(0xff800000)

#if VW == 1
typedef float floatv;
__device__ __forceinline__ floatv vload(const float* p, int i) { return p[i]; }
__device__ __forceinline__ void vstore(floatv v, float* p, int i) { p[i] = v; }
__device__ __forceinline__ floatv splat(float a) { return a; }
__device__ __forceinline__ float hmax(floatv v) { return v; }
__device__ __forceinline__ float hsum(floatv v) { return v; }
__device__ __forceinline__ floatv vexp_minus(floatv v, float m) { return expf(v - m); }
__device__ __forceinline__ floatv vscale(floatv v, float s) { return v * s; }
#else
typedef float4 floatv;
// float4 accesses need 16-byte alignment: COLS is a multiple of 4, so every row starts on one.
__device__ __forceinline__ floatv vload(const float* p, int i) {
    return reinterpret_cast<const float4*>(p)[i];
}
__device__ __forceinline__ void vstore(floatv v, float* p, int i) {
    reinterpret_cast<float4*>(p)[i] = v;
}
__device__ __forceinline__ floatv splat(float a) { return make_float4(a, a, a, a); }
__device__ __forceinline__ float hmax(floatv v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }
__device__ __forceinline__ float hsum(floatv v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ floatv vexp_minus(floatv v, float m) {
    return make_float4(expf(v.x - m), expf(v.y - m), expf(v.z - m), expf(v.w - m));
}
__device__ __forceinline__ floatv vscale(floatv v, float s) {
    return make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
}
#endif

struct MaxOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
    __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

#if REDUCE != 0
// Every lane of the warp holds a value of the same row (WG is a multiple of 32 and a block's
// threads are numbered row by row), so the full mask is right.
template <typename Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
    for (int o = WARP / 2; o > 0; o >>= 1) {
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    }
    return v;
}
#endif

#if REDUCE == 0
// Tree reduction over the WG threads of a row, in the row's slice of shared memory.
template <typename Op>
__device__ __forceinline__ float row_reduce(float v, float* red, const int l, Op op) {
    red[l] = v;
    __syncthreads();
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) {
            red[l] = op(red[l], red[l + s]);
        }
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}
#elif REDUCE == 1
template <typename Op>
__device__ __forceinline__ float row_reduce(float v, float* red, const int l, Op op) {
    return warp_reduce(v, op);
}
#else
template <typename Op>
__device__ __forceinline__ float row_reduce(float v, float* red, const int l, Op op) {
    v = warp_reduce(v, op);
    if (l % WARP == 0) {
        red[l / WARP] = v;
    }
    __syncthreads();
    v = red[0];
    for (int k = 1; k < WG / WARP; ++k) {
        v = op(v, red[k]);
    }
    __syncthreads();
    return v;
}
#endif

extern "C" __global__ void __launch_bounds__(WG * RPG)
softmax(const int ROWS, const int COLS, const float* __restrict__ X, float* __restrict__ Y) {
    const int l = threadIdx.x;
    const int r = blockIdx.y * RPG + threadIdx.y;
    // Rows past the end (the last block may be partial) compute the last row again and store
    // nothing, so that every thread reaches every __syncthreads.
    const bool live = r < ROWS;
    const int row = min(r, ROWS - 1);
    const float* x = X + (long long)row * COLS;
    float* y = Y + (long long)row * COLS;
    const int n = COLS / VW;
#if REDUCE == 0
    __shared__ float red_all[RPG * WG];
    float* red = red_all + threadIdx.y * WG;
#elif REDUCE == 2
    __shared__ float red_all[RPG * (WG / WARP)];
    float* red = red_all + threadIdx.y * (WG / WARP);
#else
    float* red = nullptr;
#endif

#if ALGO == 3
    // The row in registers: CHUNKS vectors per thread, X read once.
    floatv v[CHUNKS];
    float m = NEG_INF;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        const int i = l + c * WG;
        v[c] = i < n ? vload(x, i) : splat(NEG_INF);
        m = fmaxf(m, hmax(v[c]));
    }
    m = row_reduce(m, red, l, MaxOp());
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < CHUNKS; ++c) {
        v[c] = vexp_minus(v[c], m);  // exp(-inf) = 0 for the padding
        s += hsum(v[c]);
    }
    s = row_reduce(s, red, l, SumOp());
    const float inv = 1.0f / s;
    if (live) {
#pragma unroll
        for (int c = 0; c < CHUNKS; ++c) {
            const int i = l + c * WG;
            if (i < n) {
                vstore(vscale(v[c], inv), y, i);
            }
        }
    }
#elif ALGO == 2
    // Online: one sweep keeps the running maximum and the sum rescaled to it.
    float m = NEG_INF;
    float s = 0.0f;
    for (int i = l; i < n; i += WG) {
        const floatv xv = vload(x, i);
        const float vm = hmax(xv);
        if (vm > m) {
            s *= expf(m - vm);
            m = vm;
        }
        s += hsum(vexp_minus(xv, m));
    }
    const float row_m = row_reduce(m, red, l, MaxOp());
    s = m == NEG_INF ? 0.0f : s * expf(m - row_m);
    s = row_reduce(s, red, l, SumOp());
    const float inv = 1.0f / s;
    if (live) {
        for (int i = l; i < n; i += WG) {
            vstore(vscale(vexp_minus(vload(x, i), row_m), inv), y, i);
        }
    }
#else
    float m = NEG_INF;
    for (int i = l; i < n; i += WG) {
        m = fmaxf(m, hmax(vload(x, i)));
    }
    m = row_reduce(m, red, l, MaxOp());
    float s = 0.0f;
#if ALGO == 1
    // Exponentials computed once: written to Y (live rows), summed, then scaled in place by
    // the thread that wrote them (no synchronisation needed for its own elements).
    for (int i = l; i < n; i += WG) {
        const floatv e = vexp_minus(vload(x, i), m);
        s += hsum(e);
        if (live) {
            vstore(e, y, i);
        }
    }
    s = row_reduce(s, red, l, SumOp());
    const float inv = 1.0f / s;
    if (live) {
        for (int i = l; i < n; i += WG) {
            vstore(vscale(vload(y, i), inv), y, i);
        }
    }
#else
    for (int i = l; i < n; i += WG) {
        s += hsum(vexp_minus(vload(x, i), m));
    }
    s = row_reduce(s, red, l, SumOp());
    const float inv = 1.0f / s;
    if (live) {
        for (int i = l; i < n; i += WG) {
            vstore(vscale(vexp_minus(vload(x, i), m), inv), y, i);
        }
    }
#endif
#endif
}
