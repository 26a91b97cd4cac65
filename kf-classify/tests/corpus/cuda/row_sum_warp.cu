// CUDA row sums, one warp per row, reduced with __shfl_xor_sync; no shared memory.
extern "C" __global__ void row_sum(const float* x, float* out, int rows, int cols) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    float s = 0.0f;
    for (int i = lane; i < cols; i += 32) s += x[row * cols + i];
#pragma unroll
    for (int mask = 16; mask > 0; mask >>= 1) s += __shfl_xor_sync(0xffffffffu, s, mask);
    if (lane == 0) out[row] = s;
}
