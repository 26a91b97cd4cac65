"""NumPy reference: nn.ConvTranspose2d (stride `stride`, no padding), exact GELU,
nn.GroupNorm(num_groups, out_channels) (eps 1e-5). The group split is a reshape, which fails
where num_groups does not divide out_channels, as the torch module refuses to be built."""
import math

import numpy as np

PARAMETERS = {
    "conv_transpose_weight": ("in_channels", "out_channels", "kernel_size", "kernel_size"),
    "conv_transpose_bias": ("out_channels",),
    "group_norm_weight": ("out_channels",),
    "group_norm_bias": ("out_channels",),
}

_erf = np.vectorize(math.erf)


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    w = inputs["conv_transpose_weight"].astype(np.float64)
    s, k = int(sizes["stride"]), w.shape[2]
    n, _, h, wd = x.shape
    y = np.zeros((n, w.shape[1], (h - 1) * s + k, (wd - 1) * s + k))
    for kh in range(k):
        for kw in range(k):
            y[:, :, kh : kh + (h - 1) * s + 1 : s, kw : kw + (wd - 1) * s + 1 : s] += np.einsum(
                "nihw,io->nohw", x, w[:, :, kh, kw]
            )
    y += inputs["conv_transpose_bias"][None, :, None, None]
    y = 0.5 * y * (1.0 + _erf(y / math.sqrt(2.0)))
    groups = int(sizes["num_groups"])
    g = y.reshape(n, groups, y.shape[1] // groups, -1)
    g = (g - g.mean(axis=(2, 3), keepdims=True)) / np.sqrt(g.var(axis=(2, 3), keepdims=True) + 1e-5)
    out = g.reshape(y.shape) * inputs["group_norm_weight"][None, :, None, None]
    return {"out": (out + inputs["group_norm_bias"][None, :, None, None]).astype(np.float32)}
