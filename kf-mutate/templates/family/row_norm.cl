//! Row normalisation template: ROWS rows of LEN contiguous floats, each normalised by
//! statistics of its own row, Y = X * scale + shift, then times W and plus B (per element of
//! the row) where the task has them. A task's binding (kf_mutate::TaskBinding) fixes the
//! operation (NORM_OP: 1 layer norm, 2 RMS norm, 3 L1 norm, 4 L2 norm) and whether the task has
//! a weight (HAS_W) and a bias (HAS_B); EPS is bound to the task's epsilon.
//!
//! One work-group of WG work-items per row. One sweep gathers the row's sum (of |x| for the L1
//! norm) and sum of squares, VW floats at a time in vector accumulators, so the mean and the
//! variance need one read of the row; a second sweep writes the result.
//!
//! Structural switches: VW (1 scalar, or 4, 8, 16: vloadN / vstoreN along the row) and REDUCE
//! (how the WG work-items of a row combine their partial sums: 0 tree reduction in local
//! memory, 1 sub-group reductions whose results meet in local memory). Tunables: WG.
#ifndef VW
#define VW 16
#endif
#ifndef REDUCE
#define REDUCE 0
#endif
#ifndef WG
#define WG 1
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
    const int row = get_group_id(0);
    const int lid = get_local_id(0);
    __global const float* x = X + (long)row * LEN;
    __global float* y = Y + (long)row * LEN;
    const int vectors = LEN / VW;
    VTYPE s = 0.0f;
    VTYPE q = 0.0f;
    for (int i = lid; i < vectors; i += WG) {
        const VTYPE v = VLOAD(x, i);
#if NORM_OP == 3
        s += fabs(v);
#else
        s += v;
#endif
        q += v * v;
    }
    float sum = HSUM(s);
    float squares = HSUM(q);
#if WG > 1
#if REDUCE == 0
    __local float partial_sum[WG];
    __local float partial_squares[WG];
    partial_sum[lid] = sum;
    partial_squares[lid] = squares;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG / 2; span > 0; span /= 2) {
        if (lid < span) {
            partial_sum[lid] += partial_sum[lid + span];
            partial_squares[lid] += partial_squares[lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    sum = partial_sum[0];
    squares = partial_squares[0];
#else
    __local float partial_sum[WG];
    __local float partial_squares[WG];
    sum = sub_group_reduce_add(sum);
    squares = sub_group_reduce_add(squares);
    if (get_sub_group_local_id() == 0) {
        partial_sum[get_sub_group_id()] = sum;
        partial_squares[get_sub_group_id()] = squares;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    sum = 0.0f;
    squares = 0.0f;
    for (uint g = 0; g < get_num_sub_groups(); ++g) {
        sum += partial_sum[g];
        squares += partial_squares[g];
    }
#endif
#endif
#if NORM_OP == 1
    const float mean = sum / LEN;
    const float scale = rsqrt(fmax(squares / LEN - mean * mean, 0.0f) + EPS);
    const float shift = -mean * scale;
#elif NORM_OP == 2
    const float scale = rsqrt(squares / LEN + EPS);
    const float shift = 0.0f;
#elif NORM_OP == 3
    const float scale = 1.0f / sum;
    const float shift = 0.0f;
#else
    const float scale = rsqrt(squares);
    const float shift = 0.0f;
#endif
    for (int i = lid; i < vectors; i += WG) {
        VTYPE o = VLOAD(x, i) * scale + shift;
#if HAS_W
        o *= VLOAD(W, i);
#endif
#if HAS_B
        o += VLOAD(B, i);
#endif
        VSTORE(o, y, i);
    }
}
