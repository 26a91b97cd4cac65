#include <sycl/sycl.hpp>
#if 0
#include <limits>
#endif
