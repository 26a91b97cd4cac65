// One work-item per TILE consecutive elements of a row, coalesced across work-items
// (work-item c of a row handles columns c, c + COLS_STEP, ...), with the sigmoid computed
// once per element. TILE and WG come from the manifest's [params].
__kernel void scaled_swish(const int ROWS, const int COLS, const float alpha,
                           __global const float* x, __global const float* bias,
                           __global float* y) {
    const int r = get_global_id(1);
    const int c0 = get_global_id(0);
    const int step = get_global_size(0);
    if (r >= ROWS) return;
    __global const float* xr = x + (size_t)r * COLS;
    __global float* yr = y + (size_t)r * COLS;
    #pragma unroll
    for (int t = 0; t < TILE; ++t) {
        const int c = c0 + t * step;
        if (c < COLS) {
            const float v = xr[c];
            yr[c] = v / (1.0f + exp(-alpha * v)) + bias[c];
        }
    }
}
