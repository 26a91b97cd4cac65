//! Row-wise softmax template in SYCL, row-major X[ROWS x COLS] -> Y: one work-item per row at
//! a time (RPI consecutive rows per work-item), WG work-items per work-group; the SYCL
//! rendering of ../softmax_row.cl (same switches and tunables). Every work-item walks its row,
//! VW floats at a time, and keeps VW partial maxima and sums that are combined at the end of
//! each sweep.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW    1 (scalar) or 4, 8, 16 (sycl::vec<float, VW> loads and stores along the row)
//!   ALGO  0: three sweeps over X (max; sum of exponentials; normalise, exp computed again)
//!         1: three sweeps, exp computed once (max; exponentials written to Y and summed;
//!            Y scaled in place)
//!         2: online softmax (running maximum and a running sum rescaled by exp(m - m_new)
//!            in one sweep; normalise in a second sweep)
//!         3: the exponentials computed once into a private buffer of CHUNKS vectors (on a
//!            CPU a stack array that stays in L1): max sweep; exponentials stored and summed;
//!            the buffer scaled into Y. With RPI > 1 the exponential sweep also takes the next
//!            row's maximum, so only a work-item's first row has a maximum sweep of its own
//!         4: blocked online softmax: as 2, but the running maximum moves once per block of
//!            ACC vectors (one rescaling exp per block); two sweeps, Y written once
//! Tunables: WG (work-items per work-group), RPI (consecutive rows per work-item), CHUNKS
//! (ALGO 3's buffer, in vectors: COLS <= CHUNKS * VW), STREAM (1: the last sweep writes Y
//! with non-temporal stores, which skip the read-for-ownership of Y's cache lines: 8 bytes of
//! traffic per element instead of 12 when the rows do not stay in cache), EXP (0 sycl::exp, 1
//! sycl::native::exp, 2 sycl::exp2 of x * log2(e) - max * log2(e), 3 the same argument through
//! a polynomial exp2), ACC (independent accumulators per sweep), PREFETCH_ROW (0 none, 1 the
//! next row prefetched when a row starts, 2 one vector of it per iteration of the second
//! sweep; sycl_ext_oneapi_prefetch).
// Row-wise softmax (SYCL): one work-item per row at a time.
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
#ifndef EXP
#define EXP 0
#endif
#ifndef ACC
#define ACC 1
#endif
#ifndef PREFETCH_ROW
#define PREFETCH_ROW 0
#endif
#ifndef RPI
#define RPI 1
#endif
#ifndef CHUNKS
#define CHUNKS 64
#endif

namespace syclexp = sycl::ext::oneapi::experimental;

#define NEG_INF (-std::numeric_limits<float>::infinity())

#if VW == 1
typedef float floatv;
typedef int intv;
#define CONVERT_INTV(v) static_cast<int>(v)
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#define HMAX(v) (v)
#define HSUM(v) (v)
#else
typedef sycl::vec<float, VW> floatv;
typedef sycl::vec<int, VW> intv;
#define CONVERT_INTV(v) (v).template convert<int, sycl::rounding_mode::rtz>()
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

// exp(v - m) for the row maximum m (a scalar, or per-lane maxima) and its prescaled copy
// ml = m * log2(e), as the tunable EXP chooses (a compile-time constant: one branch stays).
#define LOG2E_F 1.44269504088896341f
#define EXP_SHIFTED(v, m, ml)                                                  \
    (EXP == 1   ? floatv(sycl::native::exp((v) - (m)))                         \
     : EXP == 2 ? floatv(sycl::exp2((v) * LOG2E_F - (ml)))                     \
     : EXP == 3 ? poly_exp2((v) * LOG2E_F - (ml))                              \
                : floatv(sycl::exp((v) - (m))))

