"""NumPy reference: diag(A) @ B, A of shape (N,), B of shape (N, M)."""
import numpy as np


def reference(inputs, sizes, scalars):
    return {"out": (inputs["A"][:, None] * inputs["B"]).astype(np.float32)}
