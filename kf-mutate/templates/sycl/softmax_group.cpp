//! Row-wise softmax template in SYCL, row-major X[ROWS x COLS] -> Y: WG work-items share a
//! row, RPG rows per work-group (local range RPG x WG: SYCL's last dimension, the fastest,
//! runs along the row); the SYCL rendering of ../softmax_group.cl (same switches and tunables)
//! plus SYCL's sub-group shuffles. Work-item l of a row handles the vectors l, l + WG,
//! l + 2 WG, ... of VW floats; the per-work-item maxima and sums are combined across the row
//! by a reduction.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW        1 (scalar) or 4, 8, 16 (sycl::vec<float, VW> loads and stores)
//!   ALGO      0: three sweeps (max; sum of exponentials; normalise, exp computed again)
//!             1: three sweeps, exp computed once (exponentials written to Y and summed, then
//!                Y scaled in place)
//!             2: online softmax (running max and rescaled running sum in one sweep, then
//!                normalise)
//!             3: the row cached in registers: X read once into CHUNKS vectors per work-item,
//!                exponentials computed in place, Y written from registers
//!   REDUCE    0: tree reduction in work_group_static memory with group barriers
//!             1: sub-group reduction; a row is one sub-group of SG = WG work-items (the
//!                kernel requires sub-group size SG)
//!             2: hierarchical: sub-group reductions, then the WG / SG partial results of a
//!                row combined through work_group_static memory after a barrier
//!   SHUFFLE   how a sub-group reduces (REDUCE 1 and 2): 0 sycl::reduce_over_group,
//!             1 a butterfly of sycl::permute_group_by_xor, 2 a tree of sycl::shift_group_left
//!             whose result sycl::select_from_group hands from lane 0 to the others
//!   PREFETCH  prefetch the row the next work-group will read (sycl_ext_oneapi_prefetch)
//! Tunables: WG (work-items per row), RPG (rows per work-group), SG (sub-group size),
//! CHUNKS (vectors per work-item kept in registers), STREAM (1: the last sweep writes Y with
//! non-temporal stores, which skip the read-for-ownership of Y's cache lines: 8 bytes of
//! traffic per element instead of 12 when the rows do not stay in cache).
// Row-wise softmax (SYCL): WG work-items per row, RPG rows per work-group.
#include <sycl/sycl.hpp>

#include <limits>

#ifndef VW
#define VW 1
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef REDUCE
#define REDUCE 0
#endif
#ifndef SHUFFLE
#define SHUFFLE 0
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

#ifndef STREAM
#define STREAM 0
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

#if REDUCE != 0
// The maximum and the sum over one sub-group, in every lane.
#if SHUFFLE == 1
static inline float sg_max(sycl::sub_group sg, float v) {
#pragma unroll
    for (int o = SG / 2; o > 0; o /= 2) {
        v = sycl::fmax(v, sycl::permute_group_by_xor(sg, v, o));
    }
    return v;
}
static inline float sg_sum(sycl::sub_group sg, float v) {
#pragma unroll
    for (int o = SG / 2; o > 0; o /= 2) {
        v += sycl::permute_group_by_xor(sg, v, o);
    }
    return v;
}
#elif SHUFFLE == 2
// Lanes past the end of the sub-group read unspecified values; only lane 0's result, which
// never reads past the end, is kept.
static inline float sg_max(sycl::sub_group sg, float v) {
#pragma unroll
    for (int o = SG / 2; o > 0; o /= 2) {
        v = sycl::fmax(v, sycl::shift_group_left(sg, v, o));
    }
    return sycl::select_from_group(sg, v, 0);
}
static inline float sg_sum(sycl::sub_group sg, float v) {
#pragma unroll
    for (int o = SG / 2; o > 0; o /= 2) {
        v += sycl::shift_group_left(sg, v, o);
    }
    return sycl::select_from_group(sg, v, 0);
}
#else
static inline float sg_max(sycl::sub_group sg, float v) {
    return sycl::reduce_over_group(sg, v, sycl::maximum<float>());
}
static inline float sg_sum(sycl::sub_group sg, float v) {
    return sycl::reduce_over_group(sg, v, sycl::plus<float>());
}
#endif
#endif

