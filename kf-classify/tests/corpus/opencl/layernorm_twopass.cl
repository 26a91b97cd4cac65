// Layer norm, one row per work-item: a sweep for the mean, a sweep for the variance,
// a sweep to write. No cooperation between work-items.
__kernel void layernorm(__global const float* x, __global float* y,
                        __global const float* gamma, __global const float* beta,
                        const int cols, const float eps) {
    const int row = get_global_id(0);
    __global const float* xr = x + row * cols;
    float mean = 0.0f;
    for (int i = 0; i < cols; i++) mean += xr[i];
    mean /= cols;
    float var = 0.0f;
    for (int i = 0; i < cols; i++) {
        const float d = xr[i] - mean;
        var += d * d;
    }
    var /= cols;
    const float rstd = rsqrt(var + eps);
    for (int i = 0; i < cols; i++) y[row * cols + i] = (xr[i] - mean) * rstd * gamma[i] + beta[i];
}
