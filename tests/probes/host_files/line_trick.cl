#line 1 "@SECRET@"
#include "@SECRET@"
