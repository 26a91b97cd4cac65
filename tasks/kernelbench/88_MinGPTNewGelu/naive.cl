// Naive OpenCL baseline for KernelBench level 1 problem 88_MinGPTNewGelu: out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Elementwise over batch_size x dim floats; each work-item handles ITEMS elements strided by
// the global size, so neighbouring work-items touch neighbouring floats.
__kernel void new_gelu(__global const float* x, __global float* out,
                 const int batch_size, const int dim) {
    const long n = (long)batch_size * dim;
    const long stride = get_global_size(0);
    for (int j = 0; j < ITEMS; ++j) {
        const long i = get_global_id(0) + j * stride;
        if (i < n) {
            const float v = x[i];
            out[i] = 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
        }
    }
}
