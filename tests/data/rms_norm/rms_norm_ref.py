"""Reference for rms_norm.toml, in float64 with NumPy."""
import numpy as np

EPS = 1e-6


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    w = inputs["w"].astype(np.float64)
    mean_square = np.mean(x ** 2, axis=-1, keepdims=True)
    y = x / np.sqrt(mean_square + EPS) * w
    return {"y": y.astype(np.float32)}
