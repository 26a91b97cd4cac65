// Tensor-core GEMM with WMMA fragments, one 16x16 tile of C per warp, straight from global.
#include <mma.h>
using namespace nvcuda;

__global__ void wmma_gemm(const half* a, const half* b, float* c, int M, int N, int K) {
    const int warpM = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int warpN = blockIdx.y * blockDim.y + threadIdx.y;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b_frag;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc_frag;
    wmma::fill_fragment(acc_frag, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a_frag, a + warpM * 16 * K + k, K);
        wmma::load_matrix_sync(b_frag, b + warpN * 16 * K + k, K);
        wmma::mma_sync(acc_frag, a_frag, b_frag, acc_frag);
    }
    wmma::store_matrix_sync(c + warpM * 16 * N + warpN * 16, acc_frag, N, wmma::mem_row_major);
}
