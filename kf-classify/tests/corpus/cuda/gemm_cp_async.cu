// CUDA SGEMM with asynchronous global->shared copies (cp.async through the pipeline
// primitives) into two alternating shared buffers; one output per thread.
#include <cuda_pipeline.h>
#define TILE 16

extern "C" __global__ void gemm(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float As[2][TILE][TILE];
    __shared__ float Bs[2][TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    const int tiles = K / TILE;
    float acc = 0.0f;
    __pipeline_memcpy_async(&As[0][ty][tx], &A[row * K + tx], sizeof(float));
    __pipeline_memcpy_async(&Bs[0][ty][tx], &B[ty * N + col], sizeof(float));
    __pipeline_commit();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t % 2;
        if (t + 1 < tiles) {
            __pipeline_memcpy_async(&As[(t + 1) % 2][ty][tx], &A[row * K + (t + 1) * TILE + tx], sizeof(float));
            __pipeline_memcpy_async(&Bs[(t + 1) % 2][ty][tx], &B[((t + 1) * TILE + ty) * N + col], sizeof(float));
        }
        __pipeline_commit();
        __pipeline_wait_prior(1);
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[cur][ty][k] * Bs[cur][k][tx];
        __syncthreads();
    }
    C[row * N + col] = acc;
}
