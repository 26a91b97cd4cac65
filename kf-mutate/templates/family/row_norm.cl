//! Row normalisation template: ROWS rows of LEN contiguous floats, each normalised by
//! statistics of its own row, Y = X * scale + shift, then times W and plus B (per element of
//! the row) where the task has them. A task's binding (kf_mutate::TaskBinding) fixes the
//! operation (NORM_OP: 1 layer norm, 2 RMS norm, 3 L1 norm, 4 L2 norm) and whether the task has
//! a weight (HAS_W) and a bias (HAS_B); EPS is bound to the task's epsilon.
//!
//! One work-group of WG work-items per RPG consecutive rows. One sweep gathers each row's sum
//! (of |x| for the L1 norm) and sum of squares, VW floats at a time in vector accumulators (two
//! per row and statistic, so that the additions overlap), the RPG rows side by side; the mean
//! and the variance need one read of the row. A second sweep writes the result, backwards (the
//! rows' ends are still cached), reading each vector of W and B once for the RPG rows.
//!
//! The kernel is one launch with no scratch memory, so a row's statistics cannot be split
//! across work-groups (no work-group may wait for another): for few long rows, RPG decides how
//! the rows are shared among the cores, and WG how many work-items of one group share a row.
//!
//! Structural switches: VW (1 scalar, or 4, 8, 16: vloadN / vstoreN along the row) and REDUCE
//! (how the WG work-items of a row combine their partial sums: 0 tree reduction in local
//! memory, 1 sub-group reductions whose results meet in local memory). Tunables: WG, RPG
//! (rows per work-group).
#ifndef VW
#define VW 16
#endif
#ifndef REDUCE
#define REDUCE 0
#endif
#ifndef WG
#define WG 1
#endif
#ifndef RPG
#define RPG 1
#endif
#ifndef NORM_OP
#define NORM_OP 1
#endif
#ifndef HAS_W
#define HAS_W 0
#endif
#ifndef HAS_B
#define HAS_B 0
#endif

#if VW == 1
#define VTYPE float
#define VLOAD(p, i) ((p)[i])
#define VSTORE(v, p, i) ((p)[i] = (v))
#define HSUM(v) (v)
#elif VW == 4
#define VTYPE float4
#define VLOAD(p, i) vload4(i, p)
#define VSTORE(v, p, i) vstore4(v, i, p)
#define HSUM(v) (((v).s0 + (v).s1) + ((v).s2 + (v).s3))
#elif VW == 8
#define VTYPE float8
#define VLOAD(p, i) vload8(i, p)
#define VSTORE(v, p, i) vstore8(v, i, p)
#define HSUM(v) ((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7)))
#elif VW == 16
#define VTYPE float16
#define VLOAD(p, i) vload16(i, p)
#define VSTORE(v, p, i) vstore16(v, i, p)
#define HSUM(v) (((((v).s0 + (v).s1) + ((v).s2 + (v).s3)) + (((v).s4 + (v).s5) + ((v).s6 + (v).s7))) \
               + ((((v).s8 + (v).s9) + ((v).sa + (v).sb)) + (((v).sc + (v).sd) + ((v).se + (v).sf))))
