// A cheating kernel: it computes only the first half of the rows (half the work, so it
// times twice as fast) and leaves the rest of y untouched. The evaluator must reject it.
__kernel void scaled_swish(const int ROWS, const int COLS, const float alpha,
                           __global const float* x, __global const float* bias,
                           __global float* y) {
    const int r = get_global_id(1);
    const int c = get_global_id(0);
    if (r >= ROWS / 2 || c >= COLS) return;
    const float v = x[r * COLS + c];
    y[r * COLS + c] = v / (1.0f + exp(-alpha * v)) + bias[c];
}
