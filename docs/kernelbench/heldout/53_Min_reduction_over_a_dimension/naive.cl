// One work-item per output element: the minimum over dim1 of x[b][:][j].
__kernel void min_naive(__global const float* x, __global float* out, const int batch_size, const int dim1, const int dim2) {
    const int o = get_global_id(0);
    if (o >= batch_size * dim2) return;
    const int b = o / dim2;
    const int j = o % dim2;
    float m = x[b * dim1 * dim2 + j];
    for (int i = 1; i < dim1; ++i) {
        m = fmin(m, x[(b * dim1 + i) * dim2 + j]);
    }
    out[o] = m;
}
