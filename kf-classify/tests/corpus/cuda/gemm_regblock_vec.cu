// CUDA SGEMM, 2-D register blocking: tiles loaded from global with float4, staged in shared
// memory, register fragments loaded from shared memory, an 8x8 accumulator block per thread.
#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8

extern "C" __global__ void __launch_bounds__(256)
sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    A += blockIdx.y * BM * K;
    B += blockIdx.x * BN;
    C += blockIdx.y * BM * N + blockIdx.x * BN;

    float acc[TM][TN] = {0.0f};
    float regM[TM];
    float regN[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        const float4 a4 = reinterpret_cast<const float4*>(&A[(tid / 2) * K + (tid % 2) * 4])[0];
        As[(tid % 2) * 4 + 0][tid / 2] = a4.x;
        As[(tid % 2) * 4 + 1][tid / 2] = a4.y;
        As[(tid % 2) * 4 + 2][tid / 2] = a4.z;
        As[(tid % 2) * 4 + 3][tid / 2] = a4.w;
        reinterpret_cast<float4*>(&Bs[tid / 32][(tid % 32) * 4])[0] =
            reinterpret_cast<const float4*>(&B[(tid / 32) * N + (tid % 32) * 4])[0];
        __syncthreads();
        A += BK;
        B += BK * N;
        for (int k = 0; k < BK; ++k) {
            for (int i = 0; i < TM; ++i) regM[i] = As[k][trow * TM + i];
            for (int j = 0; j < TN; ++j) regN[j] = Bs[k][tcol * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] += regM[i] * regN[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) C[(trow * TM + i) * N + tcol * TN + j] = acc[i][j];
}
