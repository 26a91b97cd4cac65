"""NumPy reference for KernelBench level 1 problem 21_Sigmoid: torch.sigmoid(x)."""
import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    return {"out": (1.0 / (1.0 + np.exp(-x))).astype(np.float32)}
