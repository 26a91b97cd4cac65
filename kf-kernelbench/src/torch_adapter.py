"""Reference written by `kf task import-kernelbench`: runs the UNCHANGED KernelBench problem
file beside it with PyTorch on the CPU.

The task's sizes replace the problem's module-level constants before get_init_inputs() is
called (it reads them at call time); the model's parameters are inputs of the task (buffer
`<parameter name with '.' as '_'>`), copied into the model before forward(). Like KernelBench,
the model is left in its default (training) mode.
"""
import importlib.util
import pathlib

import numpy as np
import torch

PROBLEM = pathlib.Path(__file__).parent / @PROBLEM@
INPUTS = @INPUTS@
# Module-level tuple constants, element by element, as expressions over the sizes.
TUPLES = @TUPLES@
# Inputs the problem makes with `.bool()`: the task passes them as 0/1 (f32 for masks).
BOOL_INPUTS = @BOOL_INPUTS@
# forward() arguments that get_inputs() gives as Python numbers (`s = 3.14`), by name.
CONSTANTS = @CONSTANTS@


def _model(sizes):
    spec = importlib.util.spec_from_file_location("kf_kernelbench_problem", PROBLEM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, value in sizes.items():
        if hasattr(module, name):
            setattr(module, name, int(value))
    env = {k: int(v) for k, v in sizes.items()}
    for name, elements in TUPLES.items():
        setattr(module, name, tuple(int(eval(e.replace("/", "//"), {"__builtins__": {}}, env)) for e in elements))
    torch.manual_seed(0)
    numbers = {n for n, v in vars(module).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return module.Model(*module.get_init_inputs()), numbers


def _buffer_name(parameter, numbers):
    # As the stand-in's `buffer_name`: `_param` after a name a size or scalar has.
    name = parameter.replace(".", "_")
    while name in numbers:
        name += "_param"
    return name


def torch_parameter_shapes(sizes):
    """The model's parameters at these sizes, by buffer name (used by the importer)."""
    model, numbers = _model(sizes)
    # A 0-d parameter is a task buffer of one element.
    return {_buffer_name(n, numbers): tuple(p.shape) or (1,) for n, p in model.named_parameters()}


def _prepare(inputs, sizes):
    """The model with the task's parameters copied in, and the forward() arguments."""
    model, numbers = _model(sizes)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            # A 0-d parameter (nn.Parameter(torch.tensor(c))) arrives as the task's one-element
            # buffer.
            value = np.ascontiguousarray(inputs[_buffer_name(name, numbers)]).reshape(tuple(parameter.shape))
            parameter.copy_(torch.from_numpy(value))
    def argument(n):
        if n in CONSTANTS:
            return CONSTANTS[n]
        t = torch.from_numpy(np.ascontiguousarray(inputs[n]))
        # torch.randint makes int64 tensors: the task's i32 inputs are widened back.
        return t.bool() if n in BOOL_INPUTS else t.long() if t.dtype == torch.int32 else t

    tensors = [argument(n) for n in INPUTS]
    return model, tensors


def time_forward(inputs, sizes, warmup=3, repeats=30, min_seconds=0.25, max_repeats=1000):
    """Median seconds of the model's forward() (PyTorch eager on the CPU), after `warmup`
    calls: at least `repeats` calls and `min_seconds` of them (at most `max_repeats`). Ten calls
    after one warm-up were too few: when the machine is busy, PyTorch's OpenMP threads wait a
    scheduler tick for one another (times of 4 to 99 ms where a call takes 0.1 ms), and a
    median of ten took those stalls for the operator's time."""
    import time

    model, tensors = _prepare(inputs, sizes)
    times = []
    with torch.no_grad():
        for _ in range(warmup):
            model(*tensors)
        started = time.perf_counter()
        while len(times) < max_repeats and (
            len(times) < repeats or time.perf_counter() - started < min_seconds
        ):
            start = time.perf_counter()
            model(*tensors)
            times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def reference(inputs, sizes, scalars):
    model, tensors = _prepare(inputs, sizes)
    with torch.no_grad():
        result = model(*tensors)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    names = ["out"] if len(results) == 1 else [f"out{i}" for i in range(len(results))]
    outputs = {}
    for name, tensor in zip(names, results):
        array = tensor.detach().cpu().numpy()
        if array.ndim == 0:
            array = array.reshape(1)
        if array.dtype == np.int64 or array.dtype == np.bool_:
            array = array.astype(np.int32)
        elif array.dtype == np.float64:
            array = array.astype(np.float32)
        outputs[name] = array
    return outputs
