// Naive rotary embedding: one work-item per (position, head, pair), scalar half loads
// converted to float (vload_half), results rounded back with vstore_half_rte.
__kernel void rotary(__global half* x, __global const half* cos_t, __global const half* sin_t,
                     const int SEQ, const int HEADS, const int HEAD_DIM) {
    const int pairs = HEAD_DIM / 2;
    const long p = get_global_id(0);
    if (p >= (long)SEQ * HEADS * pairs) {
        return;
    }
    const long i = p % pairs;
    const long t = p / ((long)HEADS * pairs);
    const float a = vload_half(2 * p, x);
    const float b = vload_half(2 * p + 1, x);
    const float c = vload_half(t * pairs + i, cos_t);
    const float s = vload_half(t * pairs + i, sin_t);
    vstore_half_rte(a * c - b * s, 2 * p, x);
    vstore_half_rte(a * s + b * c, 2 * p + 1, x);
}
