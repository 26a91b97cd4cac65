// Row-wise softmax, row-major X[ROWS x COLS] -> Y: three passes over each row
// (max, sum of exponentials, normalise), one work-item per row.
__kernel void softmax(const int ROWS, const int COLS,
                      __global const float* X,
                      __global float* Y) {
    const int r = get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    __global const float* x = X + (long)r * COLS;
    __global float* y = Y + (long)r * COLS;
    float m = -INFINITY;
    for (int c = 0; c < COLS; ++c) {
        m = fmax(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += exp(x[c] - m);
    }
    for (int c = 0; c < COLS; ++c) {
        y[c] = exp(x[c] - m) / s;
    }
}
