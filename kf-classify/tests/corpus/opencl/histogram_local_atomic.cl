// 256-bin histogram: per-work-group histogram in local memory with local atomics, then
// merged into the global histogram with global atomics.
#define BINS 256

__kernel void histogram(__global const uchar* data, const int n, __global uint* hist) {
    __local uint local_hist[BINS];
    const int lid = get_local_id(0);
    for (int b = lid; b < BINS; b += get_local_size(0)) local_hist[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
        atomic_inc(&local_hist[data[i]]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = lid; b < BINS; b += get_local_size(0)) {
        atomic_add(&hist[b], local_hist[b]);
    }
}
