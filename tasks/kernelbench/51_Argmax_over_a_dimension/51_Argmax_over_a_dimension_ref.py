"""NumPy reference for KernelBench level 1 problem 51: torch.argmax(x, dim=1).

The problem's model is built with get_init_inputs() == [1]: the reduced dimension is the
literal 1, not a module constant. Like torch, np.argmax returns the first index of the
maximum; the index is returned as int32 (the task's i32 buffer)."""
import numpy as np


def reference(inputs, sizes, scalars):
    return {"out": np.argmax(inputs["x"], axis=1).astype(np.int32)}
