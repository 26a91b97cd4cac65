// Local-memory tiled SGEMM, row-major: C[M x N] = A[M x K] * B[K x N].
// Each work-group computes a TS x TS tile of C; each work-item computes WPT
// consecutive rows of one column of that tile, so a work-group is TS x (TS / WPT).
// Requires M, N and K to be multiples of TS (see the manifest's constraints).
#ifndef TS
#define TS 16
#endif
#ifndef WPT
#define WPT 1
#endif
#define RTS (TS / WPT)

__kernel void gemm(const int M, const int N, const int K,
                   __global const float* A,
                   __global const float* B,
                   __global float* C) {
    const int col = get_local_id(0);          // 0 .. TS-1
    const int row = get_local_id(1);          // 0 .. RTS-1
    const int global_col = get_group_id(0) * TS + col;
    const int global_row = get_group_id(1) * TS + row;

    // +1 padding on the inner dimension avoids local-memory bank conflicts.
    __local float Asub[TS][TS + 1];
    __local float Bsub[TS][TS + 1];

    float acc[WPT];
    for (int w = 0; w < WPT; ++w) {
        acc[w] = 0.0f;
    }

    const int tiles = K / TS;
    for (int t = 0; t < tiles; ++t) {
        for (int w = 0; w < WPT; ++w) {
            const int r = row + w * RTS;
            Asub[r][col] = A[(get_group_id(1) * TS + r) * K + t * TS + col];
            Bsub[r][col] = B[(t * TS + r) * N + global_col];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; ++k) {
            const float b = Bsub[k][col];
            for (int w = 0; w < WPT; ++w) {
                acc[w] += Asub[row + w * RTS][k] * b;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < WPT; ++w) {
        C[(global_row + w * RTS) * N + global_col] = acc[w];
    }
}
