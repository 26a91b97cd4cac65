#pragma OPENCL EXTENSION cl_intel_subgroups : enable
// Layer norm with Welford's single-pass mean/variance, one sub-group per row, loads of
// four floats at a time; lanes merge their (count, mean, M2) with sub-group shuffles.
__kernel void layernorm(__global const float* x, __global float* y, const int cols,
                        const float eps) {
    const int row = get_group_id(0) * get_num_sub_groups() + get_sub_group_id();
    const int lane = get_sub_group_local_id();
    const int width = get_sub_group_size();
    __global const float* xr = x + row * cols;
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int i = lane; i < cols / 4; i += width) {
        const float4 v = vload4(i, xr);
        const float e[4] = {v.x, v.y, v.z, v.w};
        for (int j = 0; j < 4; j++) {
            count += 1.0f;
            const float delta = e[j] - mean;
            mean += delta / count;
            m2 += delta * (e[j] - mean);
        }
    }
    for (int off = width / 2; off > 0; off /= 2) {
        const float oc = intel_sub_group_shuffle_xor(count, off);
        const float om = intel_sub_group_shuffle_xor(mean, off);
        const float o2 = intel_sub_group_shuffle_xor(m2, off);
        const float n = count + oc;
        const float delta = om - mean;
        if (n > 0.0f) {
            mean += delta * oc / n;
            m2 += o2 + delta * delta * count * oc / n;
        }
        count = n;
    }
    const float rstd = rsqrt(m2 / cols + eps);
    for (int i = lane; i < cols / 4; i += width) {
        const float4 v = vload4(i, xr);
        vstore4((v - mean) * rstd, i, y + row * cols);
    }
}
