"""NumPy reference for the KernelBench problem 39_L2Norm_.py (PyTorch is not installed here).

Write reference() so that it computes what the problem's Model.forward computes:
#   inputs["x"]: float32 of shape (batch_size, dim)
#   sizes: {"batch_size", "dim"} (the task's sizes, ints)
Return a dict of output arrays: {"out": array} (several outputs: "out0", "out1", ...).
Model weights (nn.Conv2d, nn.LayerNorm, ...) are inputs of the task: declare each one in
PARAMETERS as name -> shape expressions over the sizes, e.g. {"conv1d_weight": ["out_channels",
"in_channels", "kernel_size"]}, and read it from inputs[name].
"""
import numpy as np

PARAMETERS = {}


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True))
    return {"out": (x / norm).astype(np.float32)}
