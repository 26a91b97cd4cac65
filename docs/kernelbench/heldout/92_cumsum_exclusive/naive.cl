// One work-item per row: a sequential exclusive scan.
__kernel void cumsum_naive(__global const float* x, __global float* out, const int batch_size, const int input_shape_0, const int dim) {
    const int row = get_global_id(0);
    if (row >= batch_size) return;
    float acc = 0.0f;
    for (int i = 0; i < input_shape_0; ++i) {
        out[row * input_shape_0 + i] = acc;
        acc += x[row * input_shape_0 + i];
    }
}
