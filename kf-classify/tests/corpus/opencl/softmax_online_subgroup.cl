#pragma OPENCL EXTENSION cl_khr_subgroups : enable
// Online softmax, one sub-group per row: each lane keeps a running max and a running sum
// that is rescaled whenever the max grows; lanes are combined with sub-group reductions.
__kernel void softmax(__global const float* x, __global float* y, const int cols) {
    const int row = get_global_id(0) / get_max_sub_group_size();
    const int lane = get_sub_group_local_id();
    const int width = get_sub_group_size();
    __global const float* xr = x + row * cols;

    float m = -INFINITY;
    float s = 0.0f;
    for (int i = lane; i < cols; i += width) {
        const float v = xr[i];
        const float m_new = fmax(m, v);
        s = s * exp(m - m_new) + exp(v - m_new);
        m = m_new;
    }
    const float M = sub_group_reduce_max(m);
    s = s * exp(m - M);
    const float S = sub_group_reduce_add(s);
    const float inv = 1.0f / S;
    for (int i = lane; i < cols; i += width) y[row * cols + i] = exp(xr[i] - M) * inv;
}
