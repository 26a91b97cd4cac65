//! Row-wise softmax template, row-major X[ROWS x COLS] -> Y: WG work-items share a row, RPG
//! rows per work-group (local size WG x RPG). Work-item l of a row handles the vectors
//! l, l + WG, l + 2 WG, ... of VW floats, so neighbouring work-items touch neighbouring
//! columns (CPU runtimes vectorise across dimension 0); the per-work-item maxima and sums are
//! combined across the row by a reduction.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW        1 (scalar) or 4, 8, 16 (explicit vloadN / vstoreN)
//!   ALGO      0: three sweeps (max; sum of exponentials; normalise, exp computed again)
//!             1: three sweeps, exp computed once (exponentials written to Y and summed, then
//!                Y scaled in place)
//!             2: online softmax (running max and rescaled running sum in one sweep, then
//!                normalise)
//!             3: the row cached in registers: X read once into CHUNKS vectors per work-item,
//!                exponentials computed in place, Y written from registers
//!   REDUCE    0: tree reduction in local memory with work-group barriers
//!             1: sub-group reduction (sub_group_reduce_max / _add); a row is one sub-group
//!                of SG = WG work-items (intel_reqd_sub_group_size)
//!             2: hierarchical: sub-group reductions, then the WG / SG partial results of a
//!                row combined through local memory after a barrier
//!   PREFETCH  prefetch() the row the next work-group will read
//! Tunables: WG (work-items per row), RPG (rows per work-group), SG (sub-group size),
//! CHUNKS (vectors per work-item kept in registers), STREAM (1: the last sweep writes Y with
//! non-temporal stores, which skip the read-for-ownership of Y's cache lines: 8 bytes of
//! traffic per element instead of 12 when the rows do not stay in cache).
// Row-wise softmax: WG work-items per row, RPG rows per work-group.
#ifndef VW
#define VW 1
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef REDUCE
#define REDUCE 0
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif
#ifndef WG
#define WG 16
#endif
#ifndef RPG
#define RPG 1
#endif
#ifndef SG
#define SG 16
#endif
#ifndef CHUNKS
#define CHUNKS 64
#endif

#if VW == 1
typedef float floatv;
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#define HMAX(v) (v)
#define HSUM(v) (v)
#elif VW == 4
typedef float4 floatv;
#define VLOAD(i, p) vload4((i), (p))
#define VSTORE(v, i, p) vstore4((v), (i), (p))
#define HMAX(v) hmax4(v)
#define HSUM(v) hsum4(v)
#elif VW == 8
typedef float8 floatv;
#define VLOAD(i, p) vload8((i), (p))
#define VSTORE(v, i, p) vstore8((v), (i), (p))
#define HMAX(v) hmax8(v)
#define HSUM(v) hsum8(v)
#elif VW == 16
typedef float16 floatv;
#define VLOAD(i, p) vload16((i), (p))
#define VSTORE(v, i, p) vstore16((v), (i), (p))
#define HMAX(v) hmax16(v)
#define HSUM(v) hsum16(v)
#endif

#ifndef STREAM
#define STREAM 0
#endif
// The row's last sweep: with STREAM, a non-temporal store of vector i (rows start at
// multiples of COLS, COLS % VW == 0, so a vector never straddles its alignment). STREAM is a
// compile-time constant, so the compiler keeps one of the two stores.
#define VSTORE_OUT(v, i, p)                                                    \
    do {                                                                       \
        if (STREAM) {                                                          \
            __builtin_nontemporal_store((v), (__global floatv*)(p) + (i));     \
        } else {                                                               \
            VSTORE(v, i, p);                                                   \
        }                                                                      \
    } while (0)

#if VW >= 4
// Horizontal maximum and sum of a vector's lanes.
inline float hmax4(float4 v) {
    const float2 t = fmax(v.lo, v.hi);
    return fmax(t.x, t.y);
}
inline float hsum4(float4 v) {
    const float2 t = v.lo + v.hi;
    return t.x + t.y;
}
#endif
#if VW >= 8
inline float hmax8(float8 v) {
    return hmax4(fmax(v.lo, v.hi));
}
inline float hsum8(float8 v) {
    return hsum4(v.lo + v.hi);
}
#endif
#if VW >= 16
inline float hmax16(float16 v) {
    return hmax8(fmax(v.lo, v.hi));
}
inline float hsum16(float16 v) {
    return hsum8(v.lo + v.hi);
}
#endif

