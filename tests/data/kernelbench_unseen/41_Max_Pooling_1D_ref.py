"""NumPy reference: nn.MaxPool1d(kernel_size, stride, padding, dilation) over the last axis,
padding with -inf."""
import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"]
    k, st, pad, dil = (int(sizes[n]) for n in ("kernel_size", "stride", "padding", "dilation"))
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad)), constant_values=-np.inf)
    length_out = (x.shape[2] + 2 * pad - dil * (k - 1) - 1) // st + 1
    taps = [padded[:, :, j * dil : j * dil + st * (length_out - 1) + 1 : st] for j in range(k)]
    return {"out": np.max(np.stack(taps), axis=0).astype(np.float32)}
