#if -1 > 0u
#include "@SECRET@"
#endif
