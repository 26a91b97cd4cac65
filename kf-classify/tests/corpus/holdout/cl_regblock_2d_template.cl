// 2-D register-blocked GEMM template without local memory: every work-item computes a
// WPTM x WPTN block straight from global memory.
__kernel void gemm(const int M, const int N, const int K,
                   __global const float* A, __global const float* B, __global float* C) {
    const int r0 = get_global_id(0) * WPTM;
    const int c0 = get_global_id(1) * WPTN;
    float c[WPTM][WPTN];
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++) c[i][j] = 0.0f;
    for (int k = 0; k < K; k++) {
        float b[WPTN];
        for (int j = 0; j < WPTN; j++) b[j] = B[k * N + c0 + j];
        for (int i = 0; i < WPTM; i++) {
            const float a = A[(r0 + i) * K + k];
            for (int j = 0; j < WPTN; j++) c[i][j] = mad(a, b[j], c[i][j]);
        }
    }
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++) C[(r0 + i) * N + c0 + j] = c[i][j];
}
