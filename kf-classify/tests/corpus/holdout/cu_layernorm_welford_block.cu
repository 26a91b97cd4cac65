// CUDA layer norm: Welford per thread, merged through shared memory with __syncthreads
// (no warp intrinsics), then a normalisation sweep.
__device__ void welford_combine(float& mean, float& m2, float& count, float b_mean, float b_m2, float b_count) {
    const float n = count + b_count;
    if (n == 0.f) return;
    const float delta = b_mean - mean;
    mean += delta * b_count / n;
    m2 += b_m2 + delta * delta * count * b_count / n;
    count = n;
}

__global__ void layernorm(const float* x, float* y, int cols, float eps) {
    __shared__ float s_mean[256], s_m2[256], s_count[256];
    const float* xr = x + blockIdx.x * cols;
    float mean = 0.f, m2 = 0.f, count = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        count += 1.f;
        const float d = xr[i] - mean;
        mean += d / count;
        m2 += d * (xr[i] - mean);
    }
    s_mean[threadIdx.x] = mean; s_m2[threadIdx.x] = m2; s_count[threadIdx.x] = count;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            welford_combine(s_mean[threadIdx.x], s_m2[threadIdx.x], s_count[threadIdx.x],
                            s_mean[threadIdx.x + s], s_m2[threadIdx.x + s], s_count[threadIdx.x + s]);
        }
        __syncthreads();
    }
    const float mu = s_mean[0], rstd = rsqrtf(s_m2[0] / cols + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) y[blockIdx.x * cols + i] = (xr[i] - mu) * rstd;
}