// 2^t for t <= 0: 2^n from the exponent bits, n = rint(t), times 2^f for f = t - n in
// [-1/2, 1/2] from its degree-6 Taylor polynomial in f ln 2 (truncation error below 1.3e-7,
// relative); t is clamped at -126 (below, the result would be subnormal). sycl::mad lets
// the compiler fuse each step into one fma without the relaxed-math mode OpenCL C gets.
static inline floatv poly_exp2(floatv t) {
    t = sycl::fmax(t, floatv(-126.0f));
    const floatv n = sycl::rint(t);
    const floatv f = t - n;
    floatv p = floatv(1.5403530393381608e-4f);
    p = sycl::mad(p, f, floatv(1.3333558146428443e-3f));
    p = sycl::mad(p, f, floatv(9.6181291076284772e-3f));
    p = sycl::mad(p, f, floatv(5.5504108664821580e-2f));
    p = sycl::mad(p, f, floatv(2.4022650695910071e-1f));
    p = sycl::mad(p, f, floatv(6.9314718055994531e-1f));
    p = sycl::mad(p, f, floatv(1.0f));
    return sycl::bit_cast<floatv>(sycl::bit_cast<intv>(p) + (CONVERT_INTV(n) << 23));
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void softmax(const int ROWS, const int COLS,
             const float* X,
             float* Y) {
    const int n = COLS / VW;
    // The sweeps' loops run ACC vectors at a time into ACC independent accumulators (the
    // last n % ACC vectors one at a time into the first).
    const int n_acc = n - n % ACC;
#if ALGO == 3
    floatv buf[CHUNKS];
    float mx = 0.0f;
#endif
    // RPI consecutive rows per work-item, one after the other.
    const int r0 = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0) * RPI;
    for (int k = 0; k < RPI; ++k) {
        const int r = r0 + k;
        if (r >= ROWS) {
            return;
        }
        const float* x = X + (long)r * COLS;
        float* y = Y + (long)r * COLS;
        // The next row (the one this thread runs next) is fetched from memory while this row
        // is computed from the cache: PREFETCH_ROW 1 asks for all of it here, 2 one vector per
        // iteration of the sweep after the first (so that the request is spread over the
        // computation).
        const bool has_next = r + 1 < ROWS;
        if (PREFETCH_ROW == 1 && has_next) {
            syclexp::prefetch(x + COLS, COLS);
        }
#define PREFETCH_NEXT(i)                                                       \
    do {                                                                       \
        if (PREFETCH_ROW == 2 && has_next) {                                   \
            syclexp::prefetch(x + COLS + (long)(i) * VW, VW);                  \
        }                                                                      \
    } while (0)
#if ALGO == 4
        // One sweep in blocks of ACC vectors: per lane a running maximum that moves once per
        // block, and the running sum rescaled by exp(m - m_new) when it does.
        floatv m = floatv(NEG_INF);
        floatv s = floatv(0.0f);
        for (int i = 0; i < n_acc; i += ACC) {
            floatv v[ACC];
            floatv bm = floatv(NEG_INF);
            for (int a = 0; a < ACC; ++a) {
                v[a] = VLOAD(i + a, x);
                bm = sycl::fmax(bm, v[a]);
            }
            const floatv m_new = sycl::fmax(m, bm);
            const floatv ml_new = m_new * LOG2E_F;
            s *= EXP_SHIFTED(m, m_new, ml_new);
            for (int a = 0; a < ACC; ++a) {
                s += EXP_SHIFTED(v[a], m_new, ml_new);
            }
            m = m_new;
        }
        for (int i = n_acc; i < n; ++i) {
            const floatv v = VLOAD(i, x);
            const floatv m_new = sycl::fmax(m, v);
            const floatv ml_new = m_new * LOG2E_F;
            s = s * EXP_SHIFTED(m, m_new, ml_new) + EXP_SHIFTED(v, m_new, ml_new);
            m = m_new;
        }
        const float mx = HMAX(m);
        const float mxl = mx * LOG2E_F;
        const float inv = 1.0f / HSUM(s * EXP_SHIFTED(m, mx, mxl));
        for (int i = 0; i < n; ++i) {
            PREFETCH_NEXT(i);
            VSTORE_OUT(EXP_SHIFTED(VLOAD(i, x), mx, mxl) * inv, i, y);
        }
#elif ALGO == 3
        // The exponentials kept in private memory (a stack array in L1 on a CPU): the maximum
        // sweep reads X from memory, the exponential sweep reads it again from the cache and
        // stores each exponential once into the buffer while summing, the last sweep scales
        // the buffer into Y. One exp per element, where ALGO 4 needs two; and no
        // read-for-ownership of Y, where ALGO 1 writes Y and reads it back.
        if (k == 0) {
            // The work-item's first row: a maximum sweep of its own (the later rows' maxima
            // come from the sweep before them).
            floatv mv[ACC];
            for (int a = 0; a < ACC; ++a) {
                mv[a] = floatv(NEG_INF);
            }
            for (int i = 0; i < n_acc; i += ACC) {
                for (int a = 0; a < ACC; ++a) {
                    mv[a] = sycl::fmax(mv[a], VLOAD(i + a, x));
                }
            }
            for (int i = n_acc; i < n; ++i) {
                mv[0] = sycl::fmax(mv[0], VLOAD(i, x));
            }
            for (int a = 1; a < ACC; ++a) {
                mv[0] = sycl::fmax(mv[0], mv[a]);
            }
            mx = HMAX(mv[0]);
        }
        const float mxl = mx * LOG2E_F;
        // With several rows per work-item (RPI > 1) the exponential sweep also reads the next
        // row, from memory, and takes its maximum: this row's arithmetic overlaps the next
        // row's memory traffic, and the next row needs no maximum sweep of its own. At the
        // work-item's last row it reads this row again instead (from the cache; unused).
        const float* xn = k + 1 < RPI && has_next ? x + COLS : x;
        floatv sv[ACC];
        floatv mn[ACC];
        for (int a = 0; a < ACC; ++a) {
            sv[a] = floatv(0.0f);
            mn[a] = floatv(NEG_INF);
        }
        for (int i = 0; i < n_acc; i += ACC) {
            for (int a = 0; a < ACC; ++a) {
                PREFETCH_NEXT(i + a);
                const floatv e = EXP_SHIFTED(VLOAD(i + a, x), mx, mxl);
                buf[i + a] = e;
                sv[a] += e;
                if (RPI > 1) {
                    mn[a] = sycl::fmax(mn[a], VLOAD(i + a, xn));
                }
            }
        }
        for (int i = n_acc; i < n; ++i) {
            PREFETCH_NEXT(i);
            const floatv e = EXP_SHIFTED(VLOAD(i, x), mx, mxl);
            buf[i] = e;
            sv[0] += e;
            if (RPI > 1) {
                mn[0] = sycl::fmax(mn[0], VLOAD(i, xn));
            }
        }
        for (int a = 1; a < ACC; ++a) {
            sv[0] += sv[a];
            mn[0] = sycl::fmax(mn[0], mn[a]);
        }
        const float inv = 1.0f / HSUM(sv[0]);
        for (int i = 0; i < n; ++i) {
            VSTORE_OUT(buf[i] * inv, i, y);
        }
        if (RPI > 1) {
            mx = HMAX(mn[0]);
        }
#elif ALGO == 2
        // One sweep: per-lane running maximum, running sum rescaled when the maximum grows.
        floatv m = floatv(NEG_INF);
        floatv s = floatv(0.0f);
        for (int i = 0; i < n; ++i) {
            const floatv v = VLOAD(i, x);
            const floatv m_new = sycl::fmax(m, v);
            const floatv ml_new = m_new * LOG2E_F;
            s = s * EXP_SHIFTED(m, m_new, ml_new) + EXP_SHIFTED(v, m_new, ml_new);
            m = m_new;
        }
        const float mx = HMAX(m);
        const float mxl = mx * LOG2E_F;
        const float inv = 1.0f / HSUM(s * EXP_SHIFTED(m, mx, mxl));
        for (int i = 0; i < n; ++i) {
            PREFETCH_NEXT(i);
            VSTORE_OUT(EXP_SHIFTED(VLOAD(i, x), mx, mxl) * inv, i, y);
        }
#else
        floatv mv[ACC];
        for (int a = 0; a < ACC; ++a) {
            mv[a] = floatv(NEG_INF);
        }
        for (int i = 0; i < n_acc; i += ACC) {
            for (int a = 0; a < ACC; ++a) {
                mv[a] = sycl::fmax(mv[a], VLOAD(i + a, x));
            }
        }
        for (int i = n_acc; i < n; ++i) {
            mv[0] = sycl::fmax(mv[0], VLOAD(i, x));
        }
        for (int a = 1; a < ACC; ++a) {
            mv[0] = sycl::fmax(mv[0], mv[a]);
        }
        const float mx = HMAX(mv[0]);
        const float mxl = mx * LOG2E_F;
        floatv sv[ACC];
        for (int a = 0; a < ACC; ++a) {
            sv[a] = floatv(0.0f);
        }
#if ALGO == 0
        for (int i = 0; i < n_acc; i += ACC) {
            for (int a = 0; a < ACC; ++a) {
                PREFETCH_NEXT(i + a);
                sv[a] += EXP_SHIFTED(VLOAD(i + a, x), mx, mxl);
            }
        }
        for (int i = n_acc; i < n; ++i) {
            PREFETCH_NEXT(i);
            sv[0] += EXP_SHIFTED(VLOAD(i, x), mx, mxl);
        }
        for (int a = 1; a < ACC; ++a) {
            sv[0] += sv[a];
        }
        const float inv = 1.0f / HSUM(sv[0]);
        for (int i = 0; i < n; ++i) {
            VSTORE_OUT(EXP_SHIFTED(VLOAD(i, x), mx, mxl) * inv, i, y);
        }
#else
        for (int i = 0; i < n_acc; i += ACC) {
            for (int a = 0; a < ACC; ++a) {
                PREFETCH_NEXT(i + a);
                const floatv e = EXP_SHIFTED(VLOAD(i + a, x), mx, mxl);
                VSTORE(e, i + a, y);
                sv[a] += e;
            }
        }
        for (int i = n_acc; i < n; ++i) {
            PREFETCH_NEXT(i);
            const floatv e = EXP_SHIFTED(VLOAD(i, x), mx, mxl);
            VSTORE(e, i, y);
            sv[0] += e;
        }
        for (int a = 1; a < ACC; ++a) {
            sv[0] += sv[a];
        }
        const float inv = 1.0f / HSUM(sv[0]);
        for (int i = 0; i < n; ++i) {
            VSTORE_OUT(VLOAD(i, y) * inv, i, y);
        }
#endif
#endif
    }
}
