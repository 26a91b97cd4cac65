//! Row normalisation over a strided dimension (RMS norm over the channels of an NCHW tensor):
//! OUTER blocks of LEN x INNER floats, element f of row (o, p) at X[(o * LEN + f) * INNER + p],
//! each row normalised by statistics of its own LEN elements, Y = X * scale + shift, then times
//! W[f] and plus B[f] where the task has them. A task's binding (kf_mutate::TaskBinding) fixes
//! the operation (NORM_OP: 1 layer norm, 2 RMS norm, 3 L1 norm, 4 L2 norm), HAS_W and HAS_B.
//!
//! Each work-item normalises CPW x VW neighbouring rows (positions p) at once: every load is a
//! vector of VW consecutive floats, CPW such vectors side by side per step along the rows, and
//! the row statistics are vectors too, so no reduction crosses work-items, the CPW
//! accumulators are independent chains, and each step reads CPW x VW contiguous floats (whole
//! cache lines the prefetcher follows). A block of positions that crosses INNER is shifted
//! back to end at INNER (its results written only for the positions no other work-item
//! writes), so the last work-item is as fast as the others; with fewer positions than a block,
//! one vector at a time likewise, or row by row where INNER < VW.
//!
//! Structural switch: VW (1, 4, 8, 16). Tunable: CPW (vectors per work-item), WG.
#ifndef VW
#define VW 16
#endif
#ifndef CPW
#define CPW 4
#endif
#ifndef WG
#define WG 4
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
// Normalises N vectors of VW neighbouring rows starting at x, the output of feature f of the
// c-th written by STORE(v, f, c).
#define KF_NORMALISE_VECTORS(N, x, STORE)                                                  \
    {                                                                                      \
        VTYPE s[N], q[N];                                                                  \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) {                                  \
            s[c] = 0.0f;                                                                   \
            q[c] = 0.0f;                                                                   \
        }                                                                                  \
        for (int f = 0; f < LEN; ++f) {                                                    \
            _Pragma("unroll") for (int c = 0; c < (N); ++c) {                              \
                const VTYPE v = VLOAD((x) + (long)f * INNER + c * VW);                     \
                s[c] += KF_STAT(v);                                                        \
                q[c] += v * v;                                                             \
            }                                                                              \
        }                                                                                  \
        VTYPE scale[N], shift[N];                                                          \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) {                                  \
            scale[c] = KF_SCALE(s[c], q[c]);                                               \
            shift[c] = KF_SHIFT(s[c], scale[c]);                                           \
        }                                                                                  \
        for (int f = 0; f < LEN; ++f) {                                                    \
            _Pragma("unroll") for (int c = 0; c < (N); ++c) {                              \
                const VTYPE v = VLOAD((x) + (long)f * INNER + c * VW);                     \
                STORE(KF_BIAS(KF_WEIGHT(v * scale[c] + shift[c], f), f), f, c);            \
            }                                                                              \
        }                                                                                  \
    }
// One row as scalars, for fewer positions than one vector.
#define KF_NORMALISE_ROW_SCALAR(x, y)                                                      \
    {                                                                                      \
        float s = 0.0f;                                                                    \
        float q = 0.0f;                                                                    \
        for (int f = 0; f < LEN; ++f) {                                                    \
            const float v = (x)[(long)f * INNER];                                          \
            s += KF_STAT(v);                                                               \
            q += v * v;                                                                    \
        }                                                                                  \
        const float scale = KF_SCALE(s, q);                                                \
        const float shift = KF_SHIFT(s, scale);                                            \
        for (int f = 0; f < LEN; ++f) {                                                    \
            const float v = (x)[(long)f * INNER];                                          \
            (y)[(long)f * INNER] = KF_BIAS(KF_WEIGHT(v * scale + shift, f), f);            \
        }                                                                                  \
    }
// A block's outputs go straight to Y; a shifted block's through a private vector, of which
// only the lanes from `first` on are written.
#define KF_STORE_BLOCK(v, f, c) VSTORE(v, y + (long)(f) * INNER + p0 + (c) * VW)
#define KF_STORE_SHIFTED(v, f, c)                                                          \
    {                                                                                      \
        float lanes[VW];                                                                   \
        VSTORE(v, lanes);                                                                  \
        for (int lane = max(first - (c) * VW, 0); lane < VW; ++lane) {                     \
            y[(long)(f) * INNER + pv + (c) * VW + lane] = lanes[lane];                     \
        }                                                                                  \
    }

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void row_norm_strided(const int OUTER, const int LEN, const int INNER, const float EPS,
                      __global const float* X, __global float* Y,
                      __global const float* W, __global const float* B) {
    const int p0 = get_global_id(0) * VW * CPW;
    const long block = (long)get_global_id(1) * LEN * INNER;
    __global const float* x = X + block;
    __global float* y = Y + block;
    if (p0 + VW * CPW <= INNER) {
        KF_NORMALISE_VECTORS(CPW, x + p0, KF_STORE_BLOCK)
    } else if (INNER >= VW * CPW) {
        // The last block, shifted back to end at INNER.
        const int pv = INNER - VW * CPW;
        const int first = p0 - pv;
        KF_NORMALISE_VECTORS(CPW, x + pv, KF_STORE_SHIFTED)
    } else if (INNER >= VW) {
        // Fewer positions than a block: one vector at a time, the last shifted back.
        for (int pc = p0; pc < INNER && pc < p0 + VW * CPW; pc += VW) {
            const int pv = min(pc, INNER - VW);
            const int first = pc - pv;
            KF_NORMALISE_VECTORS(1, x + pv, KF_STORE_SHIFTED)
        }
    } else {
        for (int p = p0; p < INNER; ++p) {
            KF_NORMALISE_ROW_SCALAR(x + p, y + p)
        }
    }
}
