// Matrix transpose through a padded local tile, so that both the read and the write are
// coalesced. Padding (TILE + 1) avoids bank conflicts.
#define TILE 16

__kernel void transpose(__global const float* in, __global float* out,
                        const int rows, const int cols) {
    local float tile[TILE][TILE + 1];
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    int x = get_group_id(0) * TILE + lx;
    int y = get_group_id(1) * TILE + ly;
    if (x < cols && y < rows) tile[ly][lx] = in[y * cols + x];
    barrier(CLK_LOCAL_MEM_FENCE);
    x = get_group_id(1) * TILE + lx;
    y = get_group_id(0) * TILE + ly;
    if (x < rows && y < cols) out[y * rows + x] = tile[lx][ly];
}
