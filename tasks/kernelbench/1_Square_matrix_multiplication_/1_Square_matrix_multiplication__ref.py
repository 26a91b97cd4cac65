"""NumPy reference for KernelBench level 1 problem 1: C = A @ B, A and B of shape (N, N)."""
import numpy as np


def reference(inputs, sizes, scalars):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    return {"out": (a @ b).astype(np.float32)}
