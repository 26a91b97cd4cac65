#include "@SECRET@"
