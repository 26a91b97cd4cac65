"""NumPy reference of the rotary task: Llama-3 rotary embedding of adjacent pairs, computed in
float32 from the half inputs and rounded to half (what a kernel using vload_half/vstore_half
computes)."""
import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float32)
    c = inputs["cos"].astype(np.float32)[:, None, :]
    s = inputs["sin"].astype(np.float32)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return {"x": out.astype(np.float16)}
