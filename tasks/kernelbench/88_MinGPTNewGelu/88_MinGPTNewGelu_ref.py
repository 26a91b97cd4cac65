"""NumPy reference for KernelBench level 1 problem 88_MinGPTNewGelu (the tanh GELU of
BERT/GPT): 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
import math

import numpy as np


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3.0))
    return {"out": (0.5 * x * (1.0 + np.tanh(inner))).astype(np.float32)}
