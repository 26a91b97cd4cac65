__kernel void affine(const int N, const int k, __global int* a, __global const int* b) {
    const int i = get_global_id(0);
    if (i < N) a[i] = a[i] * k + b[i];
}
