// Naive OpenCL baseline for KernelBench level 1 problem 16: out[M][N] = A^T * B with
// A[K][M], B[K][N]. One output per work-item; dimension 0 runs along n.
__kernel void matmul_at(__global const float* A, __global const float* B, __global float* out,
                        const int M, const int K, const int N) {
    const int n = get_global_id(0);
    const int m = get_global_id(1);
    if (m >= M || n >= N) {
        return;
    }
    float s = 0.0f;
    for (int k = 0; k < K; ++k) {
        s += A[(long)k * M + m] * B[(long)k * N + n];
    }
    out[(long)m * N + n] = s;
}
