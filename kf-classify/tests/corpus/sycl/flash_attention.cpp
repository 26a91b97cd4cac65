// SYCL flash-style attention forward, one query row per work-item: K/V tiles are staged in
// group-local memory, scores use an online softmax, and the output row is a private
// accumulator array rescaled as the running max grows.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

#define D 64
#define BC 32

static syclexp::work_group_static<float[BC][D]> Ktile;
static syclexp::work_group_static<float[BC][D]> Vtile;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<1>))
void attention(const float* Q, const float* Kmat, const float* Vmat, float* O, int seq, float scale) {
    auto it = syclexp::this_work_item::get_nd_item<1>();
    auto g = it.get_group();
    const int qi = it.get_global_id(0);
    const int lid = it.get_local_id(0);
    const int lsz = it.get_local_range(0);
    auto& Ks = Ktile.get();
    auto& Vs = Vtile.get();
    float q[D];
    float o[D];
    for (int d = 0; d < D; ++d) { q[d] = Q[qi * D + d] * scale; o[d] = 0.0f; }
    float m = -INFINITY, l = 0.0f;
    for (int kb = 0; kb < seq; kb += BC) {
        for (int i = lid; i < BC * D; i += lsz) {
            Ks[i / D][i % D] = Kmat[(kb + i / D) * D + i % D];
            Vs[i / D][i % D] = Vmat[(kb + i / D) * D + i % D];
        }
        sycl::group_barrier(g);
        for (int j = 0; j < BC; ++j) {
            float sc = 0.0f;
            for (int d = 0; d < D; ++d) sc += q[d] * Ks[j][d];
            const float m_new = sycl::fmax(m, sc);
            const float corr = sycl::exp(m - m_new);
            const float p = sycl::exp(sc - m_new);
            l = l * corr + p;
            for (int d = 0; d < D; ++d) o[d] = o[d] * corr + p * Vs[j][d];
            m = m_new;
        }
        sycl::group_barrier(g);
    }
    for (int d = 0; d < D; ++d) O[qi * D + d] = o[d] / l;
}
