// One work-item per output element; alpha = 1.
__kernel void elu_naive(__global const float* x, __global float* out, const int batch_size, const int dim) {
    const int i = get_global_id(0);
    if (i >= batch_size * dim) return;
    const float v = x[i];
    out[i] = v > 0.0f ? v : (exp(v) - 1.0f);
}
