"""NumPy reference for KernelBench level 1 problem 76: Conv1d without bias, no padding,
with stride and dilation:
out[b, o, t] = sum_{i, k} weight[o, i, k] * x[b, i, t * stride + k * dilation],
length_out = (length - dilation * (kernel_size - 1) - 1) // stride + 1.

The convolution weight is an input of the task, declared here so that the importer gives it a
buffer of shape (out_channels, in_channels, kernel_size)."""
import numpy as np

PARAMETERS = {"conv1d_weight": ["out_channels", "in_channels", "kernel_size"]}


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    w = inputs["conv1d_weight"].astype(np.float64)
    stride = int(sizes["stride"])
    dilation = int(sizes["dilation"])
    ksize = w.shape[2]
    length = x.shape[2]
    length_out = (length - dilation * (ksize - 1) - 1) // stride + 1
    out = np.zeros((x.shape[0], w.shape[0], length_out))
    for k in range(ksize):
        start = k * dilation
        taps = x[:, :, start : start + stride * (length_out - 1) + 1 : stride]
        out += np.einsum("oi,bit->bot", w[:, :, k], taps)
    return {"out": out.astype(np.float32)}
