// Row-wise softmax, row-major X[ROWS x COLS] -> Y: three passes over each row
// (max, sum of exponentials, normalise), one thread per row.
extern "C" __global__ void softmax(const int ROWS, const int COLS,
                                   const float* X,
                                   float* Y) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= ROWS) {
        return;
    }
    const float* x = X + (long long)r * COLS;
    float* y = Y + (long long)r * COLS;
    float m = -__int_as_float(0x7f800000);  // -infinity (NVRTC has no INFINITY macro)
    for (int c = 0; c < COLS; ++c) {
        m = fmaxf(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += expf(x[c] - m);
    }
    for (int c = 0; c < COLS; ++c) {
        y[c] = expf(x[c] - m) / s;
    }
}
