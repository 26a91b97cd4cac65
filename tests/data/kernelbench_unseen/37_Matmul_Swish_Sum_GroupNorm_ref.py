"""NumPy reference: nn.Linear, x * sigmoid(x), + bias, nn.GroupNorm(num_groups, out_features)
(eps 1e-5). The group split is a reshape, which fails where num_groups does not divide
out_features, as the torch module refuses to be built."""
import numpy as np

PARAMETERS = {
    "matmul_weight": ("out_features", "in_features"),
    "matmul_bias": ("out_features",),
    "bias": ("out_features",),
    "group_norm_weight": ("out_features",),
    "group_norm_bias": ("out_features",),
}


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64) @ inputs["matmul_weight"].astype(np.float64).T + inputs["matmul_bias"]
    x = x / (1.0 + np.exp(-x)) + inputs["bias"]
    groups = int(sizes["num_groups"])
    g = x.reshape(x.shape[0], groups, x.shape[1] // groups)
    g = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + 1e-5)
    out = g.reshape(x.shape) * inputs["group_norm_weight"] + inputs["group_norm_bias"]
    return {"out": out.astype(np.float32)}
