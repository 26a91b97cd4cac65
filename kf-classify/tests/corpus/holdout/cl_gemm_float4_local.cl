// CNugteren-style "wider data types": float4 global loads into local tiles.
#define TS 32
#define WIDTH 4
typedef float4 floatX;

__kernel void gemm4(const int M, const int N, const int K,
                    const __global floatX* A, const __global floatX* B, __global floatX* C) {
    const int row = get_local_id(0);
    const int col = get_local_id(1);
    const int globalRow = (TS / WIDTH) * get_group_id(0) + row;
    const int globalCol = TS * get_group_id(1) + col;
    __local floatX Asub[TS][TS / WIDTH];
    __local floatX Bsub[TS][TS / WIDTH];
    floatX acc = (floatX)(0.0f, 0.0f, 0.0f, 0.0f);
    for (int tile = 0; tile < K / TS; tile++) {
        Asub[col][row] = A[(TS * tile + col) * (M / WIDTH) + globalRow];
        Bsub[col][row] = B[globalCol * (K / WIDTH) + (TS / WIDTH) * tile + row];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS / WIDTH; k++) {
            const floatX vecB = Bsub[col][k];
            for (int w = 0; w < WIDTH; w++) {
                const floatX vecA = Asub[WIDTH * k + w][row];
                const float b = w == 0 ? vecB.x : w == 1 ? vecB.y : w == 2 ? vecB.z : vecB.w;
                acc += vecA * b;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[globalCol * (M / WIDTH) + globalRow] = acc;
}
