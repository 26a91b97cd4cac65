// SYCL online softmax, one work-group per row. Each work-item keeps a running max and a
// running sum (rescaled when the max grows); the work-group combines them with group
// algorithms over the whole work-group.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void softmax(const float* x, float* y, int cols) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto g = it.get_group();
    const int row = it.get_group(0);
    const int lid = it.get_local_id(0);
    const int lsz = it.get_local_range(0);
    const float* xr = x + row * cols;
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int i = lid; i < cols; i += lsz) {
        const float v = xr[i];
        const float new_max = sycl::fmax(running_max, v);
        running_sum = running_sum * sycl::exp(running_max - new_max) + sycl::exp(v - new_max);
        running_max = new_max;
    }
    const float m = sycl::reduce_over_group(g, running_max, sycl::maximum<float>());
    const float s = sycl::reduce_over_group(g, running_sum * sycl::exp(running_max - m), sycl::plus<float>());
    for (int i = lid; i < cols; i += lsz) y[row * cols + i] = sycl::exp(xr[i] - m) / s;
}
