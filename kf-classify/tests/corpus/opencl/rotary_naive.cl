// Llama-style rotary position embedding, in place, one work-item per pair, scalar loads.
__kernel void rotary(__global float* q, __global const float* cos_t, __global const float* sin_t,
                     const int head_dim, const int n_pairs) {
    const int p = get_global_id(0);
    if (p >= n_pairs) return;
    const int tok = (2 * p) / head_dim;
    const int j = p % (head_dim / 2);
    const float c = cos_t[tok * (head_dim / 2) + j];
    const float s = sin_t[tok * (head_dim / 2) + j];
    const float a = q[2 * p];
    const float b = q[2 * p + 1];
    q[2 * p] = a * c - b * s;
    q[2 * p + 1] = a * s + b * c;
}
