// Naive OpenCL baseline for KernelBench level 1 problem 40: LayerNorm over the last three
// dimensions of x[batch_size][features][dim1][dim2] (eps = 1e-5, biased variance), with
// elementwise weight and bias of shape [features][dim1][dim2]. One work-group of WG items per
// batch row: strided partial sums, a tree reduction in local memory, then the normalisation.
__kernel void layer_norm(__global const float* x, __global const float* ln_weight,
                         __global const float* ln_bias, __global float* out,
                         const int batch_size, const int features, const int dim1,
                         const int dim2) {
    __local float partial[WG];
    const int b = get_group_id(0);
    const int lid = get_local_id(0);
    const long n = (long)features * dim1 * dim2;
    __global const float* row = x + b * n;
    float s = 0.0f;
    for (long i = lid; i < n; i += WG) {
        s += row[i];
    }
    partial[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG / 2; span > 0; span /= 2) {
        if (lid < span) {
            partial[lid] += partial[lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mean = partial[0] / n;
    barrier(CLK_LOCAL_MEM_FENCE);
    float q = 0.0f;
    for (long i = lid; i < n; i += WG) {
        const float d = row[i] - mean;
        q += d * d;
    }
    partial[lid] = q;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = WG / 2; span > 0; span /= 2) {
        if (lid < span) {
            partial[lid] += partial[lid + span];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = 1.0f / sqrt(partial[0] / n + 1e-5f);
    for (long i = lid; i < n; i += WG) {
        out[b * n + i] = (row[i] - mean) * inv * ln_weight[i] + ln_bias[i];
    }
}
