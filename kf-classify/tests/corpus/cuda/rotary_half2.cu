// CUDA rotary embedding on half precision, pairs loaded and stored as __half2.
#include <cuda_fp16.h>

extern "C" __global__ void rotary(__half* q, const float* cos_t, const float* sin_t, int half_dim, int n_pairs) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_pairs) return;
    const int tok = p / half_dim, j = p % half_dim;
    __half2* q2 = reinterpret_cast<__half2*>(q);
    const float2 v = __half22float2(q2[p]);
    const float c = cos_t[tok * half_dim + j], s = sin_t[tok * half_dim + j];
    q2[p] = __floats2half2_rn(v.x * c - v.y * s, v.x * s + v.y * c);
}
