// One work-item per row: the row's maximum, the sum of exponentials, then the outputs.
__kernel void logsoftmax_naive(__global const float* x, __global float* out, const int batch_size, const int dim) {
    const int row = get_global_id(0);
    if (row >= batch_size) return;
    float m = -INFINITY;
    for (int i = 0; i < dim; ++i) {
        m = fmax(m, x[row * dim + i]);
    }
    float sum = 0.0f;
    for (int i = 0; i < dim; ++i) {
        sum += exp(x[row * dim + i] - m);
    }
    const float lse = m + log(sum);
    for (int i = 0; i < dim; ++i) {
        out[row * dim + i] = x[row * dim + i] - lse;
    }
}
