// Naive SGEMM, row-major: C[M x N] = A[M x K] * B[K x N].
// One thread per element of C; x runs along a row of C so that neighbouring threads
// read neighbouring elements of B and write neighbouring elements of C (coalesced).
extern "C" __global__ void gemm(const int M, const int N, const int K,
                                const float* A,
                                const float* B,
                                float* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) {
        return;
    }
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
