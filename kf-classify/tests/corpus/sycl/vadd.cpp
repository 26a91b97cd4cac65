// SYCL free-function kernel: element-wise vector add. No local_accessor, no group_barrier.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void vadd(const float* a, const float* b, float* c, int n) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    const size_t i = it.get_global_id(0);
    if (i < static_cast<size_t>(n)) c[i] = a[i] + b[i];
}
