// Naive baseline: one work-item per row, walking its columns one by one.
__kernel void scaled_swish(const int ROWS, const int COLS, const float alpha,
                           __global const float* x, __global const float* bias,
                           __global float* y) {
    const int r = get_global_id(0);
    if (r >= ROWS) return;
    for (int c = 0; c < COLS; ++c) {
        const float v = x[r * COLS + c];
        y[r * COLS + c] = v / (1.0f + exp(-alpha * v)) + bias[c];
    }
}
