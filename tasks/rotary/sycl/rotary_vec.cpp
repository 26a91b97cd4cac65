// Rotary embedding with vector half loads in SYCL, the rendering of ../rotary_vec.cl: each
// work-item rotates ITEMS groups of VW adjacent pairs of one (position, head) row. A group is
// loaded as one sycl::vec<half, 2 VW> (the pairs interleaved), its cos/sin as one
// sycl::vec<half, VW> each, computed in float and stored as one vector, rounded to nearest even.
// Needs HEAD_DIM / 2 % VW == 0 (USM allocations are aligned for the vector types).
#include <sycl/sycl.hpp>

#if VW != 1 && VW != 2 && VW != 4
#error "VW must be 1, 2 or 4"
#endif

typedef sycl::vec<sycl::half, 2 * VW> xvec;
typedef sycl::vec<sycl::half, VW> csvec;

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void rotary(sycl::half* x, const sycl::half* cos_t, const sycl::half* sin_t,
            const int SEQ, const int HEADS, const int HEAD_DIM) {
    const auto item = sycl::ext::oneapi::this_work_item::get_nd_item<1>();
    const int groups_per_row = HEAD_DIM / 2 / VW;
    const long groups = (long)SEQ * HEADS * groups_per_row;
    const long stride = item.get_global_range(0);
    xvec* xv = reinterpret_cast<xvec*>(x);
    const csvec* cv = reinterpret_cast<const csvec*>(cos_t);
    const csvec* sv = reinterpret_cast<const csvec*>(sin_t);
    for (int it = 0; it < ITEMS; ++it) {
        // Strided by the global size: neighbouring work-items touch neighbouring groups.
        const long g = item.get_global_id(0) + it * stride;
        if (g >= groups) {
            return;
        }
        const long gi = g % groups_per_row;
        const long t = g / ((long)HEADS * groups_per_row);
        const long cs_group = t * groups_per_row + gi;
        const xvec v = xv[g];
        const csvec c = cv[cs_group];
        const csvec s = sv[cs_group];
        xvec out;
#pragma unroll
        for (int j = 0; j < VW; ++j) {
            const float a = v[2 * j];
            const float b = v[2 * j + 1];
            const float cj = c[j];
            const float sj = s[j];
            out[2 * j] = sycl::half(a * cj - b * sj);
            out[2 * j + 1] = sycl::half(a * sj + b * cj);
        }
        xv[g] = out;
    }
}
