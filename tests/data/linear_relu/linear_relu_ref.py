"""Reference for linear_relu.toml, in float64 with NumPy."""
import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    w = inputs["w"].astype(np.float64)
    y = np.maximum(x @ w.T + inputs["bias"], 0.0)
    return {"y": y.astype(np.float32)}
