// OpenCL 2.0 work-group built-in reduction, one partial per group.
__kernel void reduce(__global const float* x, __global float* partial, int n) {
    float v = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) v += x[i];
    const float s = work_group_reduce_add(v);
    if (get_local_id(0) == 0) partial[get_group_id(0)] = s;
}
