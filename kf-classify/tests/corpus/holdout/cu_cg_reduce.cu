// CUDA reduction with cooperative groups: tile-level reduce, block sync, one atomic per block.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

__global__ void sum_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    __shared__ float partial[32];
    float v = 0.0f;
    for (int i = block.group_index().x * block.size() + block.thread_rank(); i < n; i += block.size() * gridDim.x)
        v += in[i];
    v = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) partial[tile.meta_group_rank()] = v;
    block.sync();
    if (tile.meta_group_rank() == 0) {
        v = tile.thread_rank() < tile.meta_group_size() ? partial[tile.thread_rank()] : 0.0f;
        v = cg::reduce(tile, v, cg::plus<float>());
        if (tile.thread_rank() == 0) atomicAdd(out, v);
    }
}
