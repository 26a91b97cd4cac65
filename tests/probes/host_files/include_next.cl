#include_next "@SECRET@"
