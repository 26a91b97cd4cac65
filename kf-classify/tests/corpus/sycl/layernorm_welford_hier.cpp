// SYCL layer norm, one work-group per row: Welford per work-item, merged across the
// sub-group with permute_group_by_xor, then across sub-groups through work-group-local
// memory after a barrier.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

struct Stats { float n, mean, m2; };

static inline Stats welford_merge(Stats a, Stats b) {
    const float n = a.n + b.n;
    if (n == 0.0f) return a;
    const float delta = b.mean - a.mean;
    return {n, a.mean + delta * b.n / n, a.m2 + b.m2 + delta * delta * a.n * b.n / n};
}

static syclexp::work_group_static<Stats[32]> partials;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void layernorm(const float* x, float* y, int cols, float eps) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto sg = it.get_sub_group();
    const int row = it.get_group(0);
    const int lid = it.get_local_id(0);
    const float* xr = x + row * cols;
    Stats st{0.0f, 0.0f, 0.0f};
    for (int i = lid; i < cols; i += it.get_local_range(0)) {
        st.n += 1.0f;
        const float delta = xr[i] - st.mean;
        st.mean += delta / st.n;
        st.m2 += delta * (xr[i] - st.mean);
    }
    for (int off = sg.get_local_range()[0] / 2; off > 0; off /= 2) {
        Stats o{sycl::permute_group_by_xor(sg, st.n, off), sycl::permute_group_by_xor(sg, st.mean, off),
                sycl::permute_group_by_xor(sg, st.m2, off)};
        st = welford_merge(st, o);
    }
    auto& part = partials.get();
    if (sg.get_local_id()[0] == 0) part[sg.get_group_id()[0]] = st;
    sycl::group_barrier(it.get_group());
    Stats total{0.0f, 0.0f, 0.0f};
    for (int s = 0; s < static_cast<int>(sg.get_group_range()[0]); ++s) total = welford_merge(total, part[s]);
    const float rstd = sycl::rsqrt(total.m2 / total.n + eps);
    for (int i = lid; i < cols; i += it.get_local_range(0)) y[row * cols + i] = (xr[i] - total.mean) * rstd;
}
