"""NumPy reference for KernelBench level 1 problem 40_LayerNorm: nn.LayerNorm over the last
three dimensions (features, dim1, dim2) with eps = 1e-5 and the biased variance.

The model's affine parameters are inputs of the task (the kernel receives them), declared
here so that the importer gives them buffers: weight and bias of shape (features, dim1, dim2)."""
import numpy as np

EPS = 1e-5

PARAMETERS = {
    "ln_weight": ["features", "dim1", "dim2"],
    "ln_bias": ["features", "dim1", "dim2"],
}


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    axes = (1, 2, 3)
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + EPS)
    y = y * inputs["ln_weight"].astype(np.float64) + inputs["ln_bias"].astype(np.float64)
    return {"out": y.astype(np.float32)}
