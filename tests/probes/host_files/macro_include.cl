#define P "@SECRET@"
#include P
