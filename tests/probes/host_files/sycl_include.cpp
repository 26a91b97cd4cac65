#include <sycl/sycl.hpp>
#include "@SECRET@"
