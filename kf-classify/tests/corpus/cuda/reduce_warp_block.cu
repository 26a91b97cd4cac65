// CUDA sum: warp shuffles, per-warp partials in shared memory, __syncthreads, a final warp
// reduction and one atomicAdd per block into the global result.
__inline__ __device__ float warp_reduce_sum(float v) {
    for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffff, v, off);
    return v;
}

extern "C" __global__ void reduce_sum(const float* in, float* out, int n) {
    __shared__ float warp_sums[32];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
    v = warp_reduce_sum(v);
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / warpSize ? warp_sums[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) atomicAdd(out, v);
    }
}
