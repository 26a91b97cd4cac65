"""NumPy reference for KernelBench level 1 problem 26_GELU_: the exact (erf) GELU,
torch.nn.functional.gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2)))."""
import math

import numpy as np

# NumPy has no vectorised erf (and SciPy is not a dependency); math.erf applied through
# np.frompyfunc is exact to double precision, and these inputs are small.
_ERF = np.frompyfunc(math.erf, 1, 1)


def reference(inputs, sizes, scalars):
    x = inputs["x"].astype(np.float64)
    erf = _ERF(x / math.sqrt(2.0)).astype(np.float64)
    return {"out": (0.5 * x * (1.0 + erf)).astype(np.float32)}
