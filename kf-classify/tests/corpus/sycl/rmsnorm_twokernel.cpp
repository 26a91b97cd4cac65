// SYCL RMS norm in two kernels: one computes each row's inverse RMS, the other scales.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void rms_stats(const float* x, float* inv_rms, int rows, int cols, float eps) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    const int row = it.get_global_id(0);
    if (row >= rows) return;
    float ss = 0.0f;
    for (int i = 0; i < cols; ++i) ss += x[row * cols + i] * x[row * cols + i];
    inv_rms[row] = sycl::rsqrt(ss / cols + eps);
}

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void rms_scale(const float* x, const float* inv_rms, const float* w, float* y, int cols) {
    auto it = syclexp::this_work_item::get_nd_item<2>();
    const int row = it.get_global_id(0), col = it.get_global_id(1);
    y[row * cols + col] = x[row * cols + col] * inv_rms[row] * w[col];
}
