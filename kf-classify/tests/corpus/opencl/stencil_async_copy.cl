// 1-D 3-point stencil: the work-group's window (plus halo) is copied into local memory
// with async_work_group_copy, then every work-item computes one output.
#define RADIUS 1

__kernel void stencil(__global const float* in, __global float* out, __local float* window,
                      const int n) {
    const int lsz = get_local_size(0);
    const int base = get_group_id(0) * lsz;
    event_t ev = async_work_group_copy(window, in + base, lsz + 2 * RADIUS, 0);
    wait_group_events(1, &ev);
    const int lid = get_local_id(0);
    const int gid = base + lid;
    if (gid + 2 * RADIUS < n) {
        out[gid + RADIUS] = 0.25f * window[lid] + 0.5f * window[lid + 1] + 0.25f * window[lid + 2];
    }
}
