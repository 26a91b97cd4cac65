// Naive OpenCL baseline for KernelBench level 1 problem 87: 1x1 convolution without bias,
// out[b][o][h][w] = sum_i weight[o][i] * x[b][i][h][w]. One output per work-item.
__kernel void conv_pointwise(__global const float* x, __global const float* weight,
                             __global float* out,
                             const int batch_size, const int in_channels,
                             const int out_channels, const int width, const int height) {
    const long plane = (long)height * width;
    const long o = get_global_id(0);
    if (o >= (long)batch_size * out_channels * plane) {
        return;
    }
    const long p = o % plane;
    const long oc = (o / plane) % out_channels;
    const long b = o / (plane * out_channels);
    __global const float* xb = x + b * in_channels * plane + p;
    __global const float* w = weight + oc * in_channels;
    float s = 0.0f;
    for (int i = 0; i < in_channels; ++i) {
        s += w[i] * xb[(long)i * plane];
    }
    out[o] = s;
}
