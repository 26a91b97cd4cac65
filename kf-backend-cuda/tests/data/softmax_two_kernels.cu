// Row softmax in two CUDA kernels: row statistics into the scratch buffer STATS, then an
// element-wise normalisation.
extern "C" __global__ void row_stats(const int ROWS, const int COLS, const float* X, float* Y,
                                     float* STATS) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= ROWS) {
        return;
    }
    const float* x = X + (long long)r * COLS;
    float m = -__int_as_float(0x7f800000);
    for (int c = 0; c < COLS; ++c) {
        m = fmaxf(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += expf(x[c] - m);
    }
    STATS[2 * r] = m;
    STATS[2 * r + 1] = s;
}

extern "C" __global__ void normalise(const int ROWS, const int COLS, const float* X, float* Y,
                                     float* STATS) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= ROWS || c >= COLS) {
        return;
    }
    const long long i = (long long)r * COLS + c;
    Y[i] = expf(X[i] - STATS[2 * r]) / STATS[2 * r + 1];
}
