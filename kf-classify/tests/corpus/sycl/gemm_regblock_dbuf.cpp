// SYCL GEMM: double-buffered local tiles (work_group_static, two buffers alternated),
// register fragments loaded from the local tiles, a TM x TN accumulator block per work-item.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

#define BM 64
#define BN 64
#define BK 16
#define TM 4
#define TN 4

static syclexp::work_group_static<float[2][BK][BM]> tileA;
static syclexp::work_group_static<float[2][BK][BN]> tileB;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    auto it = syclexp::this_work_item::get_nd_item<2>();
    const int ty = it.get_local_id(0), tx = it.get_local_id(1);
    const int bm = it.get_group(0) * BM, bn = it.get_group(1) * BN;
    const int tid = ty * (BN / TN) + tx;
    auto& As = tileA.get();
    auto& Bs = tileB.get();

    float acc[TM][TN] = {};
    float a_frag[TM];
    float b_frag[TN];

    auto load = [&](int buf, int k0) {
        for (int i = tid; i < BK * BM; i += (BM / TM) * (BN / TN)) {
            const int kk = i / BM, m = i % BM;
            As[buf][kk][m] = A[(bm + m) * K + k0 + kk];
            Bs[buf][kk][m] = B[(k0 + kk) * N + bn + m];
        }
    };

    load(0, 0);
    sycl::group_barrier(it.get_group());
    int buf = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {
        if (k0 + BK < K) load(buf ^ 1, k0 + BK);
        for (int kk = 0; kk < BK; ++kk) {
            for (int i = 0; i < TM; ++i) a_frag[i] = As[buf][kk][ty * TM + i];
            for (int j = 0; j < TN; ++j) b_frag[j] = Bs[buf][kk][tx * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] = sycl::fma(a_frag[i], b_frag[j], acc[i][j]);
        }
        sycl::group_barrier(it.get_group());
        buf ^= 1;
    }
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) C[(bm + ty * TM + i) * N + bn + tx * TN + j] = acc[i][j];
}
