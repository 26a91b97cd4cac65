// SYCL transpose through a padded tile in group-local memory.
#include <sycl/sycl.hpp>
namespace syclexp = sycl::ext::oneapi::experimental;

constexpr int TILE = 16;

SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((syclexp::nd_range_kernel<2>))
void transpose(const float* in, float* out, int rows, int cols) {
    auto it = syclexp::this_work_item::get_nd_item<2>();
    auto grp = it.get_group();
    auto& tile = *sycl::ext::oneapi::group_local_memory_for_overwrite<float[TILE][TILE + 1]>(grp);
    const int lx = it.get_local_id(1), ly = it.get_local_id(0);
    int x = it.get_group(1) * TILE + lx, y = it.get_group(0) * TILE + ly;
    if (x < cols && y < rows) tile[ly][lx] = in[y * cols + x];
    sycl::group_barrier(grp);
    x = it.get_group(0) * TILE + lx;
    y = it.get_group(1) * TILE + ly;
    if (x < rows && y < cols) out[y * rows + x] = tile[lx][ly];
}
