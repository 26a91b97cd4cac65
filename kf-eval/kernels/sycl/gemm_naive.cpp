// Naive SGEMM, row-major: C[M x N] = A[M x K] * B[K x N], as a SYCL free-function kernel.
// One work-item per element of C. SYCL's last dimension moves fastest, so the range is
// (rows, columns): neighbouring work-items read neighbouring elements of B and write
// neighbouring elements of C.
#include <sycl/sycl.hpp>

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<2>))
void gemm(const int M, const int N, const int K,
          const float* A,
          const float* B,
          float* C) {
    const sycl::nd_item<2> it = sycl::ext::oneapi::this_work_item::get_nd_item<2>();
    const int row = it.get_global_id(0);
    const int col = it.get_global_id(1);
    if (row >= M || col >= N) {
        return;
    }
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += A[row * K + k] * B[k * N + col];
    }
    C[row * N + col] = acc;
}
