//! Direct 1-D convolution template (PyTorch's Conv1d, cross-correlation, no groups):
//! Y[b][o][t] = BIAS[o] + sum_{i,k} W[o][i][k] * X[b][i][t * S + k * D - P], zero outside the
//! input, for an input X[B][CI][L], weights W[CO][CI][K] and an output Y[B][CO][LOUT]. A task's
//! binding (kf_mutate::TaskBinding) gives the sizes as expressions over the task's sizes and
//! fixes HAS_BIAS and PADDED (whether P can be non-zero).
//!
//! The launch is three-dimensional (output positions, output-channel blocks, batch), so a
//! work-item finds its outputs without divisions. Each work-item keeps an OCT x TT tile of
//! outputs in registers: OCT output channels (each weight read once per tile, a scalar in a
//! register) times TT output positions (each input value read once per channel block).
//!
//! Structural switch: INTERLEAVE (1: a work-group's WG work-items take neighbouring positions,
//! t = group * WG * TT + j * WG + lid, so the runtime's vectoriser across work-items reads
//! neighbouring inputs; 0: each work-item TT consecutive positions; 2: each work-item TT
//! consecutive positions as TT / 16 explicit float16 vectors, `vec_type_hint(float16)` so that
//! the runtime does not vectorise across work-items as well). Tunables: TT, OCT, WG.
//!
//! With INTERLEAVE=2 a strided input (S > 1) is not gathered element by element where the
//! stride is 2 or 3: the work-item loads the S * 16 contiguous floats that hold a vector's
//! inputs and picks every S-th with shuffle2 (a gather with a run-time stride is what the
//! interleaved forms pay for on a CPU). Larger strides gather; vectors that reach outside the
//! input row (padding, the row's end) take a bounds-checked path.
#ifndef INTERLEAVE
#define INTERLEAVE 1
#endif
#ifndef TT
#define TT 1
#endif
#ifndef OCT
#define OCT 16
#endif
#ifndef WG
#define WG 16
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef PADDED
#define PADDED 1
#endif

