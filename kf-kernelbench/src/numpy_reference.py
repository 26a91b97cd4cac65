"""Reference written by `kf task import-kernelbench` (PyTorch not the reference): runs the
UNCHANGED KernelBench problem file beside it with `kf_numpy_torch.py`, a NumPy stand-in for the
parts of torch it uses, in float64, rounded to f32 at the end.

The model's parameters are inputs of the task (buffer `<parameter name with '.' as '_'>`),
copied into the model before forward(); like KernelBench, the model is in training mode (batch
norm uses the batch's statistics).
"""
import importlib.util
import pathlib

import numpy as np

HERE = pathlib.Path(__file__).parent
PROBLEM = HERE / @PROBLEM@
INPUTS = @INPUTS@
# forward() arguments that get_inputs() gives as Python numbers (`s = 3.14`), by name.
CONSTANTS = @CONSTANTS@
# Module-level tuple constants, element by element, as expressions over the sizes.
TUPLES = @TUPLES@

_spec = importlib.util.spec_from_file_location("kf_numpy_torch", HERE / "kf_numpy_torch.py")
nt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nt)


def symbolic_shapes(sizes):
    """The output's and the parameters' shapes as expressions over the sizes (the importer's)."""
    inits = nt.parameter_inits(PROBLEM, sizes, TUPLES)
    rng = np.random.default_rng(0)
    _, model = nt.build(PROBLEM, sizes, TUPLES)
    arrays = {p["name"]: np.zeros([int(eval(e.replace("/", "//"), {"__builtins__": {}}, dict(sizes))) for e in p["shape"]]) for p in inits}
    module = nt.load_problem(PROBLEM, sizes, TUPLES)
    for name, t in zip(INPUTS, module.get_inputs()):
        arrays[name] = CONSTANTS[name] if name in CONSTANTS else rng.standard_normal([int(d) for d in t.sym_shape])
    _, out = nt.run(PROBLEM, sizes, TUPLES, INPUTS, arrays)
    return {
        "outputs": [{"name": "out", "dtype": "i32" if out.integer else "f32", "shape": [d.expr for d in out.sym_shape] or ["1"]}],
        "parameters": [{"name": p["name"], "dtype": "f32", "shape": p["shape"], "init": "normal"} for p in inits],
    }


def reference(inputs, sizes, scalars):
    _, out = nt.run(PROBLEM, sizes, TUPLES, INPUTS, {**inputs, **CONSTANTS})
    data = out.data.astype(np.int32 if out.integer else np.float32)
    return {"out": data.reshape(1) if data.ndim == 0 else data}
