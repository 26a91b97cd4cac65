//! Element-wise map template: Y[i] = MAP(X[i]) for i < N. A task's binding
//! (kf_mutate::TaskBinding) defines MAP from the task file's `[family] expr` (an OpenCL C
//! expression of one element), so one template serves any element-wise operator.
//!
//! Work-group g covers WG * CHUNK vectors of VW floats, contiguous; work-item l takes vectors
//! l, l + WG, … of its group's block, so with WG = 1 each work-item streams one contiguous block
//! and with VW = 1 neighbouring work-items touch neighbouring floats. A vector that crosses N is
//! finished element by element.
//!
//! Structural switches: VW (1 scalar, or 4, 8, 16: vloadN / vstoreN with MAP applied to the
//! vector: the expression must be valid for vector types, which the evaluator checks by
//! compiling it) and NATIVE (1: exp, exp2, log, log2, sqrt, rsqrt, sin, cos and tan
//! become their native_* forms, erf and tanh are computed through native_exp; the evaluator's
//! verification judges the rounding). Tunables: CHUNK (vectors per work-item), WG, FAST_MATH
//! (-cl-fast-relaxed-math).
#ifndef VW
#define VW 16
#endif
#ifndef NATIVE
#define NATIVE 0
#endif
#ifndef CHUNK
#define CHUNK 16
#endif
#ifndef WG
#define WG 1
#endif
#ifndef MAP
#define MAP(v) (v)
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

#if NATIVE
// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7) and tanh through one
// exponential, both with native_exp and native_recip; overloaded for the vector types the
// switch VW gives.
#define KF_NATIVE_MATH(T)                                                                   \
    __attribute__((overloadable)) T kf_native_erf(T v) {                                    \
        const T a = fabs(v);                                                                \
        const T t = native_recip((T)1.0f + 0.3275911f * a);                                 \
        const T p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f               \
                    + t * (-1.453152027f + t * 1.061405429f))));                            \
        return copysign((T)1.0f - p * native_exp(-a * a), v);                               \
    }                                                                                       \
    __attribute__((overloadable)) T kf_native_tanh(T v) {                                   \
        const T e = native_exp(-2.0f * fabs(v));                                            \
        return copysign(((T)1.0f - e) * native_recip((T)1.0f + e), v);                      \
    }
KF_NATIVE_MATH(float)
#if VW > 1
KF_NATIVE_MATH(VTYPE)
#endif
#define exp(v) native_exp(v)
#define exp2(v) native_exp2(v)
#define log(v) native_log(v)
#define log2(v) native_log2(v)
#define sqrt(v) native_sqrt(v)
#define rsqrt(v) native_rsqrt(v)
#define sin(v) native_sin(v)
#define cos(v) native_cos(v)
#define tan(v) native_tan(v)
#define erf(v) kf_native_erf(v)
#define tanh(v) kf_native_tanh(v)
#endif

#if VW == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(VTYPE)))
#endif
void map(const int N, __global const float* X, __global float* Y) {
    const long block = (long)get_group_id(0) * (WG * CHUNK);
    const int lid = get_local_id(0);
#pragma unroll
    for (int c = 0; c < CHUNK; ++c) {
        const long i = (block + c * WG + lid) * VW;
        if (i + VW <= N) {
            const VTYPE v = VLOAD(X + i);
            VSTORE(MAP(v), Y + i);
        } else {
            for (long j = i; j < N; ++j) {
                const float v = X[j];
                Y[j] = MAP(v);
            }
        }
    }
}
