// Integer sum with one global atomic per work-item (cross-group coordination, nothing else).
__kernel void reduce_count(__global const int* in, volatile __global int* total, const int n) {
    int s = 0;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) s += in[i];
    atomic_add(total, s);
}
