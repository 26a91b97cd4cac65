// Rotary embedding with pairs loaded and stored as float2 (vload2 / vstore2).
__kernel void rotary(__global float* q, __global const float* cos_t, __global const float* sin_t,
                     const int head_dim, const int n_pairs) {
    const int p = get_global_id(0);
    if (p >= n_pairs) return;
    const int half_dim = head_dim / 2;
    const int tok = p / half_dim;
    const int j = p - tok * half_dim;
    const float c = cos_t[tok * half_dim + j];
    const float s = sin_t[tok * half_dim + j];
    const float2 v = vload2(p, q);
    vstore2((float2)(v.x * c - v.y * s, v.x * s + v.y * c), p, q);
}
