#if (1ULL << 63) > 0
#include "@SECRET@"
#endif
