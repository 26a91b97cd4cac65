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
//! neighbouring inputs; 0: each work-item TT consecutive positions). Tunables: TT, OCT, WG.
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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void conv1d(const int B, const int CI, const int CO, const int L, const int K, const int S,
            const int D, const int P, const int LOUT,
            __global const float* X, __global const float* W, __global float* Y,
            __global const float* BIAS) {
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
}
