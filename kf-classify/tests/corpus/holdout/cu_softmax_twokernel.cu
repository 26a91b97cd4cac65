// Softmax as two kernels: row statistics (online max/sum in one sweep), then the write.
__global__ void row_stats(const float* x, float2* stats, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float m = -INFINITY, s = 0.f;
    for (int i = 0; i < cols; ++i) {
        const float v = x[r * cols + i];
        const float mn = fmaxf(m, v);
        s = s * expf(m - mn) + expf(v - mn);
        m = mn;
    }
    stats[r] = make_float2(m, s);
}

__global__ void row_write(const float* x, const float2* stats, float* y, int rows, int cols) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * cols) return;
    const float2 st = stats[idx / cols];
    y[idx] = expf(x[idx] - st.x) / st.y;
}
