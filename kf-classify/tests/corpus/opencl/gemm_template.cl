// A GEMM template: the structure is switched by parameters.
//   USE_LOCAL = 0 | 1   stage tiles of A and B in local memory
//   WPT       = 1, 2, 4, 8: outputs per work-item (register blocking when > 1)
//   TS        tile size
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
    const int row = get_local_id(0);
    const int col = get_local_id(1);
    const int globalRow = TS * get_group_id(0) + row;
    const int globalCol = TS * get_group_id(1) + col;

#if WPT > 1
    float acc[WPT];
    for (int w = 0; w < WPT; w++) acc[w] = 0.0f;
#else
    float acc = 0.0f;
#endif

#if USE_LOCAL
    __local float Asub[TS][TS];
    __local float Bsub[TS][TS];
    for (int t = 0; t < K / TS; t++) {
        for (int w = 0; w < WPT; w++) {
            Asub[col + w * RTS][row] = A[(TS * t + col + w * RTS) * M + globalRow];
            Bsub[col + w * RTS][row] = B[(globalCol + w * RTS) * K + TS * t + row];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++) {
#if WPT > 1
            for (int w = 0; w < WPT; w++) acc[w] += Asub[k][row] * Bsub[col + w * RTS][k];
#else
            acc += Asub[k][row] * Bsub[col][k];
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    /* no local memory: read straight from __global */
    for (int k = 0; k < K; k++) {
#if WPT > 1
        for (int w = 0; w < WPT; w++) acc[w] += A[k * M + globalRow] * B[(globalCol + w * RTS) * K + k];
#else
        acc += A[k * M + globalRow] * B[globalCol * K + k];
#endif
    }
#endif

#if WPT > 1
    for (int w = 0; w < WPT; w++) C[(globalCol + w * RTS) * M + globalRow] = acc[w];
#else
    C[globalCol * M + globalRow] = acc;
#endif
}
