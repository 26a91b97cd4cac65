// Naive rotary embedding in SYCL: one work-item per (position, head, pair), scalar half loads
// converted to float, results rounded back to half (round to nearest even); the SYCL rendering
// of ../rotary_naive.cl.
#include <sycl/sycl.hpp>

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void rotary(sycl::half* x, const sycl::half* cos_t, const sycl::half* sin_t,
            const int SEQ, const int HEADS, const int HEAD_DIM) {
    const int pairs = HEAD_DIM / 2;
    const long p = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (p >= (long)SEQ * HEADS * pairs) {
        return;
    }
    const long i = p % pairs;
    const long t = p / ((long)HEADS * pairs);
    const float a = x[2 * p];
    const float b = x[2 * p + 1];
    const float c = cos_t[t * pairs + i];
    const float s = sin_t[t * pairs + i];
    x[2 * p] = sycl::half(a * c - b * s);
    x[2 * p + 1] = sycl::half(a * s + b * c);
}
