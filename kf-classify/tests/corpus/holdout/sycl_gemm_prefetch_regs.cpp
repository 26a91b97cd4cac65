// SYCL GEMM: the next tile is prefetched from global into registers while the current
// local tile is consumed; 4 outputs per work-item.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

#define TS 32
#define WPT 4

static syclexp::work_group_static<float[TS][TS]> As;
static syclexp::work_group_static<float[TS][TS]> Bs;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    auto it = syclexp::this_work_item::get_nd_item<2>();
    auto g = it.get_group();
    const int r = it.get_local_id(0), c = it.get_local_id(1);
    const int row = it.get_group(0) * TS + r, col0 = it.get_group(1) * TS + c * WPT;
    float acc[WPT] = {};
    float a_next = A[row * K + c];
    float b_next[WPT];
    for (int w = 0; w < WPT; ++w) b_next[w] = B[r * N + col0 + w];
    for (int t = 0; t < K; t += TS) {
        As[r][c] = a_next;
        for (int w = 0; w < WPT; ++w) Bs[r][c * WPT + w] = b_next[w];
        sycl::group_barrier(g);
        if (t + TS < K) {
            a_next = A[row * K + t + TS + c];
            for (int w = 0; w < WPT; ++w) b_next[w] = B[(t + TS + r) * N + col0 + w];
        }
        for (int k = 0; k < TS; ++k)
            for (int w = 0; w < WPT; ++w) acc[w] += As[r][k] * Bs[k][c * WPT + w];
        sycl::group_barrier(g);
    }
    for (int w = 0; w < WPT; ++w) C[row * N + col0 + w] = acc[w];
}
