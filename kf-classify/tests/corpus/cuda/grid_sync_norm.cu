// CUDA cooperative kernel: every block reduces a partial sum of squares in shared memory,
// the grid synchronises, then every thread scales its elements by the global norm.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

extern "C" __global__ void normalize(const float* x, float* y, float* partials, int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ float sdata[256];
    const int tid = threadIdx.x;
    float ss = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) ss += x[i] * x[i];
    sdata[tid] = ss;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = sdata[0];
    grid.sync();
    float total = 0.0f;
    for (int b = 0; b < gridDim.x; ++b) total += partials[b];
    const float inv = rsqrtf(total);
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) y[i] = x[i] * inv;
}
