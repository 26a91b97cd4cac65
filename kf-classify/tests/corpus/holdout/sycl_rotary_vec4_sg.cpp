// SYCL rotary: each work-item rotates two pairs loaded as one sycl::vec<float, 4>; the
// cos/sin row index is broadcast across the sub-group.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void rotary4(float* q, const float* cs, const float* sn, int half_dim, int n_quads) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto sg = it.get_sub_group();
    const int p = it.get_global_id(0);
    if (p >= n_quads) return;
    const int tok = sycl::group_broadcast(sg, (2 * p) / half_dim, 0);
    const int j = (2 * p) % half_dim;
    sycl::vec<float, 4> v;
    v.load(p, q);
    const float c0 = cs[tok * half_dim + j], s0 = sn[tok * half_dim + j];
    const float c1 = cs[tok * half_dim + j + 1], s1 = sn[tok * half_dim + j + 1];
    sycl::vec<float, 4> r(v[0] * c0 - v[1] * s0, v[0] * s0 + v[1] * c0, v[2] * c1 - v[3] * s1, v[2] * s1 + v[3] * c1);
    r.store(p, q);
}