#endif

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void row_norm(const int ROWS, const int LEN, const float EPS,
              __global const float* X, __global float* Y,
              __global const float* W, __global const float* B) {
    const int first = get_group_id(0) * RPG;
    const int lid = get_local_id(0);
    const int vectors = LEN / VW;
    // Row r of the group's RPG rows starts at x + r * LEN. Past the last row the last group
    // takes the last row again (clamped): the same cache lines loaded twice, the same values
    // stored twice by the same work-item, and no branch in the sweeps.
    long offsets[RPG];
    for (int r = 0; r < RPG; ++r) {
        offsets[r] = (long)min(first + r, ROWS - 1) * LEN;
    }
    // Two accumulators per row and statistic (even and odd steps of the sweep), so that
    // consecutive additions do not wait on each other.
    VTYPE s[RPG], s2[RPG], q[RPG], q2[RPG];
    for (int r = 0; r < RPG; ++r) {
        s[r] = 0.0f;
        s2[r] = 0.0f;
        q[r] = 0.0f;
        q2[r] = 0.0f;
    }
    int i = lid;
    for (; i + WG < vectors; i += 2 * WG) {
        for (int r = 0; r < RPG; ++r) {
            const VTYPE a = VLOAD(X + offsets[r], i);
            const VTYPE b = VLOAD(X + offsets[r], i + WG);
#if NORM_OP == 3
            s[r] += fabs(a);
            s2[r] += fabs(b);
#else
            s[r] += a;
            s2[r] += b;
#endif
            q[r] = fma(a, a, q[r]);
            q2[r] = fma(b, b, q2[r]);
        }
    }
    if (i < vectors) {
        for (int r = 0; r < RPG; ++r) {
            const VTYPE a = VLOAD(X + offsets[r], i);
#if NORM_OP == 3
            s[r] += fabs(a);
#else
            s[r] += a;
#endif
            q[r] = fma(a, a, q[r]);
        }
    }
    float sum[RPG], squares[RPG];
    for (int r = 0; r < RPG; ++r) {
        sum[r] = HSUM(s[r] + s2[r]);
        squares[r] = HSUM(q[r] + q2[r]);
    }
#if WG > 1
#if REDUCE == 0
    __local float partial_sum[RPG][WG];
    __local float partial_squares[RPG][WG];
    for (int r = 0; r < RPG; ++r) {
        partial_sum[r][lid] = sum[r];
        partial_squares[r][lid] = squares[r];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG / 2; span > 0; span /= 2) {
        if (lid < span) {
            for (int r = 0; r < RPG; ++r) {
                partial_sum[r][lid] += partial_sum[r][lid + span];
                partial_squares[r][lid] += partial_squares[r][lid + span];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int r = 0; r < RPG; ++r) {
        sum[r] = partial_sum[r][0];
        squares[r] = partial_squares[r][0];
    }
#else
    __local float partial_sum[RPG][WG];
    __local float partial_squares[RPG][WG];
    for (int r = 0; r < RPG; ++r) {
        sum[r] = sub_group_reduce_add(sum[r]);
        squares[r] = sub_group_reduce_add(squares[r]);
    }
    if (get_sub_group_local_id() == 0) {
        for (int r = 0; r < RPG; ++r) {
            partial_sum[r][get_sub_group_id()] = sum[r];
            partial_squares[r][get_sub_group_id()] = squares[r];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int r = 0; r < RPG; ++r) {
        sum[r] = 0.0f;
        squares[r] = 0.0f;
        for (uint g = 0; g < get_num_sub_groups(); ++g) {
            sum[r] += partial_sum[r][g];
            squares[r] += partial_squares[r][g];
        }
    }
#endif
#endif
    float scale[RPG], shift[RPG];
    for (int r = 0; r < RPG; ++r) {
#if NORM_OP == 1
        const float mean = sum[r] / LEN;
        scale[r] = rsqrt(fmax(squares[r] / LEN - mean * mean, 0.0f) + EPS);
        shift[r] = -mean * scale[r];
#elif NORM_OP == 2
        scale[r] = rsqrt(squares[r] / LEN + EPS);
        shift[r] = 0.0f;
#elif NORM_OP == 3
        scale[r] = 1.0f / sum[r];
        shift[r] = 0.0f;
#else
        scale[r] = rsqrt(squares[r]);
        shift[r] = 0.0f;
#endif
    }
    // The second sweep runs backwards: the rows' last vectors, read last by the first sweep,
    // are still in the nearest cache. The weight and bias are read once for the RPG rows.
    for (int block = (vectors - 1) / WG * WG; block >= 0; block -= WG) {
        const int j = block + lid;
        if (j < vectors) {
#if HAS_W
            const VTYPE w = VLOAD(W, j);
#endif
#if HAS_B
            const VTYPE b = VLOAD(B, j);
#endif
            for (int r = 0; r < RPG; ++r) {
                VTYPE o = VLOAD(X + offsets[r], j) * scale[r] + shift[r];
#if HAS_W
                o *= w;
#endif
#if HAS_B
                o += b;
#endif
                VSTORE(o, Y + offsets[r], j);
            }
        }
    }
}
