// Classic SYCL (lambda, local_accessor): tiled matrix-vector product with a work-group barrier.
#include <sycl/sycl.hpp>

void gemv(sycl::queue& q, const float* A, const float* x, float* y, int rows, int cols) {
    constexpr int WG = 128;
    q.submit([&](sycl::handler& h) {
        sycl::local_accessor<float, 1> xs(sycl::range<1>(WG), h);
        h.parallel_for(sycl::nd_range<1>(rows, WG), [=](sycl::nd_item<1> it) {
            const int r = it.get_global_id(0);
            const int lid = it.get_local_id(0);
            float acc = 0.0f;
            for (int c0 = 0; c0 < cols; c0 += WG) {
                xs[lid] = x[c0 + lid];
                it.barrier(sycl::access::fence_space::local_space);
                for (int j = 0; j < WG; ++j) acc += A[r * cols + c0 + j] * xs[j];
                it.barrier(sycl::access::fence_space::local_space);
            }
            y[r] = acc;
        });
    });
}
