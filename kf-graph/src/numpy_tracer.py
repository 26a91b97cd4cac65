# KernelFoundry: traces a task file's NumPy reference into an operator graph (kf-graph).
#
#   python numpy_tracer.py SCRIPT WORKDIR
#
# WORKDIR/meta.json holds {"sizes": {name: int}, "scalars": {name: number},
# "inputs": {name: {"dims": [size expression, ...], "shape": [int, ...], "dtype": "f32"}}}.
# The script's reference(inputs, sizes, scalars) is called with traced arrays instead of
# NumPy arrays: every operation it applies is recorded with its symbolic shape, and nothing
# is computed. WORKDIR/graph.json receives {"nodes": [...], "outputs": {name: node}} (the
# format of kf_graph::Graph), or {"unsupported": construct, "detail": text} when the script
# does something this tracer does not know: then there is no graph, never a wrong one.
# Exit codes: 0 graph or unsupported written, 3 the script failed to load or raised,
# 4 NumPy is missing.
import importlib.util
import json
import os
import sys
import traceback


def fail(code, message):
    sys.stderr.write(message.rstrip() + "\n")
    sys.exit(code)


try:
    import numpy as np
except ImportError as e:
    fail(4, f"NumPy is not installed for {sys.executable}: {e}")


class Unsupported(Exception):
    """A construct the tracer does not know: its name, and where it was met."""

    def __init__(self, construct, detail=""):
        super().__init__(construct)
        self.construct = construct
        self.detail = detail


