// One work-item per row: the row's L2 norm, then the row divided by it.
__kernel void l2norm_naive(__global const float* x, __global float* out, const int batch_size, const int dim) {
    const int row = get_global_id(0);
    if (row >= batch_size) return;
    float sum = 0.0f;
    for (int i = 0; i < dim; ++i) {
        const float v = x[row * dim + i];
        sum += v * v;
    }
    const float norm = sqrt(sum);
    for (int i = 0; i < dim; ++i) {
        out[row * dim + i] = x[row * dim + i] / norm;
    }
}
