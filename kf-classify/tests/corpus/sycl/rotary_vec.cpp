// SYCL rotary embedding: pairs loaded as sycl::float2 through a reinterpret_cast.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void rotary(float* q, const float* cos_t, const float* sin_t, int half_dim, int n_pairs) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    const int p = it.get_global_id(0);
    if (p >= n_pairs) return;
    const int j = p % half_dim;
    const int tok = p / half_dim;
    sycl::float2* q2 = reinterpret_cast<sycl::float2*>(q);
    const sycl::float2 v = q2[p];
    const float c = cos_t[tok * half_dim + j], s = sin_t[tok * half_dim + j];
    q2[p] = sycl::float2(v.x() * c - v.y() * s, v.x() * s + v.y() * c);
}