#if REDUCE == 0
// Tree reductions over the WG work-items of a row, in the row's slice of local memory.
inline float row_max(float v, __local float* red, const int l) {
    red[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) {
            red[l] = fmax(red[l], red[l + s]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
inline float row_sum(float v, __local float* red, const int l) {
    red[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) {
            red[l] += red[l + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    v = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
#elif REDUCE == 1
// A row is exactly one sub-group (`red` is not declared: the macros drop it).
#define row_max(v, red, l) sub_group_reduce_max(v)
#define row_sum(v, red, l) sub_group_reduce_add(v)
#else
// Sub-group reductions, then the WG / SG partial results of the row through local memory.
inline float row_max(float v, __local float* red, const int l) {
    v = sub_group_reduce_max(v);
    if (get_sub_group_local_id() == 0) {
        red[l / SG] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    v = red[0];
    for (int k = 1; k < WG / SG; ++k) {
        v = fmax(v, red[k]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
inline float row_sum(float v, __local float* red, const int l) {
    v = sub_group_reduce_add(v);
    if (get_sub_group_local_id() == 0) {
        red[l / SG] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    v = red[0];
    for (int k = 1; k < WG / SG; ++k) {
        v += red[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return v;
}
#endif

#if REDUCE == 0
__kernel __attribute__((reqd_work_group_size(WG, RPG, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, RPG, 1)))
__attribute__((intel_reqd_sub_group_size(SG)))
#endif
void softmax(const int ROWS, const int COLS,
             __global const float* X,
             __global float* Y) {
    const int l = get_local_id(0);
    const int r = get_global_id(1);
    // Rows past the end (the last group may be partial) compute the last row again and store
    // nothing, so that every work-item reaches every barrier.
    const bool live = r < ROWS;
    const int row = min(r, ROWS - 1);
    __global const float* x = X + (long)row * COLS;
    __global float* y = Y + (long)row * COLS;
    const int n = COLS / VW;
#if REDUCE == 0
    __local float red_all[RPG * WG];
    __local float* red = red_all + get_local_id(1) * WG;
#elif REDUCE == 2
    __local float red_all[RPG * (WG / SG)];
    __local float* red = red_all + get_local_id(1) * (WG / SG);
#endif
#if PREFETCH
    if (l == 0 && row + RPG < ROWS) {
        prefetch(x + (long)RPG * COLS, COLS);
    }
#endif

#if ALGO == 3
    // The row in registers: CHUNKS vectors per work-item, X read once.
    floatv v[CHUNKS];
    floatv mv = (floatv)(-INFINITY);
    for (int k = 0; k < CHUNKS; ++k) {
        const int i = l + k * WG;
        v[k] = i < n ? VLOAD(i, x) : (floatv)(-INFINITY);
        mv = fmax(mv, v[k]);
    }
    const float mx = row_max(HMAX(mv), red, l);
    floatv sv = (floatv)(0.0f);
    for (int k = 0; k < CHUNKS; ++k) {
        v[k] = exp(v[k] - mx);
        sv += v[k];
    }
    const float inv = 1.0f / row_sum(HSUM(sv), red, l);
    if (live) {
        for (int k = 0; k < CHUNKS; ++k) {
            const int i = l + k * WG;
            if (i < n) {
                VSTORE_OUT(v[k] * inv, i, y);
            }
        }
    }
#elif ALGO == 2
    // One sweep: per-lane running maximum, running sum rescaled when the maximum grows.
    floatv m = (floatv)(-INFINITY);
    floatv s = (floatv)(0.0f);
    for (int i = l; i < n; i += WG) {
        const floatv v = VLOAD(i, x);
        const floatv m_new = fmax(m, v);
        s = s * exp(m - m_new) + exp(v - m_new);
        m = m_new;
    }
    const float mi = HMAX(m);
    // A work-item without columns (n < WG) has mi = -inf and contributes nothing.
    const float si = mi == -INFINITY ? 0.0f : HSUM(s * exp(m - mi));
    const float mx = row_max(mi, red, l);
    const float inv = 1.0f / row_sum(mi == -INFINITY ? 0.0f : si * exp(mi - mx), red, l);
    if (live) {
        for (int i = l; i < n; i += WG) {
            VSTORE_OUT(exp(VLOAD(i, x) - mx) * inv, i, y);
        }
    }
#else
    floatv mv = (floatv)(-INFINITY);
    for (int i = l; i < n; i += WG) {
        mv = fmax(mv, VLOAD(i, x));
    }
    const float mx = row_max(HMAX(mv), red, l);
    floatv sv = (floatv)(0.0f);
#if ALGO == 0
    for (int i = l; i < n; i += WG) {
        sv += exp(VLOAD(i, x) - mx);
    }
    const float inv = 1.0f / row_sum(HSUM(sv), red, l);
    if (live) {
        for (int i = l; i < n; i += WG) {
            VSTORE_OUT(exp(VLOAD(i, x) - mx) * inv, i, y);
        }
    }
#else
    // Each work-item scales only the exponentials it wrote itself: no barrier needed.
    for (int i = l; i < n; i += WG) {
        const floatv e = exp(VLOAD(i, x) - mx);
        if (live) {
            VSTORE(e, i, y);
        }
        sv += e;
    }
    const float inv = 1.0f / row_sum(HSUM(sv), red, l);
    if (live) {
        for (int i = l; i < n; i += WG) {
            VSTORE_OUT(VLOAD(i, y) * inv, i, y);
        }
    }
#endif
#endif
}
