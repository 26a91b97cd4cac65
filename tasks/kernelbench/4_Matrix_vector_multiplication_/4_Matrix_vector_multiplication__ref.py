"""NumPy reference for KernelBench level 1 problem 4: C = A @ B, A (M, K), B (K, 1) -> C (M, 1)."""
import numpy as np


def reference(inputs, sizes, scalars):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    return {"out": (a @ b).astype(np.float32)}
