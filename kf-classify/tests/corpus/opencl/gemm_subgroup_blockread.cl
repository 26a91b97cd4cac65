#pragma OPENCL EXTENSION cl_intel_subgroups : enable
// Intel sub-group GEMM: each work-item owns a column and 8 rows of C (register block);
// B is read with sub-group block reads, A values are broadcast across the sub-group.
#define TM 8

__attribute__((intel_reqd_sub_group_size(16)))
__kernel void gemm_sg(const int M, const int N, const int K,
                      __global const float* A, __global const float* B, __global float* C) {
    const int col = get_group_id(0) * 16;
    const int row0 = get_global_id(1) * TM;
    const int lane = get_sub_group_local_id();
    float acc[TM];
    for (int r = 0; r < TM; r++) acc[r] = 0.0f;
    for (int k = 0; k < K; k += 16) {
        float a[TM];
        for (int r = 0; r < TM; r++) a[r] = A[(row0 + r) * K + k + lane];
        for (int kk = 0; kk < 16; kk++) {
            const float b = as_float(intel_sub_group_block_read((__global const uint*)(B + (k + kk) * N + col)));
            for (int r = 0; r < TM; r++) acc[r] = mad(sub_group_broadcast(a[r], kk), b, acc[r]);
        }
    }
    for (int r = 0; r < TM; r++) C[(row0 + r) * N + col + lane] = acc[r];
}
