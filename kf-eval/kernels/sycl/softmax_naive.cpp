// Row-wise softmax, row-major X[ROWS x COLS] -> Y, as a SYCL free-function kernel: three
// passes over each row (max, sum of exponentials, normalise), one work-item per row.
#include <sycl/sycl.hpp>

#include <limits>

extern "C" SYCL_EXT_ONEAPI_FUNCTION_PROPERTY((sycl::ext::oneapi::experimental::nd_range_kernel<1>))
void softmax(const int ROWS, const int COLS,
             const float* X,
             float* Y) {
    const int r = sycl::ext::oneapi::this_work_item::get_nd_item<1>().get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    const float* x = X + (long)r * COLS;
    float* y = Y + (long)r * COLS;
    float m = -std::numeric_limits<float>::infinity();
    for (int c = 0; c < COLS; ++c) {
        m = sycl::fmax(m, x[c]);
    }
    float s = 0.0f;
    for (int c = 0; c < COLS; ++c) {
        s += sycl::exp(x[c] - m);
    }
    for (int c = 0; c < COLS; ++c) {
        y[c] = sycl::exp(x[c] - m) / s;
    }
}
