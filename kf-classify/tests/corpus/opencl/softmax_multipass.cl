// Row softmax, one work-group per row: three sweeps over the row (max, sum, write),
// each followed by a local-memory tree reduction.
__kernel void softmax(__global const float* x, __global float* y, const int cols,
                      __local float* red) {
    const int row = get_group_id(0);
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    __global const float* xr = x + row * cols;
    __global float* yr = y + row * cols;

    float m = -INFINITY;
    for (int i = lid; i < cols; i += lsz) m = fmax(m, xr[i]);
    red[lid] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = fmax(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    m = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);

    float sum = 0.0f;
    for (int i = lid; i < cols; i += lsz) sum += exp(xr[i] - m);
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / red[0];

    for (int i = lid; i < cols; i += lsz) yr[i] = exp(xr[i] - m) * inv;
}
