// Naive CUDA SGEMM: one thread per output, no __shared__ memory, no __syncthreads().
extern "C" __global__ void gemm(int M, int N, int K, const float* __restrict__ A,
                                const float* __restrict__ B, float* __restrict__ C) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
