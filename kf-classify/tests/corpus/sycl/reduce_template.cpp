// SYCL reduction template. USE_LOCAL selects a work-group tree reduction in local memory;
// without it every work-item adds its partial to the output with a global atomic.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

#define WG 256

#if USE_LOCAL
static syclexp::work_group_static<float[WG]> scratch;
#endif

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void reduce_sum(const float* in, float* out, int n) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    float v = 0.0f;
    for (size_t i = it.get_global_id(0); i < static_cast<size_t>(n); i += it.get_global_range(0)) v += in[i];
#if USE_LOCAL
    auto& s = scratch.get();
    const int lid = it.get_local_id(0);
    s[lid] = v;
    sycl::group_barrier(it.get_group());
    for (int stride = WG / 2; stride > 0; stride /= 2) {
        if (lid < stride) s[lid] += s[lid + stride];
        sycl::group_barrier(it.get_group());
    }
    if (lid == 0) out[it.get_group(0)] = s[0];
#else
    sycl::atomic_ref<float, sycl::memory_order::relaxed, sycl::memory_scope::device> total(out[0]);
    total += v;
#endif
}
