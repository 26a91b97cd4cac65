//! Reduction of rows along a dimension that is not the last (a sum over dim 1 of a
//! [B][LEN][INNER] tensor): OUTER blocks of LEN x INNER floats, element f of row (o, p) at
//! X[(o * LEN + f) * INNER + p], one result per row at Y[o * INNER + p]. A task's binding
//! (kf_mutate::TaskBinding) fixes the operation (REDUCE_OP: 1 sum, 2 mean, 3 max, 4 min,
//! 5 argmax, 6 argmin: the first index of the extreme, as int).
//!
//! Each work-item reduces VW neighbouring rows at once: every load is a vector of VW
//! consecutive floats, so no reduction crosses work-items. A block of positions that crosses
//! INNER is finished row by row.
//!
//! Structural switch: VW (1, 4, 8, 16). Tunable: WG.
#ifndef VW
#define VW 16
#endif
#ifndef WG
#define WG 16
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
#if REDUCE_OP >= 5
// The first index of the extreme: a strictly better value moves the index (select on the
// comparison's lanes, so vectors and scalars alike).
#if REDUCE_OP == 5
#define KF_BETTER(v, best) ((v) > (best))
#else
#define KF_BETTER(v, best) ((v) < (best))
#endif
#define KF_REDUCE_ROWS(T, IT, LOAD, STORE, x, y)                                           \
    {                                                                                      \
        T best = LOAD(x);                                                                  \
        IT index = 0;                                                                      \
        for (int f = 1; f < LEN; ++f) {                                                    \
            const T v = LOAD((x) + (long)f * INNER);                                       \
            const IT better = KF_BETTER(v, best);                                          \
            best = select(best, v, better);                                                \
            index = select(index, (IT)f, better);                                          \
        }                                                                                  \
        STORE(index, y);                                                                   \
    }
#else
#define KF_REDUCE_ROWS(T, IT, LOAD, STORE, x, y)                                           \
    {                                                                                      \
        T acc = LOAD(x);                                                                   \
        for (int f = 1; f < LEN; ++f) {                                                    \
            acc = KF_COMBINE(acc, LOAD((x) + (long)f * INNER));                            \
        }                                                                                  \
        STORE(KF_FINISH(acc), y);                                                          \
    }
#endif
#define KF_SCALAR_LOAD(p) (*(p))
#define KF_SCALAR_STORE(v, p) (*(p) = (v))

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void row_reduce_strided(const int OUTER, const int LEN, const int INNER,
                        __global const float* X, __global OUT_T* Y) {
    const int p0 = get_global_id(0) * VW;
    const int o = get_global_id(1);
    __global const float* x = X + (long)o * LEN * INNER;
    __global OUT_T* y = Y + (long)o * INNER;
    if (p0 + VW <= INNER) {
        KF_REDUCE_ROWS(VTYPE, ITYPE, VLOAD, VSTORE, x + p0, y + p0)
    } else {
        for (int p = p0; p < INNER; ++p) {
            KF_REDUCE_ROWS(float, int, KF_SCALAR_LOAD, KF_SCALAR_STORE, x + p, y + p)
        }
    }
}
