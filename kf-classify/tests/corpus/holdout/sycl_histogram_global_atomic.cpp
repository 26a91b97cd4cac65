// SYCL histogram straight into global memory with atomic_ref, no local memory.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void histogram(const unsigned char* data, unsigned int* hist, int n) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    for (size_t i = it.get_global_id(0); i < static_cast<size_t>(n); i += it.get_global_range(0)) {
        sycl::atomic_ref<unsigned int, sycl::memory_order::relaxed, sycl::memory_scope::device> bin(hist[data[i]]);
        bin.fetch_add(1u);
    }
}
