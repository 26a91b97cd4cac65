// Shared-memory tiled SGEMM, row-major: C[M x N] = A[M x K] * B[K x N].
// Each block computes a TS x TS tile of C; each thread computes WPT rows of one
// column of that tile (rows row, row + RTS, ...), so a block is TS x (TS / WPT) threads.
// Requires M, N and K to be multiples of TS (see the manifest's constraints).
#ifndef TS
#define TS 32
#endif
#ifndef WPT
#define WPT 4
#endif
#define RTS (TS / WPT)

extern "C" __global__ void gemm(const int M, const int N, const int K,
                                const float* __restrict__ A,
                                const float* __restrict__ B,
                                float* __restrict__ C) {
    const int col = threadIdx.x;                  // 0 .. TS-1
    const int row = threadIdx.y;                  // 0 .. RTS-1
    const int global_col = blockIdx.x * TS + col;
    const int global_row = blockIdx.y * TS + row;

    // +1 padding on the inner dimension avoids shared-memory bank conflicts.
    __shared__ float Asub[TS][TS + 1];
    __shared__ float Bsub[TS][TS + 1];

    float acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w) {
        acc[w] = 0.0f;
    }

    const int tiles = K / TS;
    for (int t = 0; t < tiles; ++t) {
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int r = row + w * RTS;
            Asub[r][col] = A[(blockIdx.y * TS + r) * K + t * TS + col];
            Bsub[r][col] = B[(t * TS + r) * N + global_col];
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < TS; ++k) {
            const float b = Bsub[k][col];
#pragma unroll
            for (int w = 0; w < WPT; ++w) {
                acc[w] += Asub[row + w * RTS][k] * b;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int w = 0; w < WPT; ++w) {
        C[(global_row + w * RTS) * N + global_col] = acc[w];
    }
}
