//! Row-wise softmax template, row-major X[ROWS x COLS] -> Y: one work-item per row, WG rows
//! per work-group. Every work-item walks its own row, VW floats at a time, and keeps VW
//! partial maxima and sums that are combined at the end of each sweep.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW    1 (scalar) or 4, 8, 16 (explicit vloadN / vstoreN along the row, with
//!         vec_type_hint so that the runtime does not also pack rows into SIMD lanes)
//!   ALGO  0: three sweeps over X (max; sum of exponentials; normalise, exp computed again)
//!         1: three sweeps, exp computed once (max; exponentials written to Y and summed;
//!            Y scaled in place)
//!         2: online softmax (running maximum and a running sum rescaled by exp(m - m_new)
//!            in one sweep; normalise in a second sweep)
//! Tunables: WG (rows per work-group), STREAM (1: the last sweep writes Y with non-temporal
//! stores, which skip the read-for-ownership of Y's cache lines: 8 bytes of traffic per
//! element instead of 12 when the rows do not stay in cache).
// Row-wise softmax: one work-item per row.
#ifndef VW
#define VW 1
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef STREAM
#define STREAM 0
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

#if VW > 1
// The code is vectorised already: the hint keeps the runtime from packing work-items
// (rows) into SIMD lanes on top of it, which would turn the row loads into gathers.
__kernel __attribute__((vec_type_hint(floatv)))
#else
__kernel
#endif
void softmax(const int ROWS, const int COLS,
             __global const float* X,
             __global float* Y) {
    const int r = get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    __global const float* x = X + (long)r * COLS;
    __global float* y = Y + (long)r * COLS;
    const int n = COLS / VW;
#if ALGO == 2
    // One sweep: per-lane running maximum, running sum rescaled when the maximum grows.
    floatv m = (floatv)(-INFINITY);
    floatv s = (floatv)(0.0f);
    for (int i = 0; i < n; ++i) {
        const floatv v = VLOAD(i, x);
        const floatv m_new = fmax(m, v);
        s = s * exp(m - m_new) + exp(v - m_new);
        m = m_new;
    }
    const float mx = HMAX(m);
    const float inv = 1.0f / HSUM(s * exp(m - mx));
    for (int i = 0; i < n; ++i) {
        VSTORE_OUT(exp(VLOAD(i, x) - mx) * inv, i, y);
    }
#else
    floatv mv = (floatv)(-INFINITY);
    for (int i = 0; i < n; ++i) {
        mv = fmax(mv, VLOAD(i, x));
    }
    const float mx = HMAX(mv);
    floatv sv = (floatv)(0.0f);
#if ALGO == 0
    for (int i = 0; i < n; ++i) {
        sv += exp(VLOAD(i, x) - mx);
    }
    const float inv = 1.0f / HSUM(sv);
    for (int i = 0; i < n; ++i) {
        VSTORE_OUT(exp(VLOAD(i, x) - mx) * inv, i, y);
    }
#else
    for (int i = 0; i < n; ++i) {
        const floatv e = exp(VLOAD(i, x) - mx);
        VSTORE(e, i, y);
        sv += e;
    }
    const float inv = 1.0f / HSUM(sv);
    for (int i = 0; i < n; ++i) {
        VSTORE_OUT(VLOAD(i, y) * inv, i, y);
    }
#endif
#endif
}
