// N-body forces: bodies are staged tile by tile in local memory; one body per work-item.
__kernel void nbody(__global const float4* pos, __global float4* acc_out, const int n, const float eps2,
                    __local float4* tile) {
    const int gid = get_global_id(0);
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    const float4 p = pos[gid];
    float4 a = (float4)(0.0f);
    for (int base = 0; base < n; base += lsz) {
        tile[lid] = pos[base + lid];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < lsz; j++) {
            const float4 q = tile[j];
            const float4 r = q - p;
            const float d2 = r.x * r.x + r.y * r.y + r.z * r.z + eps2;
            const float inv = native_rsqrt(d2);
            a += r * (q.w * inv * inv * inv);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    acc_out[gid] = a;
}
