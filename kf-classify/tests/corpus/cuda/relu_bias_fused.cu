// CUDA fused epilogue: bias add + GELU-tanh in one elementwise kernel, grid-stride loop.
extern "C" __global__ void bias_gelu(const float* x, const float* bias, float* y, int n, int cols) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const float v = x[i] + bias[i % cols];
        y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}
