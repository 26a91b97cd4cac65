#pragma OPENCL EXTENSION cl_khr_subgroups : enable
// Hierarchical reduction: sub-group reduce, partials through local memory, a work-group
// barrier, a final sub-group reduce by the first sub-group.
#define MAX_SUBGROUPS 32

__kernel void reduce_sum(__global const float* in, __global float* partial, const int n) {
    __local float sg_sums[MAX_SUBGROUPS];
    const int gid = get_global_id(0);
    float v = 0.0f;
    for (int i = gid; i < n; i += get_global_size(0)) v += in[i];
    v = sub_group_reduce_add(v);
    const uint sg = get_sub_group_id();
    if (get_sub_group_local_id() == 0) sg_sums[sg] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sg == 0) {
        float w = get_sub_group_local_id() < get_num_sub_groups() ? sg_sums[get_sub_group_local_id()] : 0.0f;
        w = sub_group_reduce_add(w);
        if (get_sub_group_local_id() == 0) partial[get_group_id(0)] = w;
    }
}
