"""NumPy reference for KernelBench level 1 problem 16: C = A.T @ B, A (K, M), B (K, N) -> C (M, N)."""
import numpy as np


def reference(inputs, sizes, scalars):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    return {"out": (a.T @ b).astype(np.float32)}
