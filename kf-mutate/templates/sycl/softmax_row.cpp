//! Row-wise softmax template in SYCL, row-major X[ROWS x COLS] -> Y: one work-item per row,
//! WG rows per work-group; the SYCL rendering of ../softmax_row.cl (same switches and
//! tunables). Every work-item walks its own row, VW floats at a time, and keeps VW partial
//! maxima and sums that are combined at the end of each sweep.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW    1 (scalar) or 4, 8, 16 (sycl::vec<float, VW> loads and stores along the row)
//!   ALGO  0: three sweeps over X (max; sum of exponentials; normalise, exp computed again)
//!         1: three sweeps, exp computed once (max; exponentials written to Y and summed;
//!            Y scaled in place)
//!         2: online softmax (running maximum and a running sum rescaled by exp(m - m_new)
//!            in one sweep; normalise in a second sweep)
//! Tunables: WG (rows per work-group), STREAM (1: the last sweep writes Y with non-temporal
//! stores, which skip the read-for-ownership of Y's cache lines: 8 bytes of traffic per
//! element instead of 12 when the rows do not stay in cache).
// Row-wise softmax (SYCL): one work-item per row.
#include <sycl/sycl.hpp>

#include <limits>

#ifndef VW
#define VW 1
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef STREAM
#define STREAM 0
#endif

namespace syclexp = sycl::ext::oneapi::experimental;

#define NEG_INF (-std::numeric_limits<float>::infinity())

#if VW == 1
typedef float floatv;
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#define HMAX(v) (v)
#define HSUM(v) (v)
#else
typedef sycl::vec<float, VW> floatv;
static inline floatv vload(int i, const float* p) {
    floatv v;
    v.load(i, sycl::address_space_cast<sycl::access::address_space::generic_space,
                                       sycl::access::decorated::no>(p));
    return v;
}
static inline void vstore(const floatv& v, int i, float* p) {
    v.store(i, sycl::address_space_cast<sycl::access::address_space::generic_space,
                                        sycl::access::decorated::no>(p));
}
// Horizontal maximum and sum of a vector's lanes.
static inline float hmax(floatv v) {
    float m = v[0];
#pragma unroll
    for (int i = 1; i < VW; ++i) {
        m = sycl::fmax(m, v[i]);
    }
    return m;
}
static inline float hsum(floatv v) {
    float s = v[0];
#pragma unroll
    for (int i = 1; i < VW; ++i) {
        s += v[i];
    }
    return s;
}
#define VLOAD(i, p) vload((i), (p))
#define VSTORE(v, i, p) vstore((v), (i), (p))
#define HMAX(v) hmax(v)
#define HSUM(v) hsum(v)
#endif

// The row's last sweep: with STREAM, a non-temporal store of vector i, through the
// compiler's own vector type for VW > 1 (rows start at multiples of COLS, COLS % VW == 0, so
// a vector stays aligned). STREAM is a compile-time constant: the compiler keeps one store.
#if VW == 1
#define NT_STORE(v, i, p) __builtin_nontemporal_store((v), (p) + (i))
#else
typedef float nt_floatv __attribute__((ext_vector_type(VW)));
#define NT_STORE(v, i, p) \
    __builtin_nontemporal_store(sycl::bit_cast<nt_floatv>(v), reinterpret_cast<nt_floatv*>(p) + (i))
#endif
#define VSTORE_OUT(v, i, p)                                                    \
    do {                                                                       \
        if (STREAM) {                                                          \
            NT_STORE(v, i, p);                                                 \
        } else {                                                               \
            VSTORE(v, i, p);                                                   \
        }                                                                      \
    } while (0)

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void softmax(const int ROWS, const int COLS,
             const float* X,
             float* Y) {
    const int r = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    const float* x = X + (long)r * COLS;
    float* y = Y + (long)r * COLS;
    const int n = COLS / VW;
#if ALGO == 2
    // One sweep: per-lane running maximum, running sum rescaled when the maximum grows.
    floatv m = floatv(NEG_INF);
    floatv s = floatv(0.0f);
    for (int i = 0; i < n; ++i) {
        const floatv v = VLOAD(i, x);
        const floatv m_new = sycl::fmax(m, v);
        s = s * sycl::exp(m - m_new) + sycl::exp(v - m_new);
        m = m_new;
    }
    const float mx = HMAX(m);
    const float inv = 1.0f / HSUM(s * sycl::exp(m - mx));
    for (int i = 0; i < n; ++i) {
        VSTORE_OUT(sycl::exp(VLOAD(i, x) - mx) * inv, i, y);
    }
#else
    floatv mv = floatv(NEG_INF);
    for (int i = 0; i < n; ++i) {
        mv = sycl::fmax(mv, VLOAD(i, x));
    }
    const float mx = HMAX(mv);
    floatv sv = floatv(0.0f);
#if ALGO == 0
    for (int i = 0; i < n; ++i) {
        sv += sycl::exp(VLOAD(i, x) - mx);
    }
    const float inv = 1.0f / HSUM(sv);
    for (int i = 0; i < n; ++i) {
        VSTORE_OUT(sycl::exp(VLOAD(i, x) - mx) * inv, i, y);
    }
#else
    for (int i = 0; i < n; ++i) {
        const floatv e = sycl::exp(VLOAD(i, x) - mx);
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
