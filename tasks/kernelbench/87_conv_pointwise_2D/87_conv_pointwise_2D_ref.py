"""NumPy reference for KernelBench level 1 problem 87: a 1x1 Conv2d without bias,
out[b, o, h, w] = sum_i weight[o, i, 0, 0] * x[b, i, h, w].

The convolution weight is an input of the task, declared here so that the importer gives it a
buffer of shape (out_channels, in_channels, 1, 1)."""
import numpy as np

PARAMETERS = {"conv1d_weight": ["out_channels", "in_channels", "1", "1"]}


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    w = inputs["conv1d_weight"].astype(np.float64)[:, :, 0, 0]
    return {"out": np.einsum("oi,bihw->bohw", w, x).astype(np.float32)}
