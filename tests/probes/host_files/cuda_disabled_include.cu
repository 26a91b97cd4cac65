#include <cuda_fp16.h>
#if 0
#include "@SECRET@"
#endif
