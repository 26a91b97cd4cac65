// Bug: writes through a wild pointer far outside any buffer.
__kernel void gemm(const int M, const int N, const int K, __global const float* A, __global const float* B, __global float* C) {
    const int col = get_global_id(0);
    const int row = get_global_id(1);
    if (row >= M || col >= N) return;
    __global float* wild = (__global float*)((ulong)C ^ 0x7f0000000000UL);
    for (int i = 0; i < 1 << 20; ++i) wild[i * 4096] = 1.0f;
    C[row * N + col] = 0.0f;
}
