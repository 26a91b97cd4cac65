#if __has_include("@SECRET@")
#define PLANTED_FOUND 1
#endif
