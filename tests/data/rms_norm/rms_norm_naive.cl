// Naive baseline: one work-item per row; one loop for the mean square, one for the result.
__kernel void rms_norm(const int ROWS, const int LEN,
                       __global const float* x, __global const float* w,
                       __global float* y) {
    const int r = get_global_id(0);
    if (r >= ROWS) return;
    float sum = 0.0f;
    for (int c = 0; c < LEN; ++c) {
        const float v = x[r * LEN + c];
        sum += v * v;
    }
    const float scale = 1.0f / sqrt(sum / LEN + 1e-6f);
    for (int c = 0; c < LEN; ++c) {
        y[r * LEN + c] = x[r * LEN + c] * scale * w[c];
    }
}
