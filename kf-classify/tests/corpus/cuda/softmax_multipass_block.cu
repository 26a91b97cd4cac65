// CUDA softmax, one block per row: max sweep, sum sweep, write sweep, block reductions in
// shared memory between them.
extern "C" __global__ void softmax(const float* x, float* y, int cols) {
    extern __shared__ float red[];
    const int row = blockIdx.x, tid = threadIdx.x;
    const float* xr = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int i = tid; i < cols; i += blockDim.x) m = fmaxf(m, xr[i]);
    red[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] = fmaxf(red[tid], red[tid + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x) sum += expf(xr[i] - m);
    red[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    sum = red[0];
    for (int i = tid; i < cols; i += blockDim.x) y[(size_t)row * cols + i] = expf(xr[i] - m) / sum;
}
