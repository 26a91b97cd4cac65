// Naive SGEMM: one work-item per element of C, plain global loads.
// Deliberately no __local memory and no barrier(CLK_LOCAL_MEM_FENCE) here.
__kernel void gemm(const int M, const int N, const int K,
                   __global const float* A,
                   __global const float* B,
                   __global float* C) {
    const int row = get_global_id(0);
    const int col = get_global_id(1);
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; k++) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