#if REDUCE == 0
// Tree reductions over the WG work-items of a row, in the row's slice of local memory.
static inline float row_max(float v, float* red, const int l) {
    const auto g = sycl::ext::oneapi::this_work_item::get_work_group<2>();
    red[l] = v;
    sycl::group_barrier(g);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) {
            red[l] = sycl::fmax(red[l], red[l + s]);
        }
        sycl::group_barrier(g);
    }
    v = red[0];
    sycl::group_barrier(g);
    return v;
}
static inline float row_sum(float v, float* red, const int l) {
    const auto g = sycl::ext::oneapi::this_work_item::get_work_group<2>();
    red[l] = v;
    sycl::group_barrier(g);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) {
            red[l] += red[l + s];
        }
        sycl::group_barrier(g);
    }
    v = red[0];
    sycl::group_barrier(g);
    return v;
}
#elif REDUCE == 1
// A row is exactly one sub-group (`red` is not declared: the macros drop it).
#define row_max(v, red, l) sg_max(sycl::ext::oneapi::this_work_item::get_sub_group(), (v))
#define row_sum(v, red, l) sg_sum(sycl::ext::oneapi::this_work_item::get_sub_group(), (v))
#else
// Sub-group reductions, then the WG / SG partial results of the row through local memory.
static inline float row_max(float v, float* red, const int l) {
    const auto g = sycl::ext::oneapi::this_work_item::get_work_group<2>();
    const sycl::sub_group sg = sycl::ext::oneapi::this_work_item::get_sub_group();
    v = sg_max(sg, v);
    if (sg.get_local_linear_id() == 0) {
        red[l / SG] = v;
    }
    sycl::group_barrier(g);
    v = red[0];
    for (int k = 1; k < WG / SG; ++k) {
        v = sycl::fmax(v, red[k]);
    }
    sycl::group_barrier(g);
    return v;
}
static inline float row_sum(float v, float* red, const int l) {
    const auto g = sycl::ext::oneapi::this_work_item::get_work_group<2>();
    const sycl::sub_group sg = sycl::ext::oneapi::this_work_item::get_sub_group();
    v = sg_sum(sg, v);
    if (sg.get_local_linear_id() == 0) {
        red[l / SG] = v;
    }
    sycl::group_barrier(g);
    v = red[0];
    for (int k = 1; k < WG / SG; ++k) {
        v += red[k];
    }
    sycl::group_barrier(g);
    return v;
}
#endif

#if REDUCE == 0
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::work_group_size<RPG, WG>))
#else
extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::work_group_size<RPG, WG>))
SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::sub_group_size<SG>))
#endif
void softmax(const int ROWS, const int COLS,
             const float* X,
             float* Y) {
    const sycl::nd_item<2> it = sycl::ext::oneapi::this_work_item::get_nd_item<2>();
    const int l = it.get_local_id(1);
    const int r = it.get_global_id(0);
    // Rows past the end (the last group may be partial) compute the last row again and store
    // nothing, so that every work-item reaches every barrier.
    const bool live = r < ROWS;
    // A plain select, not sycl::min: the CPU runtime's vectoriser treats the builtin's result
    // as varying across work-items, so every row access became a gather or scatter (1.4x
    // slower on the Intel CPU device).
    const int row = live ? r : ROWS - 1;
    const float* x = X + (long)row * COLS;
    float* y = Y + (long)row * COLS;
    const int n = COLS / VW;
#if REDUCE == 0
    static syclexp::work_group_static<float[RPG * WG]> red_tile;
    float* red = &red_tile[0] + it.get_local_id(0) * WG;
#elif REDUCE == 2
    static syclexp::work_group_static<float[RPG * (WG / SG)]> red_tile;
    float* red = &red_tile[0] + it.get_local_id(0) * (WG / SG);
#endif
#if PREFETCH
    if (l == 0 && row + RPG < ROWS) {
        syclexp::prefetch(x + (long)RPG * COLS, COLS * sizeof(float));
    }
#endif

#if ALGO == 3
    // The row in registers: CHUNKS vectors per work-item, X read once.
    floatv v[CHUNKS];
    floatv mv = floatv(NEG_INF);
    for (int k = 0; k < CHUNKS; ++k) {
        const int i = l + k * WG;
        v[k] = i < n ? VLOAD(i, x) : floatv(NEG_INF);
        mv = sycl::fmax(mv, v[k]);
    }
    const float mx = row_max(HMAX(mv), red, l);
    floatv sv = floatv(0.0f);
    for (int k = 0; k < CHUNKS; ++k) {
        v[k] = sycl::exp(v[k] - mx);
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
    floatv m = floatv(NEG_INF);
    floatv s = floatv(0.0f);
    for (int i = l; i < n; i += WG) {
        const floatv v = VLOAD(i, x);
        const floatv m_new = sycl::fmax(m, v);
        s = s * sycl::exp(m - m_new) + sycl::exp(v - m_new);
        m = m_new;
    }
    const float mi = HMAX(m);
    // A work-item without columns (n < WG) has mi = -inf and contributes nothing.
    const float si = mi == NEG_INF ? 0.0f : HSUM(s * sycl::exp(m - mi));
    const float mx = row_max(mi, red, l);
    const float inv = 1.0f / row_sum(mi == NEG_INF ? 0.0f : si * sycl::exp(mi - mx), red, l);
    if (live) {
        for (int i = l; i < n; i += WG) {
            VSTORE_OUT(sycl::exp(VLOAD(i, x) - mx) * inv, i, y);
        }
    }
#else
    floatv mv = floatv(NEG_INF);
    for (int i = l; i < n; i += WG) {
        mv = sycl::fmax(mv, VLOAD(i, x));
    }
    const float mx = row_max(HMAX(mv), red, l);
    floatv sv = floatv(0.0f);
#if ALGO == 0
    for (int i = l; i < n; i += WG) {
        sv += sycl::exp(VLOAD(i, x) - mx);
    }
    const float inv = 1.0f / row_sum(HSUM(sv), red, l);
    if (live) {
        for (int i = l; i < n; i += WG) {
            VSTORE_OUT(sycl::exp(VLOAD(i, x) - mx) * inv, i, y);
        }
    }
#else
    // Each work-item scales only the exponentials it wrote itself: no barrier needed.
    for (int i = l; i < n; i += WG) {
        const floatv e = sycl::exp(VLOAD(i, x) - mx);
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
