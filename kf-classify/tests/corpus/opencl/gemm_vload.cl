// SGEMM with B pre-transposed (BT is N x K): every work-item reads its row of A and its
// row of BT four floats at a time with vload4.
__kernel void gemm_bt(const int M, const int N, const int K,
                      __global const float* A,
                      __global const float* BT,
                      __global float* C) {
    const int row = get_global_id(1);
    const int col = get_global_id(0);
    if (row >= M || col >= N) return;
    float4 acc4 = (float4)(0.0f);
    for (int k = 0; k < K / 4; k++) {
        const float4 a = vload4(k, A + row * K);
        const float4 b = vload4(k, BT + col * K);
        acc4 = mad(a, b, acc4);
    }
    C[row * N + col] = acc4.x + acc4.y + acc4.z + acc4.w;
}
