// Work-group tree reduction: each work-group sums a chunk into local memory and writes
// one partial sum. (The host sums the partials.)
__kernel void reduce_sum(__global const float* in, __global float* partial,
                         __local float* scratch, const int n) {
    const int gid = get_global_id(0);
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    float my_local_sum = 0.0f;
    for (int i = gid; i < n; i += get_global_size(0)) {
        my_local_sum += in[i];
    }
    scratch[lid] = my_local_sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[get_group_id(0)] = scratch[0];
}
