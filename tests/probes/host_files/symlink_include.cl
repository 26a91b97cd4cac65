#include "@LINK@"
