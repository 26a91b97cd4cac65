// SYCL layer norm: sum and sum of squares in one sweep per work-item, reduced over the
// work-group, then the write sweep.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void layernorm(const float* x, float* y, int cols, float eps) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto wg = it.get_group();
    const int row = it.get_group(0), lid = it.get_local_id(0), lsz = it.get_local_range(0);
    float s = 0.0f, ss = 0.0f;
    for (int i = lid; i < cols; i += lsz) {
        const float v = x[row * cols + i];
        s += v;
        ss += v * v;
    }
    s = sycl::reduce_over_group(wg, s, sycl::plus<float>());
    ss = sycl::reduce_over_group(wg, ss, sycl::plus<float>());
    const float mean = s / cols;
    const float rstd = sycl::rsqrt(ss / cols - mean * mean + eps);
    for (int i = lid; i < cols; i += lsz) y[row * cols + i] = (x[row * cols + i] - mean) * rstd;
}