#if INTERLEAVE == 2
#define CONV1D_HINT __attribute__((vec_type_hint(float16)))
#else
#define CONV1D_HINT
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) CONV1D_HINT
void conv1d(const int B, const int CI, const int CO, const int L, const int K, const int S,
            const int D, const int P, const int LOUT,
            __global const float* X, __global const float* W, __global float* Y,
            __global const float* BIAS) {
#if INTERLEAVE == 2
#define TV (TT / 16)
    const int t_first = get_global_id(0) * TT;
    const int o_first = get_global_id(1) * OCT;
    const int b = get_global_id(2);
    const int CK = CI * K;
    // Every vector of the work-item lies inside the output and reads only inside its input
    // rows, contiguous loads included (they end S - 1 floats past a vector's last input).
    const int inside = t_first + TT <= LOUT && t_first * S - P >= 0 &&
                       (t_first + TT) * S + (K - 1) * D - P <= L;
    float16 acc[OCT][TV];
#pragma unroll
    for (int o = 0; o < OCT; ++o) {
#pragma unroll
        for (int j = 0; j < TV; ++j) {
#if HAS_BIAS
            acc[o][j] = (float16)(BIAS[o_first + o]);
#else
            acc[o][j] = (float16)(0.0f);
#endif
        }
    }
    // The input loads are chosen once per work-item, outside the loops: a branch on the stride
    // inside them measured a third slower.
#define CONV1D_VECTOR_LOOP(LOAD)                                                               \
    for (int i = 0; i < CI; ++i) {                                                             \
        __global const float* x = X + ((long)b * CI + i) * L;                                  \
        __global const float* w = W + ((long)o_first * CI + i) * K;                            \
        for (int k = 0; k < K; ++k) {                                                          \
            float16 xv[TV];                                                                    \
            _Pragma("unroll") for (int j = 0; j < TV; ++j) {                                   \
                const int t0 = t_first + 16 * j;                                               \
                __global const float* xk = x + t0 * S + k * D - P;                             \
                LOAD;                                                                          \
            }                                                                                  \
            _Pragma("unroll") for (int o = 0; o < OCT; ++o) {                                  \
                const float16 wv = (float16)(w[(long)o * CK + k]);                             \
                _Pragma("unroll") for (int j = 0; j < TV; ++j) {                               \
                    acc[o][j] = fma(wv, xv[j], acc[o][j]);                                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
    if (inside && S == 1) {
        CONV1D_VECTOR_LOOP(xv[j] = vload16(0, xk))
    } else if (inside && S == 2) {
        CONV1D_VECTOR_LOOP(xv[j] = shuffle2(vload16(0, xk), vload16(0, xk + 16),
                                            (uint16)(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22,
                                                     24, 26, 28, 30)))
    } else if (inside && S == 3) {
        // Inputs 0..10 from the first 32 floats, 11..15 from the next 16.
        CONV1D_VECTOR_LOOP(xv[j] = shuffle2(shuffle2(vload16(0, xk), vload16(0, xk + 16),
                                                     (uint16)(0, 3, 6, 9, 12, 15, 18, 21, 24,
                                                              27, 30, 0, 0, 0, 0, 0)),
                                            vload16(0, xk + 32),
                                            (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 17, 20,
                                                     23, 26, 29)))
    } else if (inside) {
        CONV1D_VECTOR_LOOP(xv[j] = (float16)(xk[0], xk[S], xk[2 * S], xk[3 * S], xk[4 * S],
                                             xk[5 * S], xk[6 * S], xk[7 * S], xk[8 * S],
                                             xk[9 * S], xk[10 * S], xk[11 * S], xk[12 * S],
                                             xk[13 * S], xk[14 * S], xk[15 * S]))
    } else {
        // Outputs past the end or inputs outside the row (padding): lane by lane, checked.
        CONV1D_VECTOR_LOOP(float lanes[16]; for (int l = 0; l < 16; ++l) {
            const int at = (t0 + l) * S + k * D - P;
            lanes[l] = (t0 + l < LOUT && at >= 0 && at < L) ? x[at] : 0.0f;
        } xv[j] = vload16(0, lanes))
    }
#pragma unroll
    for (int o = 0; o < OCT; ++o) {
        __global float* y = Y + ((long)b * CO + o_first + o) * LOUT;
#pragma unroll
        for (int j = 0; j < TV; ++j) {
            const int t0 = t_first + 16 * j;
            if (t0 + 16 <= LOUT) {
                vstore16(acc[o][j], 0, y + t0);
            } else {
                float lanes[16];
                vstore16(acc[o][j], 0, lanes);
                for (int l = 0; t0 + l < LOUT; ++l) {
                    y[t0 + l] = lanes[l];
                }
            }
        }
    }
#else
    const int lid = get_local_id(0);
#if INTERLEAVE
    const int t_first = get_group_id(0) * (WG * TT) + lid;
#define T_STEP WG
#else
    const int t_first = get_global_id(0) * TT;
#define T_STEP 1
#endif
    const int o_first = get_global_id(1) * OCT;
    const int b = get_global_id(2);
    float acc[OCT][TT];
#pragma unroll
    for (int o = 0; o < OCT; ++o) {
#pragma unroll
        for (int j = 0; j < TT; ++j) {
#if HAS_BIAS
            acc[o][j] = BIAS[o_first + o];
#else
            acc[o][j] = 0.0f;
#endif
        }
    }
    for (int i = 0; i < CI; ++i) {
        __global const float* x = X + ((long)b * CI + i) * L;
        __global const float* w = W + ((long)o_first * CI + i) * K;
        for (int k = 0; k < K; ++k) {
            float xv[TT];
#pragma unroll
            for (int j = 0; j < TT; ++j) {
                const int t = t_first + j * T_STEP;
                const int at = t * S + k * D - P;
#if PADDED
                xv[j] = (t < LOUT && at >= 0 && at < L) ? x[at] : 0.0f;
#else
                xv[j] = t < LOUT ? x[at] : 0.0f;
#endif
            }
#pragma unroll
            for (int o = 0; o < OCT; ++o) {
                const float wv = w[(long)o * CI * K + k];
#pragma unroll
                for (int j = 0; j < TT; ++j) {
                    acc[o][j] = fma(wv, xv[j], acc[o][j]);
                }
            }
        }
    }
#pragma unroll
    for (int o = 0; o < OCT; ++o) {
        __global float* y = Y + ((long)b * CO + o_first + o) * LOUT;
#pragma unroll
        for (int j = 0; j < TT; ++j) {
            const int t = t_first + j * T_STEP;
            if (t < LOUT) {
                y[t] = acc[o][j];
            }
        }
    }
#endif
}
