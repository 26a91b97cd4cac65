// Naive OpenCL baseline for KernelBench level 1 problem 4: out[M][1] = A[M][K] * B[K][1],
// one row per work-item.
__kernel void matvec(__global const float* A, __global const float* B, __global float* out,
                     const int M, const int K) {
    const int m = get_global_id(0);
    if (m >= M) {
        return;
    }
    __global const float* a = A + (long)m * K;
    float s = 0.0f;
    for (int k = 0; k < K; ++k) {
        s += a[k] * B[k];
    }
    out[m] = s;
}
