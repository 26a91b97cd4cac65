// Naive OpenCL baseline for KernelBench level 1 problem 36: RMS norm over the feature
// dimension of x[batch_size][features][dim1][dim2], eps = 1e-5. One work-item per
// (b, spatial position), two passes over the features.
__kernel void rms_norm(__global const float* x, __global float* out,
                       const int batch_size, const int features, const int dim1,
                       const int dim2) {
    const long plane = (long)dim1 * dim2;
    const long o = get_global_id(0);
    if (o >= (long)batch_size * plane) {
        return;
    }
    const long b = o / plane, i = o % plane;
    const long base = b * features * plane + i;
    float sq = 0.0f;
    for (int f = 0; f < features; ++f) {
        const float v = x[base + f * plane];
        sq += v * v;
    }
    const float inv = 1.0f / sqrt(sq / features + 1e-5f);
    for (int f = 0; f < features; ++f) {
        out[base + f * plane] = x[base + f * plane] * inv;
    }
}
