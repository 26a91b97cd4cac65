#include <cuda_fp16.h>
#if 0
#include <cuda_bf16.h>
#endif
