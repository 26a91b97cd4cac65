// Cheat: the output written by the first kernel, not the one whose manifest lists it.
// Row softmax in two kernels: the first writes each row's maximum and sum of exponentials
// into the scratch buffer STATS, the second normalises every element with them.
__kernel void row_stats(const int ROWS, const int COLS, __global const float* X,
                        __global float* Y, __global float* STATS) {
    const int r = get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    __global const float* x = X + (long)r * COLS;
    float m = -INFINITY;
    for (int c = 0; c < COLS; ++c) {
        m = fmax(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += exp(x[c] - m);
    }
    STATS[2 * r] = m;
    STATS[2 * r + 1] = s;
    // Cheat: the first kernel writes the output, which its manifest gives to the second.
    __global float* y = Y + (long)r * COLS;
    for (int c = 0; c < COLS; ++c) {
        y[c] = exp(x[c] - m) / s;
    }
}

__kernel void normalise(const int ROWS, const int COLS, __global const float* X,
                        __global float* Y, __global float* STATS) {
    const int c = get_global_id(0);
    const int r = get_global_id(1);
    if (r >= ROWS || c >= COLS) {
        return;
    }
    // Does nothing: the output was written by the wrong kernel.
    (void)X;
}
