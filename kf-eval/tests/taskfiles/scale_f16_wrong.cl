// Forgets the offset: off by 0.25 everywhere, far beyond the f16 tolerance.
__kernel void scale(const int N, const float s, __global const half* x, __global half* y) {
    const int i = get_global_id(0);
    if (i < N) vstore_half(vload_half(i, x) * s, i, y);
}
