"""NumPy reference for the KernelBench problem 42_Max_Pooling_2D.py (PyTorch is not installed here).

Write reference() so that it computes what the problem's Model.forward computes:
#   inputs["x"]: float32 of shape (batch_size, channels, height, width)
#   sizes: {"batch_size", "channels", "height", "width", "kernel_size", "stride", "padding", "dilation"} (the task's sizes, ints)
Return a dict of output arrays: {"out": array} (several outputs: "out0", "out1", ...).
Model weights (nn.Conv2d, nn.LayerNorm, ...) are inputs of the task: declare each one in
PARAMETERS as name -> shape expressions over the sizes, e.g. {"conv1d_weight": ["out_channels",
"in_channels", "kernel_size"]}, and read it from inputs[name].
"""
import numpy as np

PARAMETERS = {}


def reference(inputs, sizes, scalars):
    x = inputs["x"]
    k, s, p, d = (sizes[n] for n in ("kernel_size", "stride", "padding", "dilation"))
    b, c, h, w = x.shape
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    padded = np.full((b, c, h + 2 * p, w + 2 * p), -np.inf, dtype=np.float32)
    padded[:, :, p:p + h, p:p + w] = x
    out = np.full((b, c, oh, ow), -np.inf, dtype=np.float32)
    for ki in range(k):
        for kj in range(k):
            win = padded[:, :, ki * d: ki * d + s * (oh - 1) + 1: s, kj * d: kj * d + s * (ow - 1) + 1: s]
            out = np.maximum(out, win)
    return {"out": out}
