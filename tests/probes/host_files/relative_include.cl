#include "@SECRET_REL@"
