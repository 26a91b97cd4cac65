#include <sycl/sycl.hpp>
#if __has_include(<@SECRET@>)
#endif
