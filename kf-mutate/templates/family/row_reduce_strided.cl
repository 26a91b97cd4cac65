//! Reduction of rows along a dimension that is not the last (a sum over dim 1 of a
//! [B][LEN][INNER] tensor): OUTER blocks of LEN x INNER floats, element f of row (o, p) at
//! X[(o * LEN + f) * INNER + p], one result per row at Y[o * INNER + p]. A task's binding
//! (kf_mutate::TaskBinding) fixes the operation (REDUCE_OP: 1 sum, 2 mean, 3 max, 4 min,
//! 5 argmax, 6 argmin: the first index of the extreme, as int).
//!
//! Each work-item reduces CPW x VW neighbouring rows at once: every load is a vector of VW
//! consecutive floats, CPW such vectors side by side per step along the row, so no reduction
//! crosses work-items, the CPW accumulators are independent chains (the adds overlap instead
//! of waiting on one another) and each step reads CPW x VW contiguous floats (whole cache
//! lines the prefetcher follows). A block of positions that crosses INNER is shifted back to
//! end at INNER (its results written only for the positions no other work-item writes), so
//! the last work-item is as fast as the others; with fewer positions than a block, one vector
//! at a time likewise, or row by row where INNER < VW.
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
#ifndef REDUCE_OP
#define REDUCE_OP 1
#endif

#if VW == 1
#define VTYPE float
#define ITYPE int
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif VW == 4
#define VTYPE float4
#define ITYPE int4
#define VLOAD(p) vload4(0, p)
#define VSTORE(v, p) vstore4(v, 0, p)
#elif VW == 8
#define VTYPE float8
#define ITYPE int8
#define VLOAD(p) vload8(0, p)
#define VSTORE(v, p) vstore8(v, 0, p)
#elif VW == 16
#define VTYPE float16
#define ITYPE int16
#define VLOAD(p) vload16(0, p)
#define VSTORE(v, p) vstore16(v, 0, p)
#endif
#if REDUCE_OP >= 5
#define OUT_T int
#else
#define OUT_T float
#endif

#if REDUCE_OP == 3
#define KF_COMBINE(a, v) fmax(a, v)
#elif REDUCE_OP == 4
#define KF_COMBINE(a, v) fmin(a, v)
#else
#define KF_COMBINE(a, v) ((a) + (v))
#endif
#if REDUCE_OP == 2
#define KF_FINISH(a) ((a) / LEN)
#else
#define KF_FINISH(a) (a)
#endif
// Reduces N vectors of VW neighbouring rows starting at x, the c-th written by STORE(v, c).
#if REDUCE_OP >= 5
// The first index of the extreme: a strictly better value moves the index (select on the
// comparison's lanes, so vectors and scalars alike).
#if REDUCE_OP == 5
#define KF_BETTER(v, best) ((v) > (best))
#else
#define KF_BETTER(v, best) ((v) < (best))
#endif
#define KF_REDUCE_VECTORS(N, x, STORE)                                                     \
    {                                                                                      \
        VTYPE best[N];                                                                     \
        ITYPE index[N];                                                                    \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) {                                  \
            best[c] = VLOAD((x) + c * VW);                                                 \
            index[c] = 0;                                                                  \
        }                                                                                  \
        for (int f = 1; f < LEN; ++f) {                                                    \
            _Pragma("unroll") for (int c = 0; c < (N); ++c) {                              \
                const VTYPE v = VLOAD((x) + (long)f * INNER + c * VW);                     \
                const ITYPE better = KF_BETTER(v, best[c]);                                \
                best[c] = select(best[c], v, better);                                      \
                index[c] = select(index[c], (ITYPE)f, better);                             \
            }                                                                              \
        }                                                                                  \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) STORE(index[c], c);                \
    }
#define KF_REDUCE_ROWS_SCALAR(x, out)                                                      \
    {                                                                                      \
        float best = *(x);                                                                 \
        int index = 0;                                                                     \
        for (int f = 1; f < LEN; ++f) {                                                    \
            const float v = (x)[(long)f * INNER];                                          \
            if (KF_BETTER(v, best)) {                                                      \
                best = v;                                                                  \
                index = f;                                                                 \
            }                                                                              \
        }                                                                                  \
        (out) = index;                                                                     \
    }
#else
#define KF_REDUCE_VECTORS(N, x, STORE)                                                     \
    {                                                                                      \
        VTYPE acc[N];                                                                      \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) acc[c] = VLOAD((x) + c * VW);      \
        for (int f = 1; f < LEN; ++f) {                                                    \
            _Pragma("unroll") for (int c = 0; c < (N); ++c)                                \
                acc[c] = KF_COMBINE(acc[c], VLOAD((x) + (long)f * INNER + c * VW));        \
        }                                                                                  \
        _Pragma("unroll") for (int c = 0; c < (N); ++c) STORE(KF_FINISH(acc[c]), c);       \
    }
#define KF_REDUCE_ROWS_SCALAR(x, out)                                                      \
    {                                                                                      \
        float acc = *(x);                                                                  \
        for (int f = 1; f < LEN; ++f) {                                                    \
            acc = KF_COMBINE(acc, (x)[(long)f * INNER]);                                   \
        }                                                                                  \
        (out) = KF_FINISH(acc);                                                            \
    }
#endif
#define KF_STORE_BLOCK(v, c) VSTORE(v, y + p0 + (c) * VW)
#define KF_STORE_TAIL(v, c) VSTORE(v, tail + (c) * VW)

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void row_reduce_strided(const int OUTER, const int LEN, const int INNER,
                        __global const float* X, __global OUT_T* Y) {
    const int p0 = get_global_id(0) * VW * CPW;
    const int o = get_global_id(1);
    __global const float* x = X + (long)o * LEN * INNER;
    __global OUT_T* y = Y + (long)o * INNER;
    if (p0 + VW * CPW <= INNER) {
        KF_REDUCE_VECTORS(CPW, x + p0, KF_STORE_BLOCK)
    } else if (INNER >= VW * CPW) {
        // The last block, shifted back to end at INNER: its first positions are written by
        // the work-item before, so only the rest is written here.
        const int pv = INNER - VW * CPW;
        OUT_T tail[VW * CPW];
        KF_REDUCE_VECTORS(CPW, x + pv, KF_STORE_TAIL)
        for (int lane = p0 - pv; lane < VW * CPW; ++lane) {
            y[pv + lane] = tail[lane];
        }
    } else if (INNER >= VW) {
        // Fewer positions than a block: one vector at a time, the last shifted back to end at
        // INNER.
        for (int pc = p0; pc < INNER && pc < p0 + VW * CPW; pc += VW) {
            const int pv = min(pc, INNER - VW);
            OUT_T tail[VW];
            KF_REDUCE_VECTORS(1, x + pv, KF_STORE_TAIL)
            for (int lane = pc - pv; lane < VW; ++lane) {
                y[pv + lane] = tail[lane];
            }
        }
    } else {
        // Fewer positions than one vector: row by row, as scalars.
        for (int p = p0; p < INNER; ++p) {
            KF_REDUCE_ROWS_SCALAR(x + p, y[p])
        }
    }
}
