// CUDA online softmax, one warp per row, float4 loads; running max and sum per lane,
// merged across the warp with shuffles.
extern "C" __global__ void softmax(const float* x, float* y, int rows, int cols) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * cols);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)row * cols);
    float m = -INFINITY, s = 0.0f;
    for (int i = lane; i < cols / 4; i += 32) {
        const float4 v = xr[i];
        const float mx = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
        const float m_new = fmaxf(m, mx);
        s = s * __expf(m - m_new) + __expf(v.x - m_new) + __expf(v.y - m_new) + __expf(v.z - m_new) + __expf(v.w - m_new);
        m = m_new;
    }
    for (int off = 16; off > 0; off >>= 1) {
        const float mo = __shfl_xor_sync(0xffffffff, m, off);
        const float so = __shfl_xor_sync(0xffffffff, s, off);
        const float m_new = fmaxf(m, mo);
        s = s * __expf(m - m_new) + so * __expf(mo - m_new);
        m = m_new;
    }
    const float inv = 1.0f / s;
    for (int i = lane; i < cols / 4; i += 32) {
        const float4 v = xr[i];
        yr[i] = make_float4(__expf(v.x - m) * inv, __expf(v.y - m) * inv, __expf(v.z - m) * inv, __expf(v.w - m) * inv);
    }
}
