// Naive OpenCL baseline for KernelBench level 1 problem 76: Conv1d without bias or padding,
// with stride and dilation: out[b][o][t] = sum_{i,k} weight[o][i][k] * x[b][i][t*stride + k*dilation].
// One output per work-item.
__kernel void conv1d(__global const float* x, __global const float* weight,
                     __global float* out,
                     const int batch_size, const int in_channels, const int out_channels,
                     const int kernel_size, const int length, const int stride,
                     const int dilation) {
    const int length_out = (length - dilation * (kernel_size - 1) - 1) / stride + 1;
    const long o = get_global_id(0);
    if (o >= (long)batch_size * out_channels * length_out) {
        return;
    }
    const long t = o % length_out;
    const long oc = (o / length_out) % out_channels;
    const long b = o / ((long)length_out * out_channels);
    float s = 0.0f;
    for (int i = 0; i < in_channels; ++i) {
        __global const float* xi = x + (b * in_channels + i) * length + t * stride;
        __global const float* w = weight + (oc * in_channels + i) * kernel_size;
        for (int k = 0; k < kernel_size; ++k) {
            s += w[k] * xi[k * dilation];
        }
    }
    out[o] = s;
}
