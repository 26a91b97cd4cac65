// Naive OpenCL baseline for KernelBench level 1 problem 26_GELU_: out = 0.5 x (1 + erf(x / sqrt 2)).
// Elementwise over batch_size x dim floats; each work-item handles ITEMS elements strided by
// the global size, so neighbouring work-items touch neighbouring floats.
__kernel void gelu(__global const float* x, __global float* out,
                 const int batch_size, const int dim) {
    const long n = (long)batch_size * dim;
    const long stride = get_global_size(0);
    for (int j = 0; j < ITEMS; ++j) {
        const long i = get_global_id(0) + j * stride;
        if (i < n) {
            const float v = x[i];
            out[i] = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
        }
    }
}
