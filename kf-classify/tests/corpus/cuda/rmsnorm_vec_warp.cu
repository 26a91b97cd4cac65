// CUDA RMS norm, one warp per row, float4 loads: a sweep for the sum of squares, a warp
// reduction, a second sweep to scale.
extern "C" __global__ void rmsnorm(const float* x, const float* w, float* y, int rows, int cols, float eps) {
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float4* xr = reinterpret_cast<const float4*>(x + (size_t)row * cols);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* yr = reinterpret_cast<float4*>(y + (size_t)row * cols);
    float ss = 0.0f;
    for (int i = lane; i < cols / 4; i += 32) {
        const float4 v = xr[i];
        ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_down_sync(0xffffffff, ss, off);
    ss = __shfl_sync(0xffffffff, ss, 0);
    const float r = rsqrtf(ss / cols + eps);
    for (int i = lane; i < cols / 4; i += 32) {
        const float4 v = xr[i], g = w4[i];
        yr[i] = make_float4(v.x * r * g.x, v.y * r * g.y, v.z * r * g.z, v.w * r * g.w);
    }
}
