#include "@PPID_ENVIRON@"
