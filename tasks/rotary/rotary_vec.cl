// Rotary embedding with vector half loads: each work-item rotates ITEMS groups of VW adjacent
// pairs of one (position, head) row. A group is loaded with one vload_half{2,4,8} (VW pairs as
// float{2,4,8}: .even are the first elements of the pairs, .odd the second), its cos/sin with one
// vload_half{,2,4}, and stored with one vstore_half{2,4,8}_rte. Needs HEAD_DIM / 2 % VW == 0.
#if VW == 1
#define XLOAD vload_half2
#define XSTORE vstore_half2_rte
#define CSLOAD vload_half
typedef float2 xvec;
typedef float csvec;
#elif VW == 2
#define XLOAD vload_half4
#define XSTORE vstore_half4_rte
#define CSLOAD vload_half2
typedef float4 xvec;
typedef float2 csvec;
#elif VW == 4
#define XLOAD vload_half8
#define XSTORE vstore_half8_rte
#define CSLOAD vload_half4
typedef float8 xvec;
typedef float4 csvec;
#else
#error "VW must be 1, 2 or 4"
#endif

__kernel void rotary(__global half* x, __global const half* cos_t, __global const half* sin_t,
                     const int SEQ, const int HEADS, const int HEAD_DIM) {
    const int groups_per_row = HEAD_DIM / 2 / VW;
    const long groups = (long)SEQ * HEADS * groups_per_row;
    const long stride = get_global_size(0);
    for (int it = 0; it < ITEMS; ++it) {
        // Strided by the global size: neighbouring work-items touch neighbouring groups.
        const long g = get_global_id(0) + it * stride;
        if (g >= groups) {
            return;
        }
        const long gi = g % groups_per_row;
        const long t = g / ((long)HEADS * groups_per_row);
        const long cs_group = t * groups_per_row + gi;
        xvec v = XLOAD(g, x);
        const csvec c = CSLOAD(cs_group, cos_t);
        const csvec s = CSLOAD(cs_group, sin_t);
        const csvec a = v.even;
        const csvec b = v.odd;
        v.even = a * c - b * s;
        v.odd = a * s + b * c;
        XSTORE(v, g, x);
    }
}
