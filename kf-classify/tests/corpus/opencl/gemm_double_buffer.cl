// Double-buffered, register-blocked SGEMM. Two local tile buffers alternate: while the
// work-group computes on tile t from buffer (t & 1), it loads tile t + 1 into the other one.
// B values are cached in a private array read from the local tile.
#define TS 32
#define WPT 4
#define RTS (TS / WPT)

__kernel __attribute__((reqd_work_group_size(TS, RTS, 1)))
void gemm(const int M, const int N, const int K,
          __global const float* restrict A,
          __global const float* restrict B,
          __global float* restrict C) {
    const int tidm = get_local_id(0);
    const int tidn = get_local_id(1);
    const int offsetM = TS * get_group_id(0);
    const int offsetN = TS * get_group_id(1);

    __local float Asub[2][TS][TS];
    __local float Bsub[2][TS][TS];

    float Breg[WPT];
    float acc[WPT];
    for (int w = 0; w < WPT; w++) acc[w] = 0.0f;

    for (int w = 0; w < WPT; w++) {
        Asub[0][tidn + w * RTS][tidm] = A[(tidn + w * RTS) * M + offsetM + tidm];
        Bsub[0][tidn + w * RTS][tidm] = B[tidm * N + offsetN + tidn + w * RTS];
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int numTiles = K / TS;
    for (int t = 0; t < numTiles; t++) {
        const int cur = t & 1;
        const int nxt = cur ^ 1;
        if (t + 1 < numTiles) {
            const int kt = TS * (t + 1);
            for (int w = 0; w < WPT; w++) {
                Asub[nxt][tidn + w * RTS][tidm] = A[(kt + tidn + w * RTS) * M + offsetM + tidm];
                Bsub[nxt][tidn + w * RTS][tidm] = B[(kt + tidm) * N + offsetN + tidn + w * RTS];
            }
        }
        for (int k = 0; k < TS; k++) {
            for (int w = 0; w < WPT; w++) Breg[w] = Bsub[cur][tidn + w * RTS][k];
            const float a = Asub[cur][k][tidm];
            for (int w = 0; w < WPT; w++) acc[w] += a * Breg[w];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int w = 0; w < WPT; w++) C[(offsetN + tidn + w * RTS) * M + offsetM + tidm] = acc[w];
}
