// Naive OpenCL baseline for KernelBench level 1 problem 21_Sigmoid: out = sigmoid(x).
// Elementwise over batch_size x dim floats; each work-item handles ITEMS elements strided by
// the global size, so neighbouring work-items touch neighbouring floats.
__kernel void sigmoid_act(__global const float* x, __global float* out,
                 const int batch_size, const int dim) {
    const long n = (long)batch_size * dim;
    const long stride = get_global_size(0);
    for (int j = 0; j < ITEMS; ++j) {
        const long i = get_global_id(0) + j * stride;
        if (i < n) {
            const float v = x[i];
            out[i] = 1.0f / (1.0f + exp(-v));
        }
    }
}
