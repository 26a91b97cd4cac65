// One work-item per output element: the maximum over its (padded, dilated) window.
__kernel void maxpool_naive(__global const float* x, __global float* out, const int batch_size, const int channels,
                            const int height, const int width, const int kernel_size, const int stride,
                            const int padding, const int dilation) {
    const int oh = (height + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    const int ow = (width + 2 * padding - dilation * (kernel_size - 1) - 1) / stride + 1;
    const int o = get_global_id(0);
    if (o >= batch_size * channels * oh * ow) return;
    const int oj = o % ow;
    const int oi = (o / ow) % oh;
    const int bc = o / (ow * oh);
    float m = -INFINITY;
    for (int ki = 0; ki < kernel_size; ++ki) {
        for (int kj = 0; kj < kernel_size; ++kj) {
            const int i = oi * stride - padding + ki * dilation;
            const int j = oj * stride - padding + kj * dilation;
            if (i >= 0 && i < height && j >= 0 && j < width) {
                m = fmax(m, x[(bc * height + i) * width + j]);
            }
        }
    }
    out[o] = m;
}
