"""NumPy reference for KernelBench level 1 problem 36_RMSNorm_:
x / sqrt(mean(x^2 over dim 1) + eps), eps = 1e-5 (the Model's default)."""
import numpy as np

EPS = 1e-5


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    rms = np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    return {"out": (x / rms).astype(np.float32)}