# ---------------------------------------------------------------- symbolic sizes
class SymInt(int):
    """An int that remembers its expression over the task's sizes (`/` is integer division,
    as in kf's size expressions)."""

    def __new__(cls, value, expr=None):
        obj = int.__new__(cls, value)
        obj.expr = expr if expr is not None else str(int(value))
        return obj

    def _op(self, other, sym, fn, reverse=False):
        if not isinstance(other, int) or isinstance(other, bool):
            return fn(int(self), other) if not reverse else fn(other, int(self))
        x, y = (other, self) if reverse else (self, other)
        return SymInt(fn(int(x), int(y)), f"({expr_of(x)} {sym} {expr_of(y)})")

    def __add__(self, o):
        return self._op(o, "+", lambda a, b: a + b)

    def __radd__(self, o):
        return self._op(o, "+", lambda a, b: a + b, True)

    def __sub__(self, o):
        return self._op(o, "-", lambda a, b: a - b)

    def __rsub__(self, o):
        return self._op(o, "-", lambda a, b: a - b, True)

    def __mul__(self, o):
        return self._op(o, "*", lambda a, b: a * b)

    def __rmul__(self, o):
        return self._op(o, "*", lambda a, b: a * b, True)

    def __floordiv__(self, o):
        return self._op(o, "/", lambda a, b: a // b)

    def __rfloordiv__(self, o):
        return self._op(o, "/", lambda a, b: a // b, True)


class SymFloat(float):
    """A scalar of the task: used directly in an operation it becomes a scalar node, which a
    generated kernel reads by name."""

    def __new__(cls, value, name):
        obj = float.__new__(cls, value)
        obj.name = name
        return obj


def expr_of(value):
    return value.expr if isinstance(value, SymInt) else str(int(value))


# ---------------------------------------------------------------- the graph
NODES = []


def node(op, dims, shape, **fields):
    """Appends a node; returns its traced array."""
    NODES.append(dict(op=op, dims=[str(d) for d in dims], **fields))
    dims = [str(d) for d in dims]
    return Traced(len(NODES) - 1, tuple(SymInt(int(s), d) for s, d in zip(shape, dims)), dims)


def constant(value):
    if isinstance(value, SymInt):
        return node("size", [], (), expr=value.expr, value=float(value))
    if isinstance(value, SymFloat):
        return node("scalar", [], (), name=value.name, value=float(value))
    if isinstance(value, (bool, np.bool_)):
        raise Unsupported("a boolean constant")
    if isinstance(value, (int, float, np.integer, np.floating)):
        return node("constant", [], (), value=float(value))
    if isinstance(value, np.ndarray) and value.size == 1:
        return node("constant", [], (), value=float(value.reshape(-1)[0]))
    if isinstance(value, np.ndarray):
        raise Unsupported("a constant array", f"shape {value.shape} made without the inputs")
    raise Unsupported(f"an operand of type {type(value).__name__}")


def traced(value):
    return value if isinstance(value, Traced) else constant(value)


def broadcast(*arrays):
    """NumPy's broadcast of the operands' shapes, with each dimension's expression taken from
    an operand whose size there is not 1."""
    rank = max(len(a.shape) for a in arrays)
    shape, dims = [], []
    for i in range(rank):
        size, expr = 1, "1"
        for a in arrays:
            j = i - (rank - len(a.shape))
            if j < 0 or a.shape[j] == 1:
                continue
            if size not in (1, a.shape[j]):
                raise ValueError(f"operands could not be broadcast together with shapes "
                                 f"{[x.shape for x in arrays]}")
            size, expr = a.shape[j], a.dims[j]
        shape.append(size)
        dims.append(expr)
    return shape, dims


UNARY = {
    "negative": "negative", "absolute": "abs", "fabs": "abs", "exp": "exp", "expm1": "expm1",
    "log": "log", "log1p": "log1p", "sqrt": "sqrt", "square": "square",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tanh": "tanh", "sign": "sign",
    "floor": "floor", "ceil": "ceil", "positive": None,
}
BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "power": "power", "float_power": "power", "maximum": "maximum",
    "minimum": "minimum", "fmax": "maximum", "fmin": "minimum",
}
COMPARE = {
    "greater": "greater", "greater_equal": "greater_equal", "less": "less",
    "less_equal": "less_equal", "equal": "equal", "not_equal": "not_equal",
}
REDUCE_UFUNC = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
SCAN_UFUNC = {"add": "cumsum", "multiply": "cumprod"}


def axes_of(x, axis):
    rank = len(x.shape)
    if axis is None:
        return list(range(rank))
    out = []
    for a in (axis if isinstance(axis, (tuple, list)) else (axis,)):
        a = int(a)
        if not -rank <= a < rank:
            raise ValueError(f"axis {a} is out of bounds for an array of {rank} dimensions")
        out.append(a % rank)
    return sorted(set(out))


def reduce(func, x, axis=None, keepdims=False, **extra):
    x = traced(x)
    refuse_extra(f"np.{func}", extra, allowed=("dtype", "out"))
    axes = axes_of(x, axis)
    shape, dims = [], []
    for i, (s, d) in enumerate(zip(x.shape, x.dims)):
        if i in axes:
            if keepdims:
                shape.append(1)
                dims.append("1")
        else:
            shape.append(s)
            dims.append(d)
    return node("reduce", dims, shape, func=func, arg=x.node, axes=axes, keepdims=bool(keepdims))


def refuse_extra(what, extra, allowed=()):
    for k, v in extra.items():
        if k in allowed and (v is None or k == "dtype"):
            continue
        if k == "where" or v is not None:
            raise Unsupported(f"{what}(..., {k}=...)")


def scan(func, x, axis=None, **extra):
    x = traced(x)
    refuse_extra(f"np.{func}", extra, allowed=("dtype", "out"))
    if axis is None:
        if len(x.shape) != 1:
            raise Unsupported(f"np.{func} without an axis over {len(x.shape)} dimensions")
        axis = 0
    (a,) = axes_of(x, axis)
    return node("scan", x.dims, x.shape, func=func, arg=x.node, axis=a)


def reshape(x, shape):
    x = traced(x)
    if isinstance(shape, int):
        shape = (shape,)
    shape = list(shape)
    total = int(np.prod(x.shape))
    total_expr = " * ".join(f"({d})" for d in x.dims) or "1"
    known, known_expr = 1, []
    for s in shape:
        if int(s) != -1:
            known *= int(s)
            known_expr.append(f"({expr_of(s)})")
    out_shape, out_dims = [], []
    for s in shape:
        if int(s) == -1:
            if known == 0 or total % known:
                raise ValueError(f"cannot reshape {x.shape} into {shape}")
            out_shape.append(total // known)
            out_dims.append(f"({total_expr}) / ({' * '.join(known_expr) or '1'})")
        else:
            out_shape.append(int(s))
            out_dims.append(expr_of(s))
    if int(np.prod(out_shape)) != total:
        raise ValueError(f"cannot reshape an array of shape {x.shape} into {tuple(out_shape)}")
    if out_shape == list(x.shape):
        return x
    return node("reshape", out_dims, out_shape, arg=x.node)


def transpose(x, axes=None):
    x = traced(x)
    rank = len(x.shape)
    perm = list(range(rank))[::-1] if axes is None else [a % rank for a in axes]
    if sorted(perm) != list(range(rank)):
        raise ValueError(f"axes {axes} do not permute {rank} dimensions")
    if perm == list(range(rank)):
        return x
    return node("transpose", [x.dims[p] for p in perm], [x.shape[p] for p in perm],
                arg=x.node, perm=perm)


def expand_dims(x, axis):
    x = traced(x)
    shape, dims = list(x.shape), list(x.dims)
    for a in sorted(axes_of_new(len(shape), axis)):
        shape.insert(a, 1)
        dims.insert(a, "1")
    return node("reshape", dims, shape, arg=x.node)


def axes_of_new(rank, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_rank = rank + len(axes)
    return [int(a) % out_rank for a in axes]


def squeeze(x, axis=None):
    x = traced(x)
    drop = [i for i, s in enumerate(x.shape) if s == 1] if axis is None else axes_of(x, axis)
    if any(x.shape[i] != 1 for i in drop):
        raise ValueError("cannot squeeze a dimension whose size is not 1")
    keep = [i for i in range(len(x.shape)) if i not in drop]
    return node("reshape", [x.dims[i] for i in keep], [x.shape[i] for i in keep], arg=x.node)


def matmul(a, b):
    a, b = traced(a), traced(b)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise Unsupported("a matrix product of other than two 2-D arrays",
                          f"shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: {a.shape} and {b.shape} do not match")
    return node("matmul", [a.dims[0], b.dims[1]], [a.shape[0], b.shape[1]], args=[a.node, b.node])


def where(cond, a, b):
    cond, a, b = traced(cond), traced(a), traced(b)
    if not cond.boolean:
        raise Unsupported("np.where on a condition that is not a comparison")
    shape, dims = broadcast(cond, a, b)
    return node("select", dims, shape, args=[cond.node, a.node, b.node])


def clip(x, a_min=None, a_max=None, **extra):
    refuse_extra("np.clip", extra, allowed=("out",))
    out = traced(x)
    if a_min is not None:
        out = binary("maximum", out, a_min)
    if a_max is not None:
        out = binary("minimum", out, a_max)
    return out


def binary(func, a, b):
    a, b = traced(a), traced(b)
    shape, dims = broadcast(a, b)
    return node("binary", dims, shape, func=func, args=[a.node, b.node])


def var(x, axis=None, keepdims=False, ddof=0, **extra):
    refuse_extra("np.var", extra, allowed=("dtype", "out"))
    mean = reduce("mean", x, axis, keepdims=True)
    d = binary("subtract", x, mean)
    v = reduce("mean", binary("multiply", d, d), axis, keepdims=keepdims)
    if ddof:
        n = int(np.prod([x.shape[i] for i in axes_of(x, axis)]))
        v = binary("multiply", v, n / (n - ddof))
    return v


def norm(x, ord=None, axis=None, keepdims=False):
    x = traced(x)
    if ord in (None, 2, "fro") and (axis is not None or len(x.shape) == 1):
        return unary("sqrt", reduce("sum", binary("multiply", x, x), axis, keepdims))
    if ord == 1 and axis is not None:
        return reduce("sum", unary("abs", x), axis, keepdims)
    if ord == np.inf and axis is not None:
        return reduce("max", unary("abs", x), axis, keepdims)
    raise Unsupported("np.linalg.norm", f"ord={ord!r}, axis={axis!r}")


def unary(func, x):
    x = traced(x)
    return node("unary", x.dims, x.shape, func=func, arg=x.node)


def logaddexp(a, b):
    m = binary("maximum", a, b)
    return binary("add", m, unary("log1p", unary("exp", unary(
        "negative", unary("abs", binary("subtract", a, b))))))


FUNCTIONS = {
    np.sum: lambda x, axis=None, **k: reduce("sum", x, axis, **k),
    np.mean: lambda x, axis=None, **k: reduce("mean", x, axis, **k),
    np.max: lambda x, axis=None, **k: reduce("max", x, axis, **k),
    np.amax: lambda x, axis=None, **k: reduce("max", x, axis, **k),
    np.min: lambda x, axis=None, **k: reduce("min", x, axis, **k),
    np.amin: lambda x, axis=None, **k: reduce("min", x, axis, **k),
    np.prod: lambda x, axis=None, **k: reduce("prod", x, axis, **k),
    np.cumsum: lambda x, axis=None, **k: scan("cumsum", x, axis, **k),
    np.cumprod: lambda x, axis=None, **k: scan("cumprod", x, axis, **k),
    np.reshape: lambda x, *s, **k: reshape(x, s[0] if s else k.get("shape", k.get("newshape"))),
    np.transpose: lambda x, axes=None: transpose(x, axes),
    np.expand_dims: expand_dims,
    np.squeeze: squeeze,
    np.dot: matmul,
    np.where: where,
    np.clip: clip,
    np.var: var,
    np.std: lambda x, axis=None, keepdims=False, ddof=0, **k: unary(
        "sqrt", var(x, axis, keepdims, ddof, **k)),
    np.linalg.norm: norm,
    np.copy: lambda x, **k: x,
    np.ascontiguousarray: lambda x, **k: x,
    np.logaddexp: logaddexp,
}
if hasattr(np, "permute_dims"):
    FUNCTIONS[np.permute_dims] = lambda x, axes=None: transpose(x, axes)


class Traced(np.lib.mixins.NDArrayOperatorsMixin):
    """An array the reference computes with: its node in the graph, its shape at the task's
    sizes and each dimension's expression over the sizes. Holds no values."""

    __array_priority__ = 1000

    def __init__(self, node_id, shape, dims, boolean=False):
        self.node = node_id
        self.shape = tuple(shape)
        self.dims = list(dims)
        self.boolean = boolean

    # -- what NumPy dispatches here
    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        name = ufunc.__name__
        if kwargs.get("out") is not None:
            raise Unsupported(f"np.{name}(..., out=...)")
        kwargs.pop("out", None)
        kwargs.pop("dtype", None)
        if method == "reduce" and name in REDUCE_UFUNC:
            return reduce(REDUCE_UFUNC[name], args[0], kwargs.pop("axis", 0),
                          kwargs.pop("keepdims", False), **kwargs)
        if method == "accumulate" and name in SCAN_UFUNC:
            return scan(SCAN_UFUNC[name], args[0], kwargs.pop("axis", 0), **kwargs)
        if method != "__call__":
            raise Unsupported(f"np.{name}.{method}")
        if kwargs:
            raise Unsupported(f"np.{name}(..., {', '.join(kwargs)}=...)")
        if name == "matmul":
            return matmul(*args)
        if name in UNARY:
            if UNARY[name] is None:
                return traced(args[0])
            return unary(UNARY[name], args[0])
        if name in BINARY:
            return binary(BINARY[name], *args)
        if name in COMPARE:
            a, b = traced(args[0]), traced(args[1])
            shape, dims = broadcast(a, b)
            out = node("compare", dims, shape, func=COMPARE[name], args=[a.node, b.node])
            out.boolean = True
            return out
        raise Unsupported(f"np.{name}")

    def __array_function__(self, func, types, args, kwargs):
        implementation = FUNCTIONS.get(func)
        if implementation is None:
            module = getattr(func, "__module__", "numpy") or "numpy"
            raise Unsupported(f"{module.replace('numpy', 'np')}.{func.__name__}")
        return implementation(*args, **kwargs)

    def __array__(self, *args, **kwargs):
        raise Unsupported("converting a traced array to a NumPy array",
                          "np.asarray, np.array or a NumPy function that reads values")

    # -- attributes and methods of ndarray
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def T(self):
        return transpose(self)

    @property
    def dtype(self):
        return np.dtype(np.float64)

    def __len__(self):
        return self.shape[0]

    def __bool__(self):
        raise Unsupported("a branch on array values")

    def __iter__(self):
        raise Unsupported("iterating over an array")

    def __float__(self):
        raise Unsupported("reading an array's value")

    def astype(self, dtype, *args, **kwargs):
        if np.dtype(dtype).kind != "f":
            raise Unsupported(f"astype({np.dtype(dtype)})")
        return self

    def copy(self, *args, **kwargs):
        return self

    def reshape(self, *shape, **kwargs):
        return reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)

    def transpose(self, *axes):
        return transpose(self, (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes) or None)

    def sum(self, axis=None, keepdims=False, **k):
        return reduce("sum", self, axis, keepdims, **k)

    def mean(self, axis=None, keepdims=False, **k):
        return reduce("mean", self, axis, keepdims, **k)

    def max(self, axis=None, keepdims=False, **k):
        return reduce("max", self, axis, keepdims, **k)

    def min(self, axis=None, keepdims=False, **k):
        return reduce("min", self, axis, keepdims, **k)

    def prod(self, axis=None, keepdims=False, **k):
        return reduce("prod", self, axis, keepdims, **k)

    def cumsum(self, axis=None, **k):
        return scan("cumsum", self, axis, **k)

    def var(self, axis=None, keepdims=False, ddof=0, **k):
        return var(self, axis, keepdims, ddof, **k)

    def std(self, axis=None, keepdims=False, ddof=0, **k):
        return unary("sqrt", var(self, axis, keepdims, ddof, **k))

    def clip(self, a_min=None, a_max=None, **k):
        return clip(self, a_min, a_max, **k)

    def squeeze(self, axis=None):
        return squeeze(self, axis)

    def dot(self, other):
        return matmul(self, other)

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in index):
            at = index.index(Ellipsis)
            fill = len(self.shape) - sum(1 for i in index if i is not None and i is not Ellipsis)
            index = index[:at] + (slice(None),) * fill + index[at + 1:]
        shape, dims, k = [], [], 0
        for i in index:
            if i is None:
                shape.append(1)
                dims.append("1")
            elif isinstance(i, slice) and i == slice(None):
                if k >= len(self.shape):
                    raise IndexError("too many indices")
                shape.append(self.shape[k])
                dims.append(self.dims[k])
                k += 1
            else:
                raise Unsupported("indexing an array", f"index {i!r} (only `:`, `None` and `...`)")
        shape += self.shape[k:]
        dims += self.dims[k:]
        if shape == list(self.shape):
            return self
        return node("reshape", dims, shape, arg=self.node)

    def __setitem__(self, index, value):
        raise Unsupported("assigning into an array")


def main():
    script, workdir = sys.argv[1], sys.argv[2]
    with open(os.path.join(workdir, "meta.json")) as f:
        meta = json.load(f)
    try:
        spec = importlib.util.spec_from_file_location("kf_task_reference", script)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        spec.loader.exec_module(module)
    except BaseException:
        fail(3, "loading " + script + " failed:\n" + traceback.format_exc(limit=-3))
    function = getattr(module, "reference", None)
    if not callable(function):
        fail(3, f"{script} defines no function reference(inputs, sizes, scalars)")
    sizes = {k: SymInt(int(v), k) for k, v in meta["sizes"].items()}
    scalars = {k: SymFloat(float(v), k) for k, v in meta["scalars"].items()}
    inputs = {}
    for name, info in meta["inputs"].items():
        if info.get("dtype", "f32") != "f32":
            inputs[name] = None
            continue
        inputs[name] = node("input", info["dims"], info["shape"], name=name)
    result = {"nodes": NODES, "outputs": {}}
    try:
        if any(v is None for v in inputs.values()):
            names = [k for k, v in inputs.items() if v is None]
            raise Unsupported("an input that is not f32", ", ".join(names))
        out = function(inputs, sizes, scalars)
        if not isinstance(out, dict):
            raise Unsupported(f"reference() returning {type(out).__name__}, not a dict")
        for name, value in out.items():
            if not isinstance(value, Traced):
                raise Unsupported("an output that does not depend on the inputs", str(name))
            result["outputs"][str(name)] = value.node
    except Unsupported as e:
        frame = traceback.extract_tb(e.__traceback__)
        where = next((f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frame)
                      if os.path.abspath(f.filename) == os.path.abspath(script)), "")
        detail = "; ".join(x for x in (e.detail, f"at {where}" if where else "") if x)
        result = {"unsupported": e.construct, "detail": detail}
    except BaseException:
        fail(3, "reference() raised while traced:\n" + traceback.format_exc(limit=-3))
    with open(os.path.join(workdir, "graph.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
