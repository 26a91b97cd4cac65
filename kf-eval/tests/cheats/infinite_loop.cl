// Cheat (or bug): never terminates.
__kernel void gemm(const int M, const int N, const int K, __global const float* A, __global const float* B, __global float* C) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row >= M || col >= N) return;
    volatile int spin = 1;
    float acc = 0.0f;
    while (spin) { acc += 1.0f; }
    C[row * N + col] = acc;
}
