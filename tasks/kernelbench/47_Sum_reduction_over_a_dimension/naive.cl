// Naive OpenCL baseline for KernelBench level 1 problem 47: out = sum(x, dim=1, keepdim=True)
// over x[batch_size][dim1][dim2]. One work-item per output (b, k), looping over dim1; this
// baseline implements the shipped reduce_dim = 1.
__kernel void sum_dim1(__global const float* x, __global float* out,
                       const int batch_size, const int dim1, const int dim2,
                       const int reduce_dim) {
    const long o = get_global_id(0);
    if (o >= (long)batch_size * dim2) {
        return;
    }
    const long b = o / dim2, k = o % dim2;
    __global const float* p = x + b * dim1 * dim2 + k;
    float s = 0.0f;
    for (int j = 0; j < dim1; ++j) {
        s += p[(long)j * dim2];
    }
    out[o] = s;
}
