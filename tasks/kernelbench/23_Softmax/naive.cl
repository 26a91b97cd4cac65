// Naive OpenCL baseline for KernelBench level 1 problem 23: row-wise softmax over
// x[batch_size][dim], one work-item per row, three passes (max, sum, normalise).
__kernel void softmax_rows(__global const float* x, __global float* out,
                           const int batch_size, const int dim) {
    const int r = get_global_id(0);
    if (r >= batch_size) {
        return;
    }
    __global const float* row = x + (long)r * dim;
    __global float* y = out + (long)r * dim;
    float m = -INFINITY;
    for (int c = 0; c < dim; ++c) {
        m = fmax(m, row[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < dim; ++c) {
        s += exp(row[c] - m);
    }
    for (int c = 0; c < dim; ++c) {
        y[c] = exp(row[c] - m) / s;
    }
}
