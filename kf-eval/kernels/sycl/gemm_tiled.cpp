// Local-memory tiled SGEMM, row-major: C[M x N] = A[M x K] * B[K x N], as a SYCL
// free-function kernel. Each work-group computes a TS x TS tile of C; each work-item computes
// WPT rows of one column of that tile (rows row, row + RTS, ...), so a work-group is
// (TS / WPT) x TS work-items. SYCL's last dimension moves fastest: dimension 1 runs along a
// row of C. Requires M, N and K to be multiples of TS (see the manifest's constraints).
#include <sycl/sycl.hpp>

#ifndef TS
#define TS 32
#endif
#ifndef WPT
#define WPT 4
#endif
#define RTS (TS / WPT)

namespace syclexp = sycl::ext::oneapi::experimental;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void gemm(const int M, const int N, const int K,
          const float* A,
          const float* B,
          float* C) {
    // Work-group local memory; +1 padding on the inner dimension avoids bank conflicts.
    static syclexp::work_group_static<float[TS][TS + 1]> a_tile;
    static syclexp::work_group_static<float[TS][TS + 1]> b_tile;
    float (&Asub)[TS][TS + 1] = a_tile;
    float (&Bsub)[TS][TS + 1] = b_tile;

    const sycl::nd_item<2> it = sycl::ext::oneapi::this_work_item::get_nd_item<2>();
    const int row = it.get_local_id(0);                 // 0 .. RTS-1
    const int col = it.get_local_id(1);                 // 0 .. TS-1
    const int group_row = it.get_group(0) * TS;
    const int global_col = it.get_group(1) * TS + col;

    float acc[WPT];
    for (int w = 0; w < WPT; ++w) {
        acc[w] = 0.0f;
    }

    const int tiles = K / TS;
    for (int t = 0; t < tiles; ++t) {
        for (int w = 0; w < WPT; ++w) {
            const int r = row + w * RTS;
            Asub[r][col] = A[(group_row + r) * K + t * TS + col];
            Bsub[r][col] = B[(t * TS + r) * N + global_col];
        }
        sycl::group_barrier(it.get_group());
        for (int k = 0; k < TS; ++k) {
            const float b = Bsub[k][col];
            for (int w = 0; w < WPT; ++w) {
                acc[w] += Asub[row + w * RTS][k] * b;
            }
        }
        sycl::group_barrier(it.get_group());
    }
    for (int w = 0; w < WPT; ++w) {
        C[(group_row + row + w * RTS) * N + global_col] = acc[w];
    }
}
