#define CAT(a, b) a##b
#if CAT(__has_, include)("@SECRET@")
#define PLANTED_FOUND 1
#endif
