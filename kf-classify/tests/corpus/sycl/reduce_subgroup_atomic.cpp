// SYCL sum: sub-group reduction, then one global atomic per sub-group.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void reduce_sum(const float* in, float* out, int n) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto sg = it.get_sub_group();
    float v = 0.0f;
    for (size_t i = it.get_global_id(0); i < static_cast<size_t>(n); i += it.get_global_range(0)) v += in[i];
    v = sycl::reduce_over_group(sg, v, sycl::plus<float>());
    if (sg.leader()) {
        sycl::atomic_ref<float, sycl::memory_order::relaxed, sycl::memory_scope::device,
                         sycl::access::address_space::global_space> total(*out);
        total.fetch_add(v);
    }
}
