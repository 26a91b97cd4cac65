// SYCL softmax, one sub-group per row, three sweeps over the row (max, sum, write), each
// reduction done with sub-group algorithms; no work-group barrier.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void softmax(const float* x, float* y, int rows, int cols) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    sycl::sub_group sg = it.get_sub_group();
    const int row = it.get_group(0) * sg.get_group_range()[0] + sg.get_group_id()[0];
    if (row >= rows) return;
    const int lane = sg.get_local_id()[0];
    const int width = sg.get_local_range()[0];
    const float* xr = x + row * cols;
    float m = -INFINITY;
    for (int i = lane; i < cols; i += width) m = sycl::fmax(m, xr[i]);
    m = sycl::reduce_over_group(sg, m, sycl::maximum<float>());
    float s = 0.0f;
    for (int i = lane; i < cols; i += width) s += sycl::exp(xr[i] - m);
    s = sycl::reduce_over_group(sg, s, sycl::plus<float>());
    for (int i = lane; i < cols; i += width) y[row * cols + i] = sycl::exp(xr[i] - m) / s;
}
