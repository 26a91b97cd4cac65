"""NumPy reference for KernelBench level 1 problem 47: torch.sum(x, dim=reduce_dim, keepdim=True)."""
import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    out = np.sum(x, axis=int(sizes["reduce_dim"]), keepdims=True)
    return {"out": out.astype(np.float32)}
