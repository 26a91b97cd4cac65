// Naive transpose: coalesced reads, strided writes.
__global__ void transpose_naive(float* out, const float* in, int rows, int cols) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) out[x * rows + y] = in[y * cols + x];
}
