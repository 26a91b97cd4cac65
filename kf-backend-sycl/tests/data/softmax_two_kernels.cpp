// Row softmax in two SYCL free-function kernels: row statistics into the scratch buffer
// STATS, then an element-wise normalisation.
#include <sycl/sycl.hpp>

#include <limits>

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void row_stats(const int ROWS, const int COLS, const float* X, float* Y, float* STATS) {
    const int r = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    const float* x = X + (long)r * COLS;
    float m = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < COLS; ++c) {
        m = sycl::fmax(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += sycl::exp(x[c] - m);
    }
    STATS[2 * r] = m;
    STATS[2 * r + 1] = s;
}

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<2>))
void normalise(const int ROWS, const int COLS, const float* X, float* Y, float* STATS) {
    auto item = sycl::ext::oneapi::this_work_item::get_nd_item<2>();
    const int c = item.get_global_id(0);
    const int r = item.get_global_id(1);
    if (r >= ROWS || c >= COLS) {
        return;
    }
    const long i = (long)r * COLS + c;
    Y[i] = sycl::exp(X[i] - STATS[2 * r]) / STATS[2 * r + 1];
}
