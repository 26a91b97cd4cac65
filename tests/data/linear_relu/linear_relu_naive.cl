// Naive baseline: one work-item per output element, a serial dot product.
__kernel void linear_relu(const int BATCH, const int IN, const int OUT,
                          __global const float* x, __global const float* w,
                          __global const float* bias, __global float* y) {
    const int o = get_global_id(0);
    const int b = get_global_id(1);
    if (o >= OUT || b >= BATCH) return;
    float acc = 0.0f;
    for (int i = 0; i < IN; ++i) {
        acc += x[b * IN + i] * w[o * IN + i];
    }
    y[b * OUT + o] = fmax(acc + bias[o], 0.0f);
}
