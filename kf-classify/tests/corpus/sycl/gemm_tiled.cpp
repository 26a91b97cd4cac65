// SYCL local-memory tiled GEMM (one output per work-item).
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

#ifndef TS
#define TS 16
#endif

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    auto it = syclexp::this_work_item::get_nd_item<2>();
    auto g = it.get_group();
    auto& As = *sycl::ext::oneapi::group_local_memory_for_overwrite<float[TS][TS]>(g);
    auto& Bs = *sycl::ext::oneapi::group_local_memory_for_overwrite<float[TS][TS]>(g);
    const int r = it.get_local_id(0), c = it.get_local_id(1);
    const int row = it.get_global_id(0), col = it.get_global_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K; t += TS) {
        As[r][c] = A[row * K + t + c];
        Bs[r][c] = B[(t + r) * N + col];
        sycl::group_barrier(g);
        for (int k = 0; k < TS; ++k) acc += As[r][k] * Bs[k][c];
        sycl::group_barrier(g);
    }
    if (row < M && col < N) C[row * N + col] = acc;
}
