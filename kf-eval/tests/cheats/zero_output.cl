// Cheat: writes zeros instead of computing.
__kernel void gemm(const int M, const int N, const int K, __global const float* A, __global const float* B, __global float* C) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row >= M || col >= N) return;
    C[row * N + col] = 0.0f;
}
