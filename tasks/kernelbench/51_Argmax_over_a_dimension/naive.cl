// Naive OpenCL baseline for KernelBench level 1 problem 51: out = argmax(x, dim=1) over
// x[batch_size][dim1][dim2], as int (the first index of the maximum, like torch).
__kernel void argmax_dim1(__global const float* x, __global int* out,
                          const int batch_size, const int dim1, const int dim2) {
    const long o = get_global_id(0);
    if (o >= (long)batch_size * dim2) {
        return;
    }
    const long b = o / dim2, k = o % dim2;
    __global const float* p = x + b * dim1 * dim2 + k;
    float best = p[0];
    int index = 0;
    for (int j = 1; j < dim1; ++j) {
        const float v = p[(long)j * dim2];
        if (v > best) {
            best = v;
            index = j;
        }
    }
    out[o] = index;
}
