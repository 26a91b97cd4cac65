// Naive OpenCL baseline for KernelBench level 1 problem 1: out[N][N] = A[N][N] * B[N][N].
// One output per work-item; dimension 0 runs along a row of the output so that
// neighbouring work-items read neighbouring elements of B.
__kernel void matmul(__global const float* A, __global const float* B, __global float* out,
                     const int N) {
    const int j = get_global_id(0);
    const int i = get_global_id(1);
    if (i >= N || j >= N) {
        return;
    }
    float s = 0.0f;
    for (int k = 0; k < N; ++k) {
        s += A[(long)i * N + k] * B[(long)k * N + j];
    }
    out[(long)i * N + j] = s;
}
