//! Row normalisation over a strided dimension (RMS norm over the channels of an NCHW tensor):
//! OUTER blocks of LEN x INNER floats, element f of row (o, p) at X[(o * LEN + f) * INNER + p],
//! each row normalised by statistics of its own LEN elements, Y = X * scale + shift, then times
//! W[f] and plus B[f] where the task has them. A task's binding (kf_mutate::TaskBinding) fixes
//! the operation (NORM_OP: 1 layer norm, 2 RMS norm, 3 L1 norm, 4 L2 norm), HAS_W and HAS_B.
//!
//! Each work-item normalises VW neighbouring rows (positions p) at once: every load is a vector
//! of VW consecutive floats, and the row statistics are vectors too, so no reduction crosses
//! work-items. A block of positions that crosses INNER is finished row by row.
//!
//! Structural switch: VW (1, 4, 8, 16). Tunable: WG.
#ifndef VW
#define VW 16
#endif
#ifndef WG
#define WG 16
#endif
#ifndef NORM_OP
#define NORM_OP 2
#endif
#ifndef HAS_W
#define HAS_W 0
#endif
#ifndef HAS_B
#define HAS_B 0
#endif

#if VW == 1
#define VTYPE float
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif VW == 4
#define VTYPE float4
#define VLOAD(p) vload4(0, p)
#define VSTORE(v, p) vstore4(v, 0, p)
#elif VW == 8
#define VTYPE float8
#define VLOAD(p) vload8(0, p)
#define VSTORE(v, p) vstore8(v, 0, p)
#elif VW == 16
#define VTYPE float16
#define VLOAD(p) vload16(0, p)
#define VSTORE(v, p) vstore16(v, 0, p)
#endif

// The statistics of rows read as T (a vector of neighbouring rows, or one row), then the
// normalised rows written.
#if NORM_OP == 3
#define KF_STAT(v) fabs(v)
#else
#define KF_STAT(v) (v)
#endif
#if NORM_OP == 1
#define KF_SCALE(s, q) rsqrt(fmax((q) / LEN - ((s) / LEN) * ((s) / LEN), 0.0f) + EPS)
#define KF_SHIFT(s, scale) (-((s) / LEN) * (scale))
#elif NORM_OP == 2
#define KF_SCALE(s, q) rsqrt((q) / LEN + EPS)
#define KF_SHIFT(s, scale) 0.0f
#elif NORM_OP == 3
#define KF_SCALE(s, q) (1.0f / (s))
#define KF_SHIFT(s, scale) 0.0f
#else
#define KF_SCALE(s, q) rsqrt(q)
#define KF_SHIFT(s, scale) 0.0f
#endif
#if HAS_W
#define KF_WEIGHT(o, f) ((o) * W[f])
#else
#define KF_WEIGHT(o, f) (o)
#endif
#if HAS_B
#define KF_BIAS(o, f) ((o) + B[f])
#else
#define KF_BIAS(o, f) (o)
#endif
#define KF_NORMALISE_ROWS(T, LOAD, STORE, x, y)                                             \
    {                                                                                      \
        T s = 0.0f;                                                                        \
        T q = 0.0f;                                                                        \
        for (int f = 0; f < LEN; ++f) {                                                    \
            const T v = LOAD((x) + (long)f * INNER);                                       \
            s += KF_STAT(v);                                                               \
            q += v * v;                                                                    \
        }                                                                                  \
        const T scale = KF_SCALE(s, q);                                                    \
        const T shift = KF_SHIFT(s, scale);                                                \
        for (int f = 0; f < LEN; ++f) {                                                    \
            const T v = LOAD((x) + (long)f * INNER);                                       \
            STORE(KF_BIAS(KF_WEIGHT(v * scale + shift, f), f), (y) + (long)f * INNER);     \
        }                                                                                  \
    }
#define KF_SCALAR_LOAD(p) (*(p))
#define KF_SCALAR_STORE(v, p) (*(p) = (v))

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void row_norm_strided(const int OUTER, const int LEN, const int INNER, const float EPS,
                      __global const float* X, __global float* Y,
                      __global const float* W, __global const float* B) {
    const int p0 = get_global_id(0) * VW;
    const long block = (long)get_global_id(1) * LEN * INNER;
    if (p0 + VW <= INNER) {
        KF_NORMALISE_ROWS(VTYPE, VLOAD, VSTORE, X + block + p0, Y + block + p0)
    } else {
        for (int p = p0; p < INNER; ++p) {
            KF_NORMALISE_ROWS(float, KF_SCALAR_LOAD, KF_SCALAR_STORE, X + block + p, Y + block + p)
        }
    }
}
