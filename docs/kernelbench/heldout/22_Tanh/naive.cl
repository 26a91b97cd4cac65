// One work-item per output element.
__kernel void tanh_naive(__global const float* x, __global float* out, const int batch_size, const int dim) {
    const int i = get_global_id(0);
    if (i >= batch_size * dim) return;
    out[i] = tanh(x[i]);
}
