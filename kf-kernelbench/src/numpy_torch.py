"""A small stand-in for PyTorch on NumPy, for KernelBench problems when torch is not installed
(written by `kf task import-kernelbench` beside the reference it serves).

It runs a problem's `Model` unchanged: `import torch` / `torch.nn` / `torch.nn.functional` in the
problem resolve to this module while it loads. Tensors compute in float64 NumPy (the reference
is rounded to the task's dtype once, at the end) and record the operations they went through, so
that the same run also yields the operation sequence from which `opencl_kernel` writes the naive
kernel (one work-item per output element). Sizes are `SymInt`s: ints that remember their
expression over the task's sizes, so every shape, the generated kernel's index arithmetic
included, is an expression over the sizes.

What is implemented is what KernelBench's level-2 problems use: nn.Linear, nn.Conv1d/2d/3d,
nn.ConvTranspose1d/2d/3d (groups 1), batch/group/layer/instance norm (training-mode statistics,
as KernelBench leaves models in training mode), max/avg pooling, element-wise activations,
reductions, softmax and reshapes. Anything else raises `Unsupported` naming it. Parameters are
initialised as PyTorch does: nn.Linear and convolutions kaiming-uniform, which for both weight
and bias is uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)); norms' weights ones and biases zeros;
nn.Parameter(torch.randn(...) * c) normal(0, |c|).
"""
import contextlib
import importlib.util
import math
import re
import sys
import types

import numpy as np


class Unsupported(Exception):
    """A construct this stand-in does not implement; the message names it."""


# Pairs of size expressions (multiple, divisor) that the operations run so far need divisible;
# the size rule keeps them so at every scale it tries.
DIVISIBLE = []
# Pairs of size expressions that the operations run so far need equal (a broadcast of a
# (batch, n) tensor against a (batch,) one works only where n equals batch): the task's
# other input sets change them together.
EQUAL = []


def require_equal(what, a, b):
    """Records that sizes `a` and `b` must stay equal; raises Unsupported where they differ."""
    pair = (expr_of(a), expr_of(b))
    if int(a) != int(b):
        raise Unsupported(f"{what} of sizes that differ ({pair[0]} = {int(a)}, {pair[1]} = {int(b)})")
    if pair[0] != pair[1] and pair not in EQUAL and pair[::-1] not in EQUAL:
        EQUAL.append(pair)


def require_divisible(what, multiple, divisor):
    """Records that `multiple` must stay a multiple of `divisor`; raises Indivisible where it
    is not."""
    pair = (expr_of(multiple), expr_of(divisor))
    if pair not in DIVISIBLE:
        DIVISIBLE.append(pair)
    if int(multiple) % int(divisor) != 0:
        raise Indivisible(what, pair[0], pair[1], (int(multiple), int(divisor)))


class Indivisible(Exception):
    """Sizes an operation needs divisible are not (channels that do not split into their
    groups): `multiple` must be a multiple of `divisor`, both expressions over the sizes. The
    size rule keeps such pairs divisible once it has met them."""

    def __init__(self, what, multiple, divisor, values):
        super().__init__(f"{what}: {multiple} = {values[0]} is not a multiple of {divisor} = {values[1]}")
        self.multiple = multiple
        self.divisor = divisor


# ---------------------------------------------------------------- symbolic sizes
class SymInt(int):
    """An int that remembers its expression over the task's sizes (kf's syntax: `/` on
    integers is integer division)."""

    def __new__(cls, value, expr=None):
        obj = int.__new__(cls, value)
        obj.expr = expr if expr is not None else str(int(value))
        return obj

    def _op(self, other, sym, fn, reverse=False):
        if isinstance(other, float):
            return fn(int(self), other) if not reverse else fn(other, int(self))
        if not isinstance(other, int):
            return NotImplemented
        a, b = expr_of(self), expr_of(other)
        value = fn(int(self), int(other)) if not reverse else fn(int(other), int(self))
        text = f"({a} {sym} {b})" if not reverse else f"({b} {sym} {a})"
        return SymInt(value, text)

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

    def __neg__(self):
        return SymInt(-int(self), f"(0 - {self.expr})")


def expr_of(value):
    return value.expr if isinstance(value, SymInt) else str(int(value))


def sym(value):
    return value if isinstance(value, SymInt) else SymInt(int(value))


def prod(dims):
    out = SymInt(1)
    for d in dims:
        out = out * sym(d) if int(out) != 1 or out.expr != "1" else sym(d)
    return out


# ---------------------------------------------------------------- the trace
TRACE = []  # nodes: {"op", "inputs", "attrs", "shape"}
LEAVES = {}  # buffer name -> node id
_rng = np.random.default_rng(0)


def record(op, inputs, shape, **attrs):
    TRACE.append({"op": op, "inputs": [t.node for t in inputs], "attrs": attrs, "shape": list(shape)})
    return len(TRACE) - 1


class Tensor:
    """A float64 array, its symbolic shape, the trace node that computes it, and (for tensors
    made by factories, before they become parameters) its initial distribution."""

    def __init__(self, data, shape, node=None, init=None):
        self.data = np.asarray(data, dtype=np.float64)
        self.sym_shape = tuple(sym(d) for d in shape)
        self.node = node
        self.init = init
        # Indices (argmax/argmin): the task's output is i32 and the kernel stores ints.
        self.integer = False
        if tuple(int(d) for d in self.sym_shape) != self.data.shape:
            raise AssertionError(f"shape {self.sym_shape} vs data {self.data.shape}")

    # shape queries ------------------------------------------------
    @property
    def shape(self):
        return self.sym_shape

    def size(self, dim=None):
        return self.sym_shape if dim is None else self.sym_shape[dim]

    def dim(self):
        return len(self.sym_shape)

    @property
    def ndim(self):
        return len(self.sym_shape)

    @property
    def T(self):
        return permute(self, list(range(self.ndim))[::-1])

    @property
    def device(self):
        return "cpu"

    @property
    def dtype(self):
        return float32

    def to(self, *args, **kwargs):
        return self

    def contiguous(self):
        return self

    def float(self):
        return self

    # get_inputs() converts torch.randint's tensors; a stand-in tensor keeps its values.
    # (Methods, not `long = int = bool = float`: that would shadow the builtins in the
    # class body.)
    def long(self):
        return self

    def int(self):
        return self

    def bool(self):
        return self

    def detach(self):
        return self

    def clone(self, *args, **kwargs):
        # The stand-in's tensors are never written in place, so a copy is the same trace node.
        return Tensor(self.data.copy(), self.sym_shape, self.node, self.init)

    def __getattr__(self, name):
        # A torch method the stand-in lacks stops the import with its name (not an
        # AttributeError that reads like a bug in the problem).
        if name.startswith("__"):
            raise AttributeError(name)
        raise Unsupported(f"Tensor.{name}")

    def numpy(self):
        return self.data

    # arithmetic ---------------------------------------------------
    def __add__(self, o):
        return binary("add", self, o)

    def __radd__(self, o):
        return binary("add", o, self)

    def __sub__(self, o):
        return binary("sub", self, o)

    def __rsub__(self, o):
        return binary("sub", o, self)

    def __mul__(self, o):
        if self.node is None and self.init is not None and isinstance(o, (int, float)):
            return Tensor(self.data * o, self.sym_shape, init=scaled_init(self.init, o))
        return binary("mul", self, o)

    def __rmul__(self, o):
        return self.__mul__(o)

    def __truediv__(self, o):
        return binary("div", self, o)

    def __rtruediv__(self, o):
        return binary("div", o, self)

    def __neg__(self):
        return unary("neg", self)

    def __pow__(self, o):
        if not isinstance(o, (int, float)):
            raise Unsupported("tensor ** tensor")
        return unary("pow", self, exponent=float(o))

    def __getitem__(self, index):
        raise Unsupported("tensor indexing")

    # methods ------------------------------------------------------
    def view(self, *shape):
        return reshape(self, *shape)

    reshape = view

    def flatten(self, start_dim=0, end_dim=-1):
        return flatten(self, start_dim, end_dim)

    def squeeze(self, dim=None):
        return squeeze(self, dim)

    def unsqueeze(self, dim):
        return unsqueeze(self, dim)

    def permute(self, *dims):
        return permute(self, list(dims[0]) if len(dims) == 1 and isinstance(dims[0], (list, tuple)) else list(dims))

    def transpose(self, a, b):
        return transpose(self, a, b)

    def sum(self, dim=None, keepdim=False):
        return reduce("sum", self, dim, keepdim)

    def mean(self, dim=None, keepdim=False):
        return reduce("mean", self, dim, keepdim)

    def max(self, dim=None, keepdim=False):
        return max_(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        return min_(self, dim, keepdim)

    def amax(self, dim=None, keepdim=False):
        return reduce("max", self, dim, keepdim)

    def logsumexp(self, dim, keepdim=False):
        return reduce("logsumexp", self, dim, keepdim)

    def softmax(self, dim):
        return softmax(self, dim)

    def clamp(self, min=None, max=None):
        return clamp(self, min, max)

    def clamp_min(self, m):
        return clamp(self, m, None)

    def clamp_max(self, m):
        return clamp(self, None, m)

    def relu(self):
        return relu(self)

    def sigmoid(self):
        return sigmoid(self)

    def tanh(self):
        return tanh(self)

    def exp(self):
        return exp(self)

    def sqrt(self):
        return sqrt(self)

    def rsqrt(self):
        return rsqrt(self)

    def pow(self, exponent):
        return t_pow(self, exponent)

    def norm(self, p="fro", dim=None, keepdim=False):
        return norm(self, p, dim, keepdim)

    def cumsum(self, dim):
        return cumsum(self, dim)

    def cumprod(self, dim):
        return cumprod(self, dim)

    def triu(self, diagonal=0):
        return triu(self, diagonal)

    def tril(self, diagonal=0):
        return tril(self, diagonal)

    def flip(self, *dims):
        return flip(self, dims[0] if len(dims) == 1 else dims)

    def abs(self):
        return t_abs(self)

    def argmax(self, dim=None, keepdim=False):
        return argmax(self, dim, keepdim)

    def argmin(self, dim=None, keepdim=False):
        return argmin(self, dim, keepdim)

    def narrow(self, dim, start, length):
        return narrow(self, dim, start, length)

    def select(self, dim, index):
        return select(self, dim, index)


class ReductionResult(tuple):
    """torch.max(x, dim)'s (values, indices); only the values are supported."""

    @property
    def values(self):
        return self[0]


def scaled_init(init, c):
    kind, a, b = init
    if kind == "normal":
        return ("normal", a * c, b * abs(c))
    if kind == "uniform":
        lo, hi = sorted((a * c, b * c))
        return ("uniform", lo, hi)
    return ("normal", 0.0, 1.0)


def to_tensor(value, like):
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (int, float)):
        return None
    raise Unsupported(f"operand of type {type(value).__name__}")


def broadcast(a, b):
    ra, rb = len(a), len(b)
    out = []
    for i in range(max(ra, rb)):
        da = a[ra - max(ra, rb) + i] if ra - max(ra, rb) + i >= 0 else None
        db = b[rb - max(ra, rb) + i] if rb - max(ra, rb) + i >= 0 else None
        if da is None or int(da) == 1 and db is not None:
            out.append(db)
        else:
            if db is not None and int(db) != 1:
                require_equal("a broadcast", da, db)
            out.append(da)
    return out


def unary(op, x, **attrs):
    fn = UNARY_NUMPY[op]
    data = fn(x.data, **attrs)
    return Tensor(data, x.sym_shape, record(op, [x], x.sym_shape, **attrs))


# The element-wise operations of two operands (a tensor and a tensor or number): NumPy's, and
# the C expression of operands `{a}` and `{b}` every generated kernel writes.
BINARY_NUMPY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
}
BINARY_C = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "maximum": "fmax({a}, {b})", "minimum": "fmin({a}, {b})",
}


def binary_c(op, attrs, operands, scalar):
    """The C expression of binary node `op` over `operands` (one, with the node's number
    `scalar` on the side `attrs` records, or two)."""
    if len(operands) == 1:
        pair = (scalar, operands[0]) if attrs["scalar_first"] else (operands[0], scalar)
    else:
        pair = operands
    return BINARY_C[op].format(a=pair[0], b=pair[1])


def binary(op, a, b):
    ta, tb = to_tensor(a, b), to_tensor(b, a)
    va = ta.data if ta is not None else float(a)
    vb = tb.data if tb is not None else float(b)
    data = BINARY_NUMPY[op](va, vb)
    if ta is None and tb is None:
        raise Unsupported("scalar arithmetic outside tensors")
    # A size (`x / x.size(1)`) stays an expression, so the kernel follows the task's sizes.
    if ta is None:
        return Tensor(data, tb.sym_shape, record(op, [tb], tb.sym_shape, scalar=float(a), scalar_first=True, scalar_expr=size_expr(a)))
    if tb is None:
        return Tensor(data, ta.sym_shape, record(op, [ta], ta.sym_shape, scalar=float(b), scalar_first=False, scalar_expr=size_expr(b)))
    shape = broadcast(ta.sym_shape, tb.sym_shape)
    return Tensor(data, shape, record(op, [ta, tb], shape))


def size_expr(value):
    """A size's expression (a SymInt that is not a constant), else None."""
    if isinstance(value, SymInt) and not value.expr.lstrip("-").isdigit():
        return value.expr
    return None


def scalar_c(attrs):
    """The C operand of a scalar operation: the size expression as a float, or the literal."""
    if attrs.get("scalar_expr"):
        return f"((float)({attrs['scalar_expr']}))"
    return c_float(attrs["scalar"])


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softplus(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(np.minimum(x * beta, threshold))) / beta)


UNARY_NUMPY = {
    "neg": lambda x: -x,
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "abs": np.abs,
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "softplus": lambda x, beta=1.0, threshold=20.0: _softplus(x, beta, threshold),
    "hardswish": lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "hardsigmoid": lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "leaky_relu": lambda x, slope=0.01: np.where(x >= 0, x, x * slope),
    "elu": lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x) - 1.0)),
    "clamp": lambda x, lo=None, hi=None: np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi),
    "pow": lambda x, exponent=1.0: np.power(x, exponent),
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
}

# C for each unary operation over `v` (float); attributes are literals.
UNARY_C = {
    "neg": "-v",
    "relu": "fmax(v, 0.0f)",
    "sigmoid": "1.0f / (1.0f + exp(-v))",
    "tanh": "tanh(v)",
    "exp": "exp(v)",
    "log": "log(v)",
    "abs": "fabs(v)",
    "gelu": "0.5f * v * (1.0f + erf(v * 0.70710678118654752f))",
    "gelu_tanh": "0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)))",
    "silu": "v / (1.0f + exp(-v))",
    "mish": "v * tanh(v > 20.0f ? v : log1p(exp(v)))",
    "softplus": "(v * {beta} > {threshold} ? v : log1p(exp(v * {beta})) / {beta})",
    "hardswish": "v * fmin(fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f",
    "hardsigmoid": "fmin(fmax(v + 3.0f, 0.0f), 6.0f) / 6.0f",
    "leaky_relu": "(v >= 0.0f ? v : v * {slope})",
    "elu": "(v > 0.0f ? v : {alpha} * (exp(v) - 1.0f))",
    "clamp": "fmin(fmax(v, {lo}), {hi})",
    "pow": "pow(v, {exponent})",
    "sqrt": "sqrt(v)",
    "rsqrt": "rsqrt(v)",
}


def norm_dim(dim, rank):
    return dim + rank if dim < 0 else dim


def dims_list(dim, rank):
    if dim is None:
        return list(range(rank))
    if isinstance(dim, (list, tuple)):
        return sorted(norm_dim(int(d), rank) for d in dim)
    return [norm_dim(int(dim), rank)]


def reduce(kind, x, dim, keepdim):
    dims = dims_list(dim, x.ndim)
    axis = tuple(dims)
    d = x.data
    if kind == "sum":
        data = d.sum(axis=axis, keepdims=True)
    elif kind == "mean":
        data = d.mean(axis=axis, keepdims=True)
    elif kind == "max":
        data = d.max(axis=axis, keepdims=True)
    elif kind == "min":
        data = d.min(axis=axis, keepdims=True)
    elif kind == "logsumexp":
        m = d.max(axis=axis, keepdims=True)
        data = m + np.log(np.exp(d - m).sum(axis=axis, keepdims=True))
    else:
        raise Unsupported(f"reduction {kind}")
    kept = [SymInt(1) if i in dims else s for i, s in enumerate(x.sym_shape)]
    t = Tensor(data, kept, record("reduce", [x], kept, kind=kind, dims=dims))
    return squeeze_dims(t, dims) if not keepdim else t


def max_(x, dim=None, keepdim=False, other=None):
    if isinstance(dim, Tensor):
        return binary("maximum", x, dim)
    if dim is None:
        return reduce("max", x, None, False)
    return ReductionResult((reduce("max", x, dim, keepdim), None))


def min_(x, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return binary("minimum", x, dim)
    if dim is None:
        return reduce("min", x, None, False)
    return ReductionResult((reduce("min", x, dim, keepdim), None))


def squeeze_dims(x, dims):
    shape = [s for i, s in enumerate(x.sym_shape) if i not in dims]
    return Tensor(x.data.reshape([int(s) for s in shape]), shape, record("reshape", [x], shape))


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    total = prod(x.sym_shape)
    known = [s for s in shape if int(s) != -1]
    if len(known) != len(shape):
        rest = total // prod(known)
        shape = [rest if int(s) == -1 else s for s in shape]
    shape = [sym(s) for s in shape]
    return Tensor(x.data.reshape([int(s) for s in shape]), shape, record("reshape", [x], shape))


def flatten(x, start_dim=1, end_dim=-1):
    s, e = norm_dim(start_dim, x.ndim), norm_dim(end_dim, x.ndim)
    shape = list(x.sym_shape[:s]) + [prod(x.sym_shape[s : e + 1])] + list(x.sym_shape[e + 1 :])
    return reshape(x, shape)


def squeeze(x, dim=None):
    dims = [i for i, s in enumerate(x.sym_shape) if int(s) == 1] if dim is None else [norm_dim(dim, x.ndim)]
    dims = [d for d in dims if int(x.sym_shape[d]) == 1]
    return squeeze_dims(x, dims)


def unsqueeze(x, dim):
    dim = norm_dim(dim, x.ndim + 1)
    shape = list(x.sym_shape[:dim]) + [SymInt(1)] + list(x.sym_shape[dim:])
    return reshape(x, shape)


def permute(x, dims):
    dims = [norm_dim(d, x.ndim) for d in dims]
    shape = [x.sym_shape[d] for d in dims]
    return Tensor(np.transpose(x.data, dims), shape, record("permute", [x], shape, dims=dims))


def transpose(x, a, b):
    dims = list(range(x.ndim))
    a, b = norm_dim(a, x.ndim), norm_dim(b, x.ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, dims)


def matmul(a, b):
    if b.ndim == 2:
        shape = list(a.sym_shape[:-1]) + [b.sym_shape[1]]
    elif a.ndim == b.ndim:
        shape = list(a.sym_shape[:-1]) + [b.sym_shape[-1]]
    else:
        raise Unsupported("matmul of these ranks")
    return Tensor(np.matmul(a.data, b.data), shape, record("matmul", [a, b], shape))


def einsum(equation, *operands):
    """torch.einsum of two operands as the stand-in's own operations: each operand permuted to
    (batch, free, contracted) order and flattened to a matrix per batch, one matmul, then the
    output's shape and order. Letters are shared batch indices (in both operands and the
    output), free (in one operand and the output) or contracted (in both, not the output)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if len(operands) != 2 or "->" not in equation or "." in equation:
        raise Unsupported("einsum other than two operands with an explicit output")
    a, b = operands
    inputs, out = equation.replace(" ", "").split("->")
    la, lb = inputs.split(",")
    if len(set(la)) != len(la) or len(set(lb)) != len(lb) or len(la) != a.ndim or len(lb) != b.ndim:
        raise Unsupported(f"einsum {equation!r} (a repeated index, or ranks that do not match)")
    batch = [c for c in out if c in la and c in lb]
    free_a = [c for c in out if c in la and c not in lb]
    free_b = [c for c in out if c in lb and c not in la]
    contracted = [c for c in la if c in lb and c not in out]
    if any(c not in out and c not in lb for c in la) or any(c not in out and c not in la for c in lb):
        raise Unsupported(f"einsum {equation!r} (an index summed within one operand)")
    size = {c: a.sym_shape[la.index(c)] for c in la}
    size.update({c: b.sym_shape[lb.index(c)] for c in lb if c not in size})
    matrix = lambda letters: prod([size[c] for c in letters]) if letters else SymInt(1)
    left = reshape(permute(a, [la.index(c) for c in batch + free_a + contracted]),
                   [size[c] for c in batch] + [matrix(free_a), matrix(contracted)])
    right = reshape(permute(b, [lb.index(c) for c in batch + contracted + free_b]),
                    [size[c] for c in batch] + [matrix(contracted), matrix(free_b)])
    product = matmul(left, right)
    order = batch + free_a + free_b
    result = reshape(product, [size[c] for c in order])
    return permute(result, [order.index(c) for c in out])


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(Q Kᵀ / √E) V as the stand-in's own operations; the default scale follows the
    task's sizes (√E of the embedding size, not the traced number)."""
    if attn_mask is not None or dropout_p or is_causal or enable_gqa:
        raise Unsupported("torch.nn.functional.scaled_dot_product_attention with a mask, dropout, "
                          "causality or grouped heads")
    scores = matmul(query, transpose(key, -2, -1))
    if scale is None:
        e = sym(query.sym_shape[-1])
        root = math.sqrt(int(e))
        expr = f"sqrt((float)({e.expr}))" if size_expr(e) else None
        node = record("div", [scores], scores.sym_shape, scalar=root, scalar_first=False, scalar_expr=expr)
        scores = Tensor(scores.data / root, scores.sym_shape, node)
    else:
        scores = scores * float(scale)
    return matmul(softmax(scores, -1), value)


def linear(x, weight, bias=None):
    y = matmul(x, weight.T)
    return y + bias if bias is not None else y


def softmax(x, dim=-1, dtype=None):
    dim = norm_dim(dim, x.ndim)
    m = x.data.max(axis=dim, keepdims=True)
    e = np.exp(x.data - m)
    return Tensor(e / e.sum(axis=dim, keepdims=True), x.sym_shape, record("softmax", [x], x.sym_shape, dim=dim, log=False))


def log_softmax(x, dim=-1, dtype=None):
    dim = norm_dim(dim, x.ndim)
    m = x.data.max(axis=dim, keepdims=True)
    lse = m + np.log(np.exp(x.data - m).sum(axis=dim, keepdims=True))
    return Tensor(x.data - lse, x.sym_shape, record("softmax", [x], x.sym_shape, dim=dim, log=True))


def clamp(x, min=None, max=None):
    lo = None if min is None else float(min)
    hi = None if max is None else float(max)
    return unary("clamp", x, lo=lo, hi=hi)


def conv(x, weight, bias, stride, padding, dilation, groups, transposed=False, output_padding=0):
    nd = x.ndim - 2
    tup = lambda v: [int(i) for i in v] if isinstance(v, (list, tuple)) else [int(v)] * nd
    stride, padding, dilation, output_padding = tup(stride), tup(padding), tup(dilation), tup(output_padding)
    if isinstance(padding, str):
        raise Unsupported("string padding")
    n, cin = x.sym_shape[0], x.sym_shape[1]
    ks = [weight.sym_shape[2 + i] for i in range(nd)]
    spatial_in = x.sym_shape[2:]
    if int(groups) != 1:
        require_divisible("a grouped convolution's input channels by its groups", cin, groups)
        if not transposed:
            require_divisible("a grouped convolution's output channels by its groups", weight.sym_shape[0], groups)
    if transposed:
        # Weights [in, out / groups, k...].
        cout = weight.sym_shape[1] * int(groups)
        spatial = [
            (s - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ks[i] - 1) + output_padding[i] + 1
            for i, s in enumerate(spatial_in)
        ]
    else:
        cout = weight.sym_shape[0]
        spatial = [
            (s + 2 * padding[i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i, s in enumerate(spatial_in)
        ]
    shape = [n, cout] + spatial
    data = conv_numpy(x.data, weight.data, stride, padding, dilation, int(groups), transposed, [int(s) for s in spatial])
    if bias is not None:
        data = data + bias.data.reshape([1, -1] + [1] * nd)
    inputs = [x, weight] + ([bias] if bias is not None else [])
    # The group count as an expression: a depthwise convolution's follows its channels.
    attrs = dict(stride=stride, padding=padding, dilation=dilation, groups=expr_of(groups), transposed=transposed, bias=bias is not None)
    return Tensor(data, shape, record("conv", inputs, shape, **attrs))


def conv_numpy(x, w, stride, padding, dilation, groups, transposed, spatial):
    """Direct convolution by kernel offsets (einsum per offset), any number of spatial dims."""
    nd = x.ndim - 2
    n = x.shape[0]
    ks = w.shape[2:]
    if transposed:
        cout_g = w.shape[1]
        cin_g = x.shape[1] // groups
        out = np.zeros([n, cout_g * groups] + spatial)
        for g in range(groups):
            xs = x[:, g * cin_g : (g + 1) * cin_g]
            ws = w[g * cin_g : (g + 1) * cin_g]
            og = slice(g * cout_g, (g + 1) * cout_g)
            for k in np.ndindex(*ks):
                for idx in np.ndindex(*x.shape[2:]):
                    pos = [idx[i] * stride[i] - padding[i] + k[i] * dilation[i] for i in range(nd)]
                    if all(0 <= pos[i] < spatial[i] for i in range(nd)):
                        out[(slice(None), og) + tuple(pos)] += xs[(slice(None), slice(None)) + idx] @ ws[(slice(None), slice(None)) + k]
        return out
    cout = w.shape[0]
    cin_g = w.shape[1]
    cout_g = cout // groups
    pad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out = np.zeros([n, cout] + spatial)
    for g in range(groups):
        xs = pad[:, g * cin_g : (g + 1) * cin_g]
        ws = w[g * cout_g : (g + 1) * cout_g]
        for k in np.ndindex(*ks):
            sl = tuple(
                slice(k[i] * dilation[i], k[i] * dilation[i] + (spatial[i] - 1) * stride[i] + 1, stride[i])
                for i in range(nd)
            )
            patch = xs[(slice(None), slice(None)) + sl]
            out[:, g * cout_g : (g + 1) * cout_g] += np.einsum("nc...,oc->no...", patch, ws[(slice(None), slice(None)) + k])
    return out


def pool(kind, x, kernel_size, stride=None, padding=0, nd=2, dilation=1, ceil_mode=False,
         return_indices=False, count_include_pad=True, divisor_override=None):
    """Max or average pooling as torch computes it: windows of `kernel_size` elements spaced
    `dilation` apart, moved by `stride`, over the input padded by `padding` on each side (with
    -inf for max; with zeros for average, divided by the whole window unless
    `count_include_pad` is false, then by the elements inside the input)."""
    # The window's sizes stay symbolic where they are the task's sizes (`kernel_size`), so the
    # output shape and the generated kernel follow them at every input set.
    tup = lambda v: [sym(i) for i in v] if isinstance(v, (list, tuple)) else [sym(v)] * nd
    ks = tup(kernel_size)
    st = tup(stride if stride is not None and stride != [] else kernel_size)
    pad = tup(padding)
    dil = tup(dilation)
    if ceil_mode:
        raise Unsupported("pooling with ceil_mode=True")
    if return_indices:
        raise Unsupported("pooling with return_indices=True")
    if divisor_override is not None:
        raise Unsupported("average pooling with divisor_override")
    lead = x.ndim - nd
    spatial = [(s + 2 * pad[i] - dil[i] * (ks[i] - 1) - 1) // st[i] + 1 for i, s in enumerate(x.sym_shape[lead:])]
    shape = list(x.sym_shape[:lead]) + spatial
    sp = [int(s) for s in spatial]
    ks_n, st_n, pad_n, dil_n = ([int(v) for v in values] for values in (ks, st, pad, dil))
    fill = -np.inf if kind == "max" else 0.0
    widths = [(0, 0)] * lead + [(p, p) for p in pad_n]
    padded = np.pad(x.data, widths, constant_values=fill)
    inside = np.pad(np.ones(x.data.shape[lead:]), [(p, p) for p in pad_n])
    acc, count = None, None
    for k in np.ndindex(*ks_n):
        sl = tuple(slice(k[i] * dil_n[i], k[i] * dil_n[i] + (sp[i] - 1) * st_n[i] + 1, st_n[i]) for i in range(nd))
        part = padded[(Ellipsis,) + sl]
        acc = part if acc is None else (np.maximum(acc, part) if kind == "max" else acc + part)
        count = inside[sl] if count is None else count + inside[sl]
    if kind == "max":
        data = acc
    else:
        data = acc / (float(np.prod(ks_n)) if count_include_pad else count)
    attrs = dict(kind=kind, nd=nd, **{name: [expr_of(v) for v in values] for name, values in
                                      (("kernel", ks), ("stride", st), ("padding", pad), ("dilation", dil))})
    attrs["count_include_pad"] = bool(count_include_pad)
    return Tensor(data, shape, record("pool", [x], shape, **attrs))


def normalize(kind, x, weight, bias, eps, groups=1, normalized=1):
    """Training-mode normalisation: batch (per channel over batch and space), group (per
    sample and channel group), instance (per sample and channel), layer (over the last
    `normalized` dims)."""
    d = x.data
    rank = x.ndim
    if kind == "batch":
        axes = tuple(i for i in range(rank) if i != 1)
        mean = d.mean(axis=axes, keepdims=True)
        var = d.var(axis=axes, keepdims=True)
        y = (d - mean) / np.sqrt(var + eps)
    elif kind == "instance":
        axes = tuple(range(2, rank))
        y = (d - d.mean(axis=axes, keepdims=True)) / np.sqrt(d.var(axis=axes, keepdims=True) + eps)
    elif kind == "group":
        shp = d.shape
        require_divisible("group norm's channels by its groups", x.sym_shape[1], groups)
        g = d.reshape(shp[0], groups, -1)
        y = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)).reshape(shp)
    elif kind == "layer":
        if weight is not None:
            # torch refuses a normalised shape other than the input's last dimensions (level
            # 2's problem 3 normalises the last dimension by a shape of out_channels).
            for w, s in zip(weight.sym_shape, x.sym_shape[rank - normalized :]):
                require_equal("a layer norm's shape and its input's last dimensions", w, s)
        axes = tuple(range(rank - normalized, rank))
        y = (d - d.mean(axis=axes, keepdims=True)) / np.sqrt(d.var(axis=axes, keepdims=True) + eps)
    else:
        raise Unsupported(f"{kind} norm")
    affine_shape = [1, -1] + [1] * (rank - 2) if kind != "layer" else list(d.shape[rank - normalized :])
    if weight is not None:
        y = y * weight.data.reshape(affine_shape)
    if bias is not None:
        y = y + bias.data.reshape(affine_shape)
    inputs = [x] + [t for t in (weight, bias) if t is not None]
    # The group count as an expression over the sizes (num_groups is often one): the generated
    # kernel must group the channels as the task at other sizes does.
    attrs = dict(kind=kind, eps=float(eps), groups=expr_of(groups), group_count=int(groups), normalized=int(normalized), weight=weight is not None, bias=bias is not None)
    return Tensor(y, x.sym_shape, record("norm", inputs, x.sym_shape, **attrs))


# ---------------------------------------------------------------- factories and dtypes
float32 = "float32"
float16 = "float16"
int64 = int32 = "int"


def _shape_args(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return tuple(args[0])
    return tuple(args)


def _factory(init, fill):
    def make(*shape, **kwargs):
        shape = _shape_args(shape)
        return Tensor(fill([int(s) for s in shape]), shape, init=init)

    return make


randn = _factory(("normal", 0.0, 1.0), lambda s: _rng.standard_normal(s))
rand = _factory(("uniform", 0.0, 1.0), lambda s: _rng.random(s))
def randint(*args, size=None, **kwargs):
    """torch.randint(high, size) or (low, high, size): integers in [low, high), held as floats
    like every stand-in tensor (get_inputs() builds inputs with it; only their shapes are read)."""
    if size is None:
        *bounds, size = args
    else:
        bounds = list(args)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds[:2]
    shape = _shape_args((size,))
    data = _rng.integers(int(low), int(high), [int(s) for s in shape]).astype(np.float64)
    return Tensor(data, shape, init=("uniform", float(low), float(high) - 1.0))


zeros = _factory(("zeros", 0.0, 0.0), np.zeros)
ones = _factory(("ones", 1.0, 1.0), np.ones)
empty = zeros


class Constant(float):
    """`torch.tensor(number)`: a 0-d constant, which operations take as the number it holds
    (so it reaches the generated kernel as a literal, as Python numbers do)."""

    device = "cpu"
    dtype = "float32"
    shape = ()

    def to(self, *args, **kwargs):
        return self

    def item(self):
        return float(self)

    def dim(self):
        return 0


def tensor(value, **kwargs):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Constant(value)
    raise Unsupported("torch.tensor of a list or array")


def manual_seed(seed):
    return None


@contextlib.contextmanager
def no_grad():
    yield


# ---------------------------------------------------------------- torch functions
def relu(x):
    return unary("relu", x)


def sigmoid(x):
    return unary("sigmoid", x)


def tanh(x):
    return unary("tanh", x)


def exp(x):
    return unary("exp", x)


def sqrt(x):
    return unary("sqrt", x)


def rsqrt(x):
    return unary("rsqrt", x)


def t_pow(x, exponent):  # torch.pow
    if not isinstance(x, Tensor) or isinstance(exponent, Tensor):
        raise Unsupported("torch.pow with a tensor exponent")
    return unary("pow", x, exponent=float(exponent))


def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the Frobenius / 2-norm and the 1-norm, over `dim` or every element."""
    if p in ("fro", 2, 2.0, None):
        return sqrt(reduce("sum", x * x, dim, keepdim))
    if p in (1, 1.0):
        return reduce("sum", t_abs(x), dim, keepdim)
    raise Unsupported(f"torch.norm with p={p!r}")


def _scan(kind, x, dim):
    if not isinstance(x, Tensor):
        raise Unsupported(f"torch.{kind} of a {type(x).__name__}")
    d = norm_dim(int(dim), x.ndim)
    data = np.cumsum(x.data, axis=d) if kind == "cumsum" else np.cumprod(x.data, axis=d)
    return Tensor(data, x.sym_shape, record("scan", [x], x.sym_shape, kind=kind, dim=d))


def cumsum(x, dim, dtype=None):
    return _scan("cumsum", x, dim)


def cumprod(x, dim, dtype=None):
    return _scan("cumprod", x, dim)


def _triangle(x, diagonal, upper):
    if x.ndim < 2:
        raise Unsupported("triu/tril of a tensor of fewer than two dimensions")
    data = np.triu(x.data, k=int(diagonal)) if upper else np.tril(x.data, k=int(diagonal))
    return Tensor(data, x.sym_shape, record("triangle", [x], x.sym_shape, upper=upper, diagonal=int(diagonal)))


def triu(x, diagonal=0):
    """The upper triangle of the last two dimensions: elements with column − row ≥ diagonal."""
    return _triangle(x, diagonal, True)


def tril(x, diagonal=0):
    """The lower triangle of the last two dimensions: elements with column − row ≤ diagonal."""
    return _triangle(x, diagonal, False)


def flip(x, dims):
    dims = sorted(norm_dim(int(d), x.ndim) for d in (dims if isinstance(dims, (list, tuple)) else (dims,)))
    return Tensor(np.flip(x.data, axis=tuple(dims)), x.sym_shape, record("flip", [x], x.sym_shape, dims=dims))


def log(x):
    return unary("log", x)


def t_abs(x):  # noqa: A001 - torch.abs
    return unary("abs", x)


def gelu(x, approximate="none"):
    return unary("gelu_tanh" if approximate == "tanh" else "gelu", x)


def silu(x):
    return unary("silu", x)


def mish(x):
    return unary("mish", x)


def softplus(x, beta=1.0, threshold=20.0):
    return unary("softplus", x, beta=float(beta), threshold=float(threshold))


def hardswish(x):
    return unary("hardswish", x)


def hardsigmoid(x):
    return unary("hardsigmoid", x)


def leaky_relu(x, negative_slope=0.01):
    return unary("leaky_relu", x, slope=float(negative_slope))


def elu(x, alpha=1.0):
    return unary("elu", x, alpha=float(alpha))


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return clamp(x, min_val, max_val)


def t_sum(x, dim=None, keepdim=False):  # noqa: A001 - torch.sum
    return reduce("sum", x, dim, keepdim)


def mean(x, dim=None, keepdim=False):
    return reduce("mean", x, dim, keepdim)


def amax(x, dim=None, keepdim=False):
    return reduce("max", x, dim, keepdim)


def logsumexp(x, dim, keepdim=False):
    return reduce("logsumexp", x, dim, keepdim)


def t_max(x, dim=None, keepdim=False):  # noqa: A001 - torch.max
    if isinstance(dim, Tensor):
        return binary("maximum", x, dim)
    if isinstance(dim, Constant):
        # torch.max(x, torch.tensor(c)): the elementwise maximum with a constant.
        return clamp(x, min=float(dim))
    return max_(x, dim, keepdim)


def t_min(x, dim=None, keepdim=False):  # noqa: A001 - torch.min
    if isinstance(dim, Tensor):
        return binary("minimum", x, dim)
    if isinstance(dim, Constant):
        return clamp(x, max=float(dim))
    return min_(x, dim, keepdim)


def maximum(a, b):
    return binary("maximum", a, b)


def minimum(a, b):
    return binary("minimum", a, b)


def bmm(a, b):
    return matmul(a, b)


mm = matmul


def clone(x, **kwargs):
    return x.clone()


def add(a, b):
    return binary("add", a, b)


def mul(a, b):
    return binary("mul", a, b)


def sub(a, b):
    return binary("sub", a, b)


multiply, subtract = mul, sub


def div(a, b):
    return binary("div", a, b)


divide = div


def _reduced(loss, reduction):
    if reduction == "mean":
        return mean(loss)
    if reduction == "sum":
        return t_sum(loss)
    if reduction == "none":
        return loss
    raise Unsupported(f"loss reduction={reduction!r}")


def _no_legacy(size_average, reduce):
    if size_average is not None or reduce is not None:
        raise Unsupported("the loss arguments size_average/reduce")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """torch's smooth L1: 0.5·d²/beta below beta, d − 0.5·beta above, for d = |input − target|;
    written as 0.5·min(d, beta)²/beta + max(d − beta, 0), which is the same function."""
    _no_legacy(size_average, reduce)
    d = t_abs(input - target)
    if float(beta) == 0.0:
        return _reduced(d, reduction)
    loss = clamp(d, max=float(beta)) * clamp(d, max=float(beta)) * (0.5 / float(beta)) + clamp(d - float(beta), min=0.0)
    return _reduced(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """torch's Huber loss: delta times smooth L1 with beta = delta."""
    return smooth_l1_loss(input, target, reduction=reduction, beta=delta) * float(delta)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """torch's KL divergence of `target` from the log-probabilities `input`; `batchmean` sums
    each sample and averages over the batch (the first dimension)."""
    _no_legacy(size_average, reduce)
    if log_target:
        loss = exp(target) * (target - input)
    else:
        loss = target * (log(target) - input)
    if reduction == "batchmean":
        per_sample = t_sum(loss, dim=list(range(1, loss.ndim))) if loss.ndim > 1 else loss
        return mean(per_sample)
    return _reduced(loss, reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """‖x1 − x2 + eps‖_p along the last dimension (p = 1 or 2)."""
    d = x1 - x2 + float(eps)
    if float(p) == 2.0:
        return sqrt(t_sum(d * d, dim=-1, keepdim=keepdim))
    if float(p) == 1.0:
        return t_sum(t_abs(d), dim=-1, keepdim=keepdim)
    raise Unsupported(f"pairwise distance with p={p}")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None, reduction="mean"):
    _no_legacy(size_average, reduce)
    if swap:
        raise Unsupported("triplet margin loss with swap=True")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    return _reduced(clamp(d_pos - d_neg + float(margin), min=0.0), reduction)


def where(*args, **kwargs):
    raise Unsupported("torch.where")


def _arg_extreme(kind, x, dim, keepdim):
    """torch.argmax/argmin along one dimension: the first index of the extreme, as an integer
    tensor (the task's output becomes i32 and is compared exactly)."""
    if dim is None:
        raise Unsupported(f"torch.{kind} without a dimension (of the flattened tensor)")
    d = norm_dim(dim, x.ndim)
    data = (np.argmax if kind == "argmax" else np.argmin)(x.data, axis=d)
    kept = [SymInt(1) if i == d else s for i, s in enumerate(x.sym_shape)]
    t = Tensor(np.expand_dims(data, d), kept, record("reduce", [x], kept, kind=kind, dims=[d]))
    out = squeeze_dims(t, [d]) if not keepdim else t
    out.integer = True
    return out


def argmax(x, dim=None, keepdim=False):
    return _arg_extreme("argmax", x, dim, keepdim)


def argmin(x, dim=None, keepdim=False):
    return _arg_extreme("argmin", x, dim, keepdim)


def narrow(x, dim, start, length):
    """x.narrow(dim, start, length): the elements start .. start + length - 1 along `dim`
    (sizes may be expressions: `x.size(1) - 1`)."""
    d = norm_dim(dim, x.ndim)
    lo, n = int(start), int(length)
    if lo < 0 or n < 0 or lo + n > int(x.sym_shape[d]):
        raise Unsupported(f"narrow outside the tensor ({lo} + {n} > {int(x.sym_shape[d])})")
    shape = list(x.sym_shape)
    shape[d] = sym(length)
    data = np.take(x.data, range(lo, lo + n), axis=d)
    return Tensor(data, shape, record("slice", [x], shape, dim=d, start=expr_of(start)))


def select(x, dim, index):
    d = norm_dim(dim, x.ndim)
    if int(index) < 0:
        raise Unsupported("select with a negative index")
    return squeeze_dims(narrow(x, d, index, 1), [d])


def _filled(x, value):
    return Tensor(np.full(x.data.shape, float(value)), x.sym_shape, record("fill", [], x.sym_shape, value=float(value)))


def zeros_like(x, **kwargs):
    return _filled(x, 0.0)


def ones_like(x, **kwargs):
    return _filled(x, 1.0)


def cat(tensors, dim=0, **kwargs):
    """torch.cat of tensors that agree outside `dim`: each output element reads the operand
    whose range along `dim` holds it."""
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise Unsupported("torch.cat of anything but tensors")
    d = norm_dim(dim, tensors[0].ndim)
    for t in tensors[1:]:
        same = t.ndim == tensors[0].ndim and all(
            int(a) == int(b) for i, (a, b) in enumerate(zip(t.sym_shape, tensors[0].sym_shape)) if i != d
        )
        if not same:
            raise Unsupported("torch.cat of tensors whose other dimensions differ")
    offsets, total = [], SymInt(0)
    for t in tensors:
        offsets.append(expr_of(total))
        total = sym(t.sym_shape[d]) if int(total) == 0 and total.expr == "0" else total + sym(t.sym_shape[d])
    shape = list(tensors[0].sym_shape)
    shape[d] = total
    data = np.concatenate([t.data for t in tensors], axis=d)
    return Tensor(data, shape, record("cat", tensors, shape, dim=d, offsets=offsets))


concat = concatenate = cat


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch's cross entropy of (batch, classes) scores with class indices: the mean (sum) of
    −log_softmax(input)[i, target[i]]. Targets come from torch.randint within the classes, so
    `ignore_index` (−100) never occurs."""
    _no_legacy(size_average, reduce)
    if weight is not None or float(label_smoothing) != 0.0:
        raise Unsupported("cross_entropy with class weights or label smoothing")
    if input.ndim != 2 or target.ndim != 1:
        raise Unsupported("cross_entropy other than (batch, classes) scores with class indices")
    logp = log_softmax(input, 1)
    rows = np.arange(int(input.sym_shape[0]))
    data = logp.data[rows, target.data.astype(np.int64)]
    picked = Tensor(data, [input.sym_shape[0]], record("take", [logp, target], [input.sym_shape[0]], dim=1))
    return _reduced(-picked, reduction)


def adaptive_avg_pool(x, output_size, nd):
    sizes = output_size if isinstance(output_size, (list, tuple)) else [output_size] * nd
    if any(int(s) != 1 for s in sizes):
        raise Unsupported("adaptive pooling to a size other than 1")
    return reduce("mean", x, list(range(x.ndim - nd, x.ndim)), True)


# ---------------------------------------------------------------- nn
class Module:
    def __init__(self, *args, **kwargs):
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            Module.__init__(self)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_parameters(self, prefix=""):
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def eval(self):
        object.__setattr__(self, "training", False)
        return self

    def train(self, mode=True):
        object.__setattr__(self, "training", mode)
        return self


class Parameter(Tensor):
    def __init__(self, tensor, requires_grad=True):
        if isinstance(tensor, Constant):
            # torch lists it among the model's parameters, which the task then draws at
            # random: a 0-d buffer of the task (a kernel with the constant folded in would not
            # match that reference).
            super().__init__(np.array(float(tensor)), [], None, ("normal", 0.0, 1.0))
            return
        super().__init__(tensor.data, tensor.sym_shape, None, tensor.init or ("normal", 0.0, 1.0))


def _kaiming_params(module, weight_shape, fan_in, bias, out):
    bound = 1.0 / math.sqrt(int(fan_in))
    module.weight = Parameter(Tensor(_rng.uniform(-bound, bound, [int(s) for s in weight_shape]), weight_shape, init=("uniform", -bound, bound)))
    module.bias = (
        Parameter(Tensor(_rng.uniform(-bound, bound, [int(out)]), [out], init=("uniform", -bound, bound))) if bias else None
    )
    if not bias:
        module._parameters["bias"] = None


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, **kwargs):
        super().__init__()
        _kaiming_params(self, (out_features, in_features), in_features, bias, out_features)

    def forward(self, x):
        return linear(x, self.weight, self.bias)


def _conv_class(nd, transposed):
    class Conv(Module):
        def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, *rest, **kwargs):
            super().__init__()
            # torch's positional order after padding.
            later = ("output_padding", "groups", "bias", "dilation") if transposed else ("dilation", "groups", "bias")
            if len(rest) > len(later):
                raise Unsupported("convolution padding_mode")
            for name, value in zip(later, rest):
                kwargs[name] = value
            if kwargs.get("padding_mode", "zeros") != "zeros":
                raise Unsupported(f"convolution padding_mode={kwargs['padding_mode']!r}")
            ks = list(kernel_size) if isinstance(kernel_size, (list, tuple)) else [kernel_size] * nd
            # The group count as given (a size such as in_channels stays one).
            self.groups = sym(kwargs.get("groups", 1))
            if int(self.groups) != 1:
                # torch's constructor refuses channels its groups do not divide (a transposed
                # convolution's output channels too, which forward() never divides): recorded
                # so that the probes and the size rule keep them (level 1's 75).
                require_divisible("a grouped convolution's input channels by its groups", in_channels, self.groups)
                require_divisible("a grouped convolution's output channels by its groups", out_channels, self.groups)
            self.stride, self.padding = stride, padding
            self.dilation = kwargs.get("dilation", 1)
            self.output_padding = kwargs.get("output_padding", 0)
            if transposed:
                shape = [in_channels, out_channels // self.groups] + ks
                fan_in = sym(out_channels // self.groups) * prod(ks)
            else:
                shape = [out_channels, in_channels // self.groups] + ks
                fan_in = sym(in_channels // self.groups) * prod(ks)
            _kaiming_params(self, shape, fan_in, kwargs.get("bias", True), out_channels)

        def forward(self, x):
            return conv(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups, transposed, self.output_padding)

    return Conv


Conv1d, Conv2d, Conv3d = (_conv_class(n, False) for n in (1, 2, 3))
ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = (_conv_class(n, True) for n in (1, 2, 3))


def _affine(module, shape, affine):
    if affine:
        module.weight = Parameter(Tensor(np.ones([int(s) for s in shape]), shape, init=("ones", 1.0, 1.0)))
        module.bias = Parameter(Tensor(np.zeros([int(s) for s in shape]), shape, init=("zeros", 0.0, 0.0)))
    else:
        object.__setattr__(module, "weight", None)
        object.__setattr__(module, "bias", None)


class _BatchNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, **kwargs):
        super().__init__()
        self.eps = eps
        _affine(self, [num_features], affine)

    def forward(self, x):
        if not self.training:
            raise Unsupported("batch norm in eval mode (running statistics)")
        return normalize("batch", x, self.weight, self.bias, self.eps)


BatchNorm1d = BatchNorm2d = BatchNorm3d = _BatchNorm


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True):
        super().__init__()
        self.num_groups, self.eps = num_groups, eps
        _affine(self, [num_channels], affine)

    def forward(self, x):
        return normalize("group", x, self.weight, self.bias, self.eps, groups=self.num_groups)


class _InstanceNorm(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, **kwargs):
        super().__init__()
        self.eps = eps
        _affine(self, [num_features], affine)

    def forward(self, x):
        return normalize("instance", x, self.weight, self.bias, self.eps)


InstanceNorm1d = InstanceNorm2d = InstanceNorm3d = _InstanceNorm


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, **kwargs):
        super().__init__()
        shape = list(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else [normalized_shape]
        self.eps, self.n = eps, len(shape)
        _affine(self, shape, elementwise_affine)
        if elementwise_affine and not bias:
            # nn.LayerNorm(bias=False): a weight and no bias parameter.
            del self._parameters["bias"]
            object.__setattr__(self, "bias", None)

    def forward(self, x):
        return normalize("layer", x, self.weight, self.bias, self.eps, normalized=self.n)


def _pool_class(kind, nd):
    class Pool(Module):
        def __init__(self, kernel_size, stride=None, padding=0, *rest, **kwargs):
            super().__init__()
            # torch's positional order after padding: dilation, return_indices, ceil_mode
            # (max); ceil_mode, count_include_pad, divisor_override (average).
            later = ("dilation", "return_indices", "ceil_mode") if kind == "max" else (
                "ceil_mode", "count_include_pad", "divisor_override")
            self.args = (kernel_size, stride, padding)
            self.options = dict(zip(later, rest))
            self.options.update(kwargs)

        def forward(self, x):
            return pool(kind, x, *self.args, nd=nd, **self.options)

    return Pool


MaxPool1d, MaxPool2d, MaxPool3d = (_pool_class("max", n) for n in (1, 2, 3))
AvgPool1d, AvgPool2d, AvgPool3d = (_pool_class("avg", n) for n in (1, 2, 3))


def _adaptive_class(nd):
    class Adaptive(Module):
        def __init__(self, output_size):
            super().__init__()
            self.output_size = output_size

        def forward(self, x):
            return adaptive_avg_pool(x, self.output_size, nd)

    return Adaptive


AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d = (_adaptive_class(n) for n in (1, 2, 3))


def _activation(fn, **defaults):
    class Activation(Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            names = list(defaults)
            self.kw = dict(defaults)
            self.kw.update(dict(zip(names, args)))
            self.kw.update({k: v for k, v in kwargs.items() if k in defaults})

        def forward(self, x):
            return fn(x, **self.kw)

    return Activation


ReLU = _activation(relu)
Sigmoid = _activation(sigmoid)
Tanh = _activation(tanh)
GELU = _activation(gelu, approximate="none")
SiLU = _activation(silu)
Mish = _activation(mish)
Softplus = _activation(softplus, beta=1.0, threshold=20.0)
Hardswish = _activation(hardswish)
Hardsigmoid = _activation(hardsigmoid)
LeakyReLU = _activation(leaky_relu, negative_slope=0.01)
ELU = _activation(elu, alpha=1.0)
Hardtanh = _activation(hardtanh, min_val=-1.0, max_val=1.0)
Softmax = _activation(softmax, dim=None)
LogSoftmax = _activation(log_softmax, dim=None)
Identity = _activation(lambda x: x)


def _loss_class(fn, *names):
    """nn.<Loss>(…): its options (by position in `names`, or by keyword) passed to `fn`."""

    class Loss(Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.options = dict(zip(names, args))
            self.options.update(kwargs)

        def forward(self, *inputs):
            return fn(*inputs, **self.options)

    return Loss


TripletMarginLoss = _loss_class(triplet_margin_loss, "margin", "p", "eps", "swap", "size_average", "reduce", "reduction")
SmoothL1Loss = _loss_class(smooth_l1_loss, "size_average", "reduce", "reduction", "beta")
HuberLoss = _loss_class(huber_loss, "reduction", "delta")
KLDivLoss = _loss_class(kl_div, "size_average", "reduce", "reduction", "log_target")


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = float(p)

    def forward(self, x):
        if self.p > 0.0 and self.training:
            raise Unsupported(f"dropout with p={self.p} in training mode (random: no reference can match)")
        return x


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


def _functional():
    f = types.ModuleType("torch.nn.functional")
    for name in (
        "relu sigmoid tanh gelu silu mish softplus hardswish hardsigmoid leaky_relu elu hardtanh "
        "softmax log_softmax linear scaled_dot_product_attention cross_entropy smooth_l1_loss huber_loss kl_div pairwise_distance triplet_margin_loss"
    ).split():
        setattr(f, name, globals()[name])
    f.max_pool2d = lambda x, kernel_size, stride=None, padding=0, **k: pool("max", x, kernel_size, stride, padding, nd=2, **k)
    f.avg_pool2d = lambda x, kernel_size, stride=None, padding=0, **k: pool("avg", x, kernel_size, stride, padding, nd=2, **k)
    f.max_pool3d = lambda x, kernel_size, stride=None, padding=0, **k: pool("max", x, kernel_size, stride, padding, nd=3, **k)
    f.avg_pool3d = lambda x, kernel_size, stride=None, padding=0, **k: pool("avg", x, kernel_size, stride, padding, nd=3, **k)
    f.max_pool1d = lambda x, kernel_size, stride=None, padding=0, **k: pool("max", x, kernel_size, stride, padding, nd=1, **k)
    f.avg_pool1d = lambda x, kernel_size, stride=None, padding=0, **k: pool("avg", x, kernel_size, stride, padding, nd=1, **k)
    f.adaptive_avg_pool2d = lambda x, output_size: adaptive_avg_pool(x, output_size, 2)
    f.adaptive_avg_pool3d = lambda x, output_size: adaptive_avg_pool(x, output_size, 3)
    f.group_norm = lambda x, num_groups, weight=None, bias=None, eps=1e-5: normalize("group", x, weight, bias, eps, groups=num_groups)
    f.dropout = lambda x, p=0.5, training=True, **k: Dropout(p)(x) if training else x

    def fail(name):
        def call(*a, **k):
            raise Unsupported(f"torch.nn.functional.{name}")

        return call

    f.__getattr__ = fail
    return f


def _modules():
    names = dict(globals())
    torch_module = types.ModuleType("torch")
    for name, value in names.items():
        if not name.startswith("_"):
            setattr(torch_module, name, value)
    nn = types.ModuleType("torch.nn")
    for name, value in names.items():
        if isinstance(value, type) and issubclass(value, Module) or name in ("Parameter", "Module"):
            setattr(nn, name, value)
    functional = _functional()
    nn.functional = functional
    torch_module.nn = nn
    torch_module.Tensor = Tensor

    def missing(kind):
        def lookup(name):
            raise Unsupported(f"{kind}.{name}")

        return lookup

    for name in ("sum", "max", "min", "abs", "pow"):
        setattr(torch_module, name, globals()["t_" + name])
    torch_module.float = float32
    torch_module.long = int64
    torch_module.__getattr__ = missing("torch")
    nn.__getattr__ = missing("torch.nn")
    return {"torch": torch_module, "torch.nn": nn, "torch.nn.functional": functional}


# ---------------------------------------------------------------- running a problem
def load_problem(path, sizes, tuples):
    """The problem module with its sizes set as SymInts (tuples element-wise) before
    get_init_inputs() / get_inputs() read them."""
    saved = {k: sys.modules.get(k) for k in ("torch", "torch.nn", "torch.nn.functional")}
    sys.modules.update(_modules())
    try:
        spec = importlib.util.spec_from_file_location("kf_kernelbench_problem_np", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    env = {k: int(v) for k, v in sizes.items()}
    for name, value in sizes.items():
        if hasattr(module, name):
            setattr(module, name, SymInt(int(value), name))
    for name, elements in tuples.items():
        setattr(
            module,
            name,
            tuple(SymInt(int(eval(e.replace("/", "//"), {"__builtins__": {}}, env)), e) for e in elements),
        )
    return module


def numbers_of(module):
    """The names of the problem's module-level numbers: its sizes and scalars."""
    return {n for n, v in vars(module).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def buffer_name(parameter, numbers):
    """The task's buffer name of a model parameter: its path with `_` for `.`, and `_param`
    after it where a size or scalar has that name (`numbers`; level 2's problem 48 passes
    `scaling_factor` to its constructor as a number and names a parameter so)."""
    name = parameter.replace(".", "_")
    while name in numbers:
        name += "_param"
    return name


def build(path, sizes, tuples):
    """The model at `sizes` (fresh trace)."""
    del TRACE[:]
    LEAVES.clear()
    module = load_problem(path, sizes, tuples)
    return module, module.Model(*module.get_init_inputs())


def run(path, sizes, tuples, input_names, inputs):
    """Runs forward() on `inputs` (name -> array, parameters included) and returns the model,
    the output Tensor and the trace's leaf nodes by buffer name."""
    module, model = build(path, sizes, tuples)
    numbers = numbers_of(module)
    for name, p in model.named_parameters():
        buffer = buffer_name(name, numbers)
        data = np.asarray(inputs[buffer], dtype=np.float64)
        p.data = data.reshape(p.data.shape)
        p.node = record("buffer", [], p.sym_shape, name=buffer)
        LEAVES[buffer] = p.node
    args = []
    shapes = module_input_shapes(module, input_names, inputs)
    for name, shape in zip(input_names, shapes):
        if shape is None:
            # A Python number get_inputs() gives (`s = 3.14`): forward() takes it as it is.
            args.append(inputs[name])
            continue
        node = record("buffer", [], shape, name=name)
        LEAVES[name] = node
        args.append(Tensor(np.asarray(inputs[name], dtype=np.float64), shape, node))
    result = model.forward(*args)
    if isinstance(result, (tuple, list)):
        raise Unsupported("several outputs")
    if not isinstance(result, Tensor):
        raise Unsupported(f"forward() returned {type(result).__name__}")
    return model, result


def module_input_shapes(module, input_names, inputs):
    """The symbolic shapes of get_inputs()'s tensors (their factories see SymInt sizes)."""
    made = module.get_inputs()
    if len(made) != len(input_names):
        raise Unsupported("get_inputs() and forward() disagree on the number of inputs")
    shapes = []
    for name, t in zip(input_names, made):
        if isinstance(t, (int, float)) and not isinstance(t, bool):
            shapes.append(None)
            continue
        if not isinstance(t, Tensor):
            raise Unsupported(f"input {name} is not a float tensor")
        shapes.append(t.sym_shape)
    return shapes


def parameter_inits(path, sizes, tuples):
    """Each parameter's buffer name, symbolic shape and initial distribution (as task-file
    `init` text) at `sizes`."""
    module, model = build(path, sizes, tuples)
    numbers = numbers_of(module)
    out = []
    for name, p in model.named_parameters():
        kind, a, b = p.init
        if kind == "normal":
            text = "normal" if (a, b) == (0.0, 1.0) else f"normal({a!r}, {b!r})"
        elif kind == "uniform":
            text = f"uniform({a!r}, {b!r})"
        else:
            text = kind
        # A 0-d parameter is a buffer of one element (a task's buffers have a dimension).
        shape = [d.expr for d in p.sym_shape] or ["1"]
        out.append({"name": buffer_name(name, numbers), "shape": shape, "init": text, "scale": max(abs(a), abs(b), 0.5)})
    return out


# ---------------------------------------------------------------- the naive OpenCL kernel
def c_float(v):
    text = repr(float(v))
    if "inf" in text:
        return "INFINITY" if v > 0 else "-INFINITY"
    return text + "f" if "e" in text or "." in text else text + ".0f"


def c_dims(shape):
    return ["(long)(" + expr_of(d) + ")" for d in shape]


def linear_index(dims, idx):
    """Row-major offset of `idx` (C expressions) in a tensor of `dims` (C expressions)."""
    text = idx[0] if idx else "0"
    for d, i in zip(dims[1:], idx[1:]):
        text = f"({text}) * {d} + {i}"
    return text


# Operations whose element reads many elements of their inputs (or loops to produce one).
EXPENSIVE_OPS = ("matmul", "conv", "reduce", "pool", "scan", "softmax", "norm")


def numel_expr(shape):
    """The element count of `shape` as a manifest expression over the sizes."""
    return " * ".join(f"({expr_of(d)})" for d in shape) if shape else "1"


def numel_value(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def materialised_nodes(root):
    """The expensive operations (matmul, convolution, reduction, pooling, scan, softmax,
    norm) other than the output whose every element the one-kernel form would compute many
    times: read by another expensive operation (through element-wise and shape steps), read
    by more than one operation, or broadcast (fewer elements than the output). Each gets a
    scratch buffer written by a kernel of its own, so the naive kernel does each operation's
    work once, as PyTorch's eager mode does."""
    needed = sorted(reachable(root))
    consumers = {k: [] for k in needed}
    for k in needed:
        for i in TRACE[k]["inputs"]:
            consumers[i].append(k)
    read_by_loop = {}
    for k in sorted(needed, reverse=True):
        read_by_loop[k] = any(TRACE[c]["op"] in EXPENSIVE_OPS or read_by_loop[c] for c in consumers[k])
    out_elements = numel_value(TRACE[root]["shape"])
    return [
        k for k in needed
        if k != root and TRACE[k]["op"] in EXPENSIVE_OPS and (
            read_by_loop[k] or len(consumers[k]) > 1 or numel_value(TRACE[k]["shape"]) < out_elements
        )
    ]


def stats_layout(node):
    """For a softmax or norm node: the statistics' shape (sizes, as the node's shape holds
    them), the statistic index of an element (from its index `i0..`), and for the
    statistics kernel the loop names, bounds and source index over which one statistic is
    computed from the decomposed statistic index `s0..`."""
    a, shape = node["attrs"], node["shape"]
    dims = c_dims(shape)
    rank = len(shape)
    idx = [f"i{d}" for d in range(rank)]
    if node["op"] == "softmax":
        d = a["dim"]
        keep = [x for x in range(rank) if x != d]
        stat_shape = [shape[x] for x in keep]
        stat_of_element = [idx[x] for x in keep]
        s = {x: f"s{n}" for n, x in enumerate(keep)}
        src_idx = [s[x] if x != d else "kf_r" for x in range(rank)]
        return stat_shape, stat_of_element, ["kf_r"], [dims[d]], src_idx
    kind = a["kind"]
    if kind == "layer":
        lead = rank - a["normalized"]
        keep, red = list(range(lead)), list(range(lead, rank))
    elif kind == "batch":
        keep, red = [1], [d for d in range(rank) if d != 1]
    elif kind == "instance":
        keep, red = [0, 1], list(range(2, rank))
    else:  # group: (batch, group) statistics over the group's channels and all of space
        per = f"({dims[1]} / {a['groups']})"
        stat_shape = [shape[0], SymInt(a["group_count"], a["groups"])]
        stat_of_element = ["i0", f"i1 / {per}"]
        names = ["kf_rc"] + [f"kf_r{d}" for d in range(2, rank)]
        bounds = [per] + [dims[d] for d in range(2, rank)]
        src_idx = ["s0", f"s1 * {per} + kf_rc"] + [f"kf_r{d}" for d in range(2, rank)]
        return stat_shape, stat_of_element, names, bounds, src_idx
    stat_shape = [shape[x] for x in keep]
    stat_of_element = [idx[x] for x in keep]
    s = {x: f"s{n}" for n, x in enumerate(keep)}
    names = [f"kf_r{d}" for d in red]
    src_idx = [s[x] if x in s else f"kf_r{x}" for x in range(rank)]
    return stat_shape, stat_of_element, names, [dims[d] for d in red], src_idx


def stats_kernel_body(k, node, args):
    """The statistics kernel's statement for one statistic index `s0..`: a softmax row's
    maximum and sum of exponentials, or a norm group's mean and reciprocal deviation."""
    _, _, names, bounds, src_idx = stats_layout(node)
    value = call(node["inputs"][0], args, src_idx)
    count = " * ".join(bounds) or "1"
    if node["op"] == "softmax":
        return (
            "    float kf_m = -INFINITY;\n" + loops(names, bounds, f"kf_m = fmax(kf_m, {value});")
            + "    float acc = 0.0f;\n" + loops(names, bounds, f"acc += exp({value} - kf_m);")
            + f"    kf_a{k}[gid] = kf_m;\n    kf_b{k}[gid] = acc;"
        )
    return (
        "    float kf_mean = 0.0f;\n" + loops(names, bounds, f"kf_mean += {value};")
        + f"    kf_mean /= (float)({count});\n"
        + "    float kf_var = 0.0f;\n"
        + loops(names, bounds, f"const float kf_d = {value} - kf_mean;\nkf_var += kf_d * kf_d;")
        + f"    kf_var /= (float)({count});\n"
        + f"    kf_a{k}[gid] = kf_mean;\n    kf_b{k}[gid] = 1.0f / sqrt(kf_var + {c_float(node['attrs']['eps'])});"
    )


def element_from_stats(k, node, args, idx):
    """A softmax or norm element from its statistics (written by the statistics kernel)."""
    stat_shape, stat_of_element, _, _, _ = stats_layout(node)
    at = linear_index(c_dims(stat_shape), stat_of_element) if stat_shape else "0"
    src = node["inputs"][0]
    own = call(src, args, idx)
    if node["op"] == "softmax":
        if node["attrs"]["log"]:
            return f"    return {own} - kf_a{k}[{at}] - log(kf_b{k}[{at}]);"
        return f"    return exp({own} - kf_a{k}[{at}]) / kf_b{k}[{at}];"
    a, rank = node["attrs"], len(node["shape"])
    text = f"    float kf_y = ({own} - kf_a{k}[{at}]) * kf_b{k}[{at}];\n"
    affine_idx = idx[rank - a["normalized"]:] if a["kind"] == "layer" else ["i1"]
    j = 1
    if a["weight"]:
        text += f"    kf_y *= {call(node['inputs'][j], args, affine_idx)};\n"
        j += 1
    if a["bias"]:
        text += f"    kf_y += {call(node['inputs'][j], args, affine_idx)};\n"
    return text + "    return kf_y;"


def index_kernel(name, params, dims, statement):
    """A kernel with one work-item per element of `dims` (C expressions), its index decomposed
    into `i0..` (or `s0..` with prefix `s`), running `statement`."""
    total = " * ".join(dims) if dims else "1"
    decompose = []
    rest = "gid"
    for d in range(len(dims) - 1, -1, -1):
        decompose.append(f"    const long {statement[0]}{d} = {rest} % {dims[d]};")
        rest = f"({rest} / {dims[d]})"
    decompose.reverse()
    return (
        f"__kernel void {name}({params}) {{\n"
        f"    const long gid = get_global_id(0);\n"
        f"    if (gid >= {total}) {{\n        return;\n    }}\n"
        + "".join(line + "\n" for line in decompose)
        + statement[1] + "\n}\n"
    )


def element_kernel(name, params, shape, store):
    """A kernel with one work-item per element of `shape`, and its launch: for two or more
    dimensions a 2-D launch, the last (contiguous) dimension along the first launch
    dimension and the others along the second, so a work-item's index needs no division
    but its row's (64-bit divisions per element made the one-dimensional form several times
    slower on a CPU); `store` assigns element `gid` from `i0..`."""
    dims = c_dims(shape)
    rank = len(dims)
    if rank < 2:
        elements = numel_expr(shape)
        text = index_kernel(name, params, dims, ("i", store))
        return text, {"global": [f"(({elements}) + 63) / 64 * 64"], "local": ["64"]}
    last = rank - 1
    decompose = []
    rest = "kf_row"
    for d in range(last - 1, -1, -1):
        decompose.append(f"    const long i{d} = {rest} % {dims[d]};")
        rest = f"({rest} / {dims[d]})"
    decompose.reverse()
    rows = " * ".join(dims[:last])
    text = (
        f"__kernel void {name}({params}) {{\n"
        f"    const long i{last} = get_global_id(0);\n"
        f"    const long kf_row = get_global_id(1);\n"
        f"    if (i{last} >= {dims[last]} || kf_row >= {rows}) {{\n        return;\n    }}\n"
        + "".join(line + "\n" for line in decompose)
        + f"    const long gid = kf_row * {dims[last]} + i{last};\n"
        + store + "\n}\n"
    )
    # Work-groups along the row, as wide as the traced row needs (at most 64).
    width = 1
    while width < 64 and width < int(shape[last]):
        width *= 2
    launch = {
        "global": [f"((({expr_of(shape[last])}) + {width - 1}) / {width}) * {width}", numel_expr(shape[:last])],
        "local": [str(width), "1"],
    }
    return text, launch


# Words of OpenCL C that a problem may use as the name of a size, scalar or parameter (level
# 2's problem 68 has a scalar `constant`, an address space): a kernel cannot name a parameter
# so. Parameters bind by position, so the generated kernels rename them (`rename_reserved`).
OPENCL_RESERVED = {
    "constant", "global", "local", "private", "kernel", "read_only", "write_only", "read_write",
    "half", "bool", "char", "uchar", "short", "ushort", "uint", "ulong", "long", "int", "float",
    "double", "signed", "unsigned", "const", "restrict", "volatile", "static", "inline",
    "extern", "register", "auto", "struct", "union", "enum", "typedef", "sizeof", "goto",
    "default", "case", "switch", "do", "size_t", "ptrdiff_t", "event_t", "sampler_t",
    "complex", "imaginary", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "pow", "fabs",
    "fmin", "fmax", "min", "max", "clamp", "floor", "ceil", "round", "sign",
}


def rename_reserved(text, names):
    """`text` (an OpenCL C source) with each of `names` that OpenCL C reserves renamed to
    `kf_arg_<name>` wherever it stands as a word."""
    for name in sorted(set(names) & OPENCL_RESERVED):
        text = re.sub(rf"(?<![\w]){name}(?![\w])", f"kf_arg_{name}", text)
    return text


def signatures(buffer_names, size_names, scalar_names, output_name, int_names=(), scratch=(), output_int=False):
    """The generated kernels' three parameter texts: the node functions' parameters (buffers,
    scratch, sizes), the arguments that call them, and the kernels' parameters (the task's
    arguments in order, a 0-dimensional output being the task's one-element buffer, then the
    scratch buffers). Integer inputs (class indices) are `int` buffers; an element read
    converts to float."""
    buffer_type = lambda n: "int" if n in int_names else "float"
    fn_params = ", ".join(
        [f"__global const {buffer_type(n)}* restrict {n}" for n in buffer_names]
        + [f"__global const float* restrict {n}" for n in scratch]
        + [f"const int {n}" for n in size_names]
    )
    args = ", ".join(list(buffer_names) + list(scratch) + list(size_names))
    kernel_params = ", ".join(
        [f"__global const {buffer_type(n)}* restrict {n}" for n in buffer_names]
        + [f"__global {'int' if output_int else 'float'}* restrict {output_name}"]
        + [f"const int {n}" for n in size_names]
        + [f"const float {n}" for n in scalar_names]
        + [f"__global float* restrict {n}" for n in scratch]
    )
    return fn_params, args, kernel_params


def opencl_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """The naive kernel: `naive_kernels`' source and plan."""
    source, plan, _ = naive_kernels(output, buffer_names, size_names, scalar_names, output_name, int_names)
    return source, plan


def naive_kernels(output, buffer_names, size_names, scalar_names, output_name, int_names=(), blocked_convs=False, blocked_matmuls=False, line_scans=False):
    """OpenCL C for `output`'s trace, and how to launch it: a function per node computing one
    element from its inputs' functions, and a kernel with one work-item per output element
    that calls the output's. Shared subexpressions are recomputed (a correct, slow baseline),
    except where that would repeat a whole operation's work for every element
    (`materialised_nodes`, and the statistics of every softmax and norm): those are written
    into scratch buffers by kernels of their own that run first, so the baseline is a
    sequence of kernels (kf-manifest's `[[kernels]]`).

    Returns the source and the launch plan:
    `{"scratch": [{"name", "elements"}], "kernels": [{"entry", "launch": {"global", "local"},
    "writes"}]}` (one kernel and no scratch where nothing runs first), every kernel taking the
    task's arguments and then the scratch buffers in that order; and the convolutions written
    into scratch by the blocked kernel (`blocked_convs`: `blocked_conv_kernel`, where
    `conv_blockable`) and the matrix products (`blocked_matmuls`: `blocked_matmul_kernel`,
    where `matmul_blockable`) instead of one work-item per element; with `line_scans`, every
    scan by `line_scan_kernel` (one work-item per line along the scanned dimension), into
    scratch, or into the output where the output is the scan."""
    needed = sorted(reachable(output.node))
    materialised = set(materialised_nodes(output.node))
    if line_scans:
        materialised |= {k for k in needed if TRACE[k]["op"] == "scan" and k != output.node}
    scan_out = line_scans and TRACE[output.node]["op"] == "scan"
    with_stats = [k for k in needed if TRACE[k]["op"] in ("softmax", "norm")]
    scratch = []  # (name, elements expression), in the kernels' argument order
    for k in needed:
        if k in with_stats:
            n = numel_expr(stats_layout(TRACE[k])[0])
            scratch += [(f"kf_a{k}", n), (f"kf_b{k}", n)]
        if k in materialised:
            scratch.append((f"kf_m{k}", numel_expr(TRACE[k]["shape"])))
    fn_params, args, kernel_params = signatures(
        buffer_names, size_names, scalar_names, output_name, int_names,
        [n for n, _ in scratch], output.integer,
    )
    funcs = []
    for k in needed:
        node = TRACE[k]
        if node["op"] == "buffer":
            continue  # read where it is used (`call`)
        rank = len(node["shape"])
        idx = [f"i{d}" for d in range(rank)]
        idx_params = ", ".join(f"long {i}" for i in idx)
        sep = ", " if rank else ""
        if k in with_stats:
            body = element_from_stats(k, node, args, idx)
        else:
            body = node_body(k, node, args)
        if k in materialised:
            # What kernel `naive_m{k}` computes; every later reader reads the scratch buffer.
            funcs.append(f"static float c{k}({fn_params}{sep}{idx_params}) {{\n{body}\n}}\n")
            body = f"    return kf_m{k}[{linear_index(c_dims(node['shape']), idx)}];"
        funcs.append(f"static float n{k}({fn_params}{sep}{idx_params}) {{\n{body}\n}}\n")
    kernels, sequence, blocked = [], [], []

    def launch(elements):
        return f"(({elements}) + 63) / 64 * 64"

    for k in needed:
        node = TRACE[k]
        if k in with_stats:
            stat_shape = stats_layout(node)[0]
            statement = ("s", stats_kernel_body(k, node, args))
            kernels.append(index_kernel(f"naive_s{k}", kernel_params, c_dims(stat_shape), statement))
            n = numel_expr(stat_shape)
            sequence.append({
                "entry": f"naive_s{k}",
                "launch": {"global": [launch(n)], "local": ["64"]},
                "writes": [f"kf_a{k}", f"kf_b{k}"],
            })
        if k in materialised and blocked_convs and conv_blockable(k):
            lin = linear_index(c_dims(node["shape"]), [f"i{d}" for d in range(len(node["shape"]))])
            text, at = blocked_conv_kernel(f"conv_blocked_m{k}", k, kernel_params, args, f"kf_m{k}[{lin}] = kf_v;")
            kernels.append(text)
            sequence.append({"entry": f"conv_blocked_m{k}", "launch": at, "writes": [f"kf_m{k}"]})
            blocked.append(k)
        elif k in materialised and blocked_matmuls and matmul_blockable(k):
            lin = linear_index(c_dims(node["shape"]), [f"i{d}" for d in range(len(node["shape"]))])
            text, at = blocked_matmul_kernel(f"matmul_blocked_m{k}", k, kernel_params, f"kf_m{k}[{lin}] = kf_v;")
            kernels.append(text)
            sequence.append({"entry": f"matmul_blocked_m{k}", "launch": at, "writes": [f"kf_m{k}"]})
            blocked.append(k)
        elif k in materialised and line_scans and node["op"] == "scan":
            text, at = line_scan_kernel(f"scan_m{k}", k, kernel_params, args, f"kf_m{k}")
            kernels.append(text)
            sequence.append({"entry": f"scan_m{k}", "launch": at, "writes": [f"kf_m{k}"]})
            blocked.append(k)
        elif k in materialised:
            rank = len(node["shape"])
            call_k = f"c{k}(" + ", ".join([args] + [f"i{d}" for d in range(rank)]) + ")"
            text, at = element_kernel(f"naive_m{k}", kernel_params, node["shape"], f"    kf_m{k}[gid] = {call_k};")
            kernels.append(text)
            sequence.append({"entry": f"naive_m{k}", "launch": at, "writes": [f"kf_m{k}"]})
    rank = len(output.sym_shape)
    call_out = ", ".join([args] + [f"i{d}" for d in range(rank)])
    if scan_out:
        text, at = line_scan_kernel("naive", output.node, kernel_params, args, output_name)
        blocked.append(output.node)
    else:
        text, at = element_kernel("naive", kernel_params, output.sym_shape, f"    {output_name}[gid] = {'(int)' if output.integer else ''}n{output.node}({call_out});")
    kernels.append(text)
    header = (
        "// Generated by kf task import-kernelbench from the problem's forward(): one work-item per\n"
        "// output element, each operation a function of the element's index (a correct, slow baseline)"
        + (";\n// operations whose work the output would repeat per element run first, into scratch.\n" if sequence else ".\n")
    )
    sequence.append({"entry": "naive", "launch": at, "writes": [output_name]})
    plan = {"scratch": [{"name": n, "elements": e} for n, e in scratch], "kernels": sequence}
    return header + "\n".join(funcs) + "\n" + "\n".join(kernels), plan, blocked


def product_flops(output):
    """The floating-point operations of forward()'s matrix products and convolutions (two per
    multiply-add) as an expression over the sizes, or None without any. A lower bound of the
    work (element-wise steps are not counted): a kernel's GFLOP/s then compare with a GEMM's,
    and the roofline bound drawn from it never asks for more than the operator does."""
    total = None
    for k in sorted(reachable(output.node)):
        node = TRACE[k]
        if node["op"] == "matmul":
            term = prod(node["shape"]) * sym(TRACE[node["inputs"][0]]["shape"][-1]) * 2
        elif node["op"] == "conv":
            x_shape = TRACE[node["inputs"][0]]["shape"]
            w_shape = TRACE[node["inputs"][1]]["shape"]
            # Weights [out, in / groups, k...]; transposed [in, out / groups, k...]: every
            # output (or, transposed, every input) element meets w_shape[1:] weights.
            term = prod(x_shape if node["attrs"]["transposed"] else node["shape"]) * prod(w_shape[1:]) * 2
        else:
            continue
        total = term if total is None else total + term
    return None if total is None else expr_of(total)


class NotFusable(Exception):
    """The trace is not a matrix product followed by element-wise steps."""


# The longest epilogue expression written into a task file (a deep chain of activations that
# each use their operand several times grows the text geometrically).
EPILOGUE_MAX_CHARS = 6000


# ---------------------------------------------------------------- reductions to one value
# A 0-d output that sums (averages, takes the maximum or minimum of) all of an element-wise
# expression of the inputs: the parallel two-stage form, each work-group reducing a strided
# share into a scratch buffer of partial results, then one work-group reducing those. What
# each kind starts from and how two values combine:
SCALAR_REDUCTIONS = {
    "sum": ("0.0f", "({a} + {b})"),
    "mean": ("0.0f", "({a} + {b})"),
    "max": ("-INFINITY", "fmax({a}, {b})"),
    "min": ("INFINITY", "fmin({a}, {b})"),
}

SCALAR_REDUCTION_CL = """// A parallel two-stage reduction to one value, generated by `kf task import-kernelbench`
// from the problem's forward(): work-group g of GROUPS reduces the elements g * WG + l,
// + WG * GROUPS, ... (neighbouring work-items read neighbouring elements) in local memory
// into kf_partial[g]; one work-group of WG then reduces the GROUPS partial results and
// writes the output. Tunables: WG (work-group size, a power of two), GROUPS (work-groups of
// the first stage: 2 occupy two CPU cores, a GPU wants several per multiprocessor), UNROLL
// (elements a work-item takes per trip of its loop).
#ifndef WG
#define WG 64
#endif
#ifndef GROUPS
#define GROUPS 64
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

static float kf_element({fn_params}, const long i) {{
    return {element};
}}

// The work-group's WG values `acc` combined into one, by halves in local memory `part`
// (every work-item of the group calls it: it holds barriers).
static float kf_group_reduce(__local float* part, const float acc) {{
    const int lid = get_local_id(0);
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {{
        if (lid < s) {{
            part[lid] = {combine_part};
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    return part[0];
}}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reduce_partial({kernel_params}) {{
    const long n = {elements};
    const long stride = (long)WG * GROUPS;
    const int lid = get_local_id(0);
    float acc = {init};
    long i = get_global_id(0);
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {{
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const float v = kf_element({args}, i + u * stride);
            acc = {combine_acc};
        }}
    }}
    for (; i < n; i += stride) {{
        const float v = kf_element({args}, i);
        acc = {combine_acc};
    }}
    __local float part[WG];
    const float total = kf_group_reduce(part, acc);
    if (lid == 0) {{
        kf_partial[get_group_id(0)] = total;
    }}
}}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reduce_final({kernel_params}) {{
    const int lid = get_local_id(0);
    float acc = {init};
    for (int g = lid; g < GROUPS; g += WG) {{
        const float v = kf_partial[g];
        acc = {combine_acc};
    }}
    __local float part[WG];
    const float v = kf_group_reduce(part, acc);
    if (lid == 0) {{
        {output}[0] = {final};
    }}
}}
"""

SCALAR_REDUCTION_TOML = """# A parallel two-stage reduction to one value that `kf task import-kernelbench` generated from
# the problem's forward() (a starting point of the search beside the naive kernel): work-groups
# reduce strided shares into partial results, one work-group reduces those.
source = "{source}"
entry = "reduce_final"
language = "opencl"
description = "Two-stage parallel reduction of {what} to one value: GROUPS work-groups of WG into kf_partial, then one work-group."
tags = ["reduction", "generated"]

[params]
WG = [64, 128, 256, 32, 16]
GROUPS = [64, 2, 8, 16, 32, 128, 256, 1024]
UNROLL = [4, 1, 2, 8]

[constraints]
rules = ["WG <= max_work_group_size"]

[[scratch]]
name = "kf_partial"
dtype = "f32"
elements = "GROUPS"

[[kernels]]
entry = "reduce_partial"
writes = ["kf_partial"]
launch = {{ global = ["WG * GROUPS"], local = ["WG"] }}

[[kernels]]
entry = "reduce_final"
writes = ["$out"]
launch = {{ global = ["WG"], local = ["WG"] }}
"""


def broadcast_flat(src_shape, shape, index):
    """The flat index into a tensor of `src_shape` that broadcasts (right-aligned, dimensions
    of 1 repeated, as `broadcast` traced it) to the element at flat `index` of `shape`; None
    where it does not broadcast."""
    offset = len(shape) - len(src_shape)
    if offset < 0:
        return None
    out_dims, src_dims = c_dims(shape), c_dims(src_shape)
    terms = []
    for j, extent in enumerate(src_shape):
        d = offset + j
        if int(extent) == 1 and int(shape[d]) != 1:
            continue
        if int(extent) != int(shape[d]):
            return None
        outer = " * ".join(out_dims[d + 1:])
        coord = f"(({index}) / ({outer}) % {out_dims[d]})" if outer else f"(({index}) % {out_dims[d]})"
        inner = " * ".join(src_dims[j + 1:])
        terms.append(f"{coord} * {inner}" if inner else coord)
    return " + ".join(terms) or "0"


def flat_element(k, shape, index):
    """Node `k`'s element at flat `index` as one C expression, where `k` is element-wise over
    buffers of `shape` (sizes as traced) or broadcasting to it (a reshape keeps the flat
    order); None otherwise."""
    node = TRACE[k]
    op, attrs, ins = node["op"], node["attrs"], node["inputs"]
    same = [expr_of(d) for d in node["shape"]] == [expr_of(d) for d in shape]
    if not same and op != "fill":
        # A smaller operand broadcast to `shape`: its own element at the mapped index.
        mapped = broadcast_flat(node["shape"], shape, index)
        return None if mapped is None else flat_element(k, node["shape"], mapped)
    if op == "buffer":
        return f"{attrs['name']}[{index}]"
    if op == "fill":
        return c_float(attrs["value"])
    if op == "reshape":
        # Same elements in the same order: the source's flat index is this one.
        src = TRACE[ins[0]]["shape"]
        if numel_expr(src) != numel_expr(node["shape"]):
            return None
        return flat_element(ins[0], src, index)
    if op in UNARY_C:
        values = {key: c_float(v) if v is not None else ("-INFINITY" if key == "lo" else "INFINITY") for key, v in attrs.items()}
        operand = flat_element(ins[0], shape, index)
        if operand is None:
            return None
        return "(" + re.sub(r"\bv\b", lambda _: f"({operand})", UNARY_C[op].format(**values)) + ")"
    if op in BINARY_C:
        operands = [flat_element(i, shape, index) for i in ins]
        if any(o is None for o in operands):
            return None
        return binary_c(op, attrs, operands, scalar_c(attrs) if len(ins) == 1 else None)
    return None


def scalar_after(k, value):
    """`value` (a C expression) through 0-d node `k`'s element-wise step; None if `k` is not
    one."""
    node = TRACE[k]
    op, attrs = node["op"], node["attrs"]
    if op == "reshape":
        return value
    if op in UNARY_C and len(node["inputs"]) == 1:
        values = {key: c_float(v) if v is not None else ("-INFINITY" if key == "lo" else "INFINITY") for key, v in attrs.items()}
        return "(" + re.sub(r"\bv\b", lambda _: f"({value})", UNARY_C[op].format(**values)) + ")"
    if op in BINARY_C and len(node["inputs"]) == 1:
        return binary_c(op, attrs, [value], scalar_c(attrs))
    return None


def scalar_reduction_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """The two-stage reduction of a 0-d output that reduces all of an element-wise expression
    of the inputs (a loss: the mean of (p − t)², the sum of |x|), followed by element-wise
    steps on the one value: `{"name", "source", "manifest"}` for `kf task import-kernelbench`
    to write beside the naive kernel as a starting point of the search, or None where the
    output is not such a reduction."""
    if output.node is None or output.sym_shape or output.integer:
        return None
    steps, k = [], output.node
    while TRACE[k]["op"] != "reduce":
        node = TRACE[k]
        if len(node["inputs"]) != 1 or numel_value(node["shape"]) != 1 or scalar_after(k, "v") is None:
            return None
        steps.append(k)
        k = node["inputs"][0]
    reduce_node = TRACE[k]
    kind, source = reduce_node["attrs"]["kind"], reduce_node["inputs"][0]
    src_shape = TRACE[source]["shape"]
    if kind not in SCALAR_REDUCTIONS or sorted(reduce_node["attrs"]["dims"]) != list(range(len(src_shape))):
        return None
    element = flat_element(source, src_shape, "i")
    if element is None:
        return None
    elements = numel_expr(src_shape)
    final = "v" if kind != "mean" else f"(v / (float)({elements}))"
    for step in reversed(steps):
        final = scalar_after(step, final)
    init, combine = SCALAR_REDUCTIONS[kind]
    buffer_type = lambda n: "int" if n in int_names else "float"
    fn_params = ", ".join(
        [f"__global const {buffer_type(n)}* restrict {n}" for n in buffer_names]
        + [f"const int {n}" for n in size_names]
        + [f"const float {n}" for n in scalar_names]
    )
    kernel_params = ", ".join(
        [f"__global const {buffer_type(n)}* restrict {n}" for n in buffer_names]
        + [f"__global float* restrict {output_name}"]
        + [f"const int {n}" for n in size_names]
        + [f"const float {n}" for n in scalar_names]
        + ["__global float* restrict kf_partial"]
    )
    args = ", ".join(list(buffer_names) + list(size_names) + list(scalar_names))
    source_text = SCALAR_REDUCTION_CL.format(
        fn_params=fn_params,
        kernel_params=kernel_params,
        element=element,
        elements=elements,
        init=init,
        args=args,
        combine_acc=combine.format(a="acc", b="v"),
        combine_part=combine.format(a="part[lid]", b="part[lid + s]"),
        output=output_name,
        final=final,
    )
    name = "reduce_scalar"
    # `$out`: the task's output buffer, which the importer names once the reference is known.
    manifest = SCALAR_REDUCTION_TOML.format(source=f"{name}.cl", what=kind)
    return {"name": name, "source": source_text, "manifest": manifest}




CONV_BLOCKED_NOTE = """// A blocked direct convolution that `kf task import-kernelbench` generated from the problem's
// forward() (a starting point of the search beside the naive kernel): each work-item keeps
// OCT output channels x TW positions along the last dimension in registers, so that every
// input value it loads serves OCT channels and every weight TW positions; work-items of a
// group take neighbouring positions (the runtime vectorises across them).
"""

CONV_BLOCKED_KERNEL = """__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void {name}({kernel_params}) {{
    const long i0 = get_global_id(2);
    const long kf_r = get_global_id(1);
    const long kf_o0 = (kf_r / ({rows})) * OCT;
{decompose}    const long kf_t0 = (long)get_group_id(0) * (WG * TW) + get_local_id(0);
    float acc[OCT][TW];
    #pragma unroll
    for (int o = 0; o < OCT; ++o) {{
        #pragma unroll
        for (int j = 0; j < TW; ++j) {{
            acc[o][j] = 0.0f;
        }}
    }}
{loops}
    #pragma unroll
    for (int o = 0; o < OCT; ++o) {{
        const long i1 = kf_o0 + o;
        if (i1 >= {channels}) {{
            break;
        }}
        #pragma unroll
        for (int j = 0; j < TW; ++j) {{
            const long i{last} = kf_t0 + (long)j * WG;
            if (i{last} < {positions}) {{
                const float kf_v = acc[o][j]{bias};
                {store}
            }}
        }}
    }}
}}
"""

# The blocked convolution's parameters, their constraints, and its launch in a manifest.
CONV_BLOCKED_PARAMS = """[params]
OCT = [8, 4, 16, 2, 1, 32]
TW = [1, 2, 4, 8]
WG = [16, 8, 32, 4, 64, 1]

[constraints]
rules = ["OCT * TW <= 128", "WG <= max_work_group_size"]
"""


def conv_blockable(k):
    """Whether node `k` is a convolution the blocked kernel computes: one group, weights read
    from a buffer, at least one spatial dimension."""
    node = TRACE[k]
    return (
        node["op"] == "conv"
        and str(node["attrs"]["groups"]) == "1"
        and TRACE[node["inputs"][1]]["op"] == "buffer"
        and len(node["shape"]) >= 3
    )


def blocked_conv_kernel(name, c, kernel_params, args, store):
    """The blocked direct convolution kernel `name` computing convolution node `c` (plain or
    transposed) and `store`, a statement that writes the value `kf_v` (the bias added) of
    element `i0..`; and its launch (`{"global", "local"}` over the sizes and OCT, TW, WG)."""
    node = TRACE[c]
    a, ins, shape = node["attrs"], node["inputs"], node["shape"]
    rank = len(shape)
    nd, last = rank - 2, rank - 1
    x_node, w_node = ins[0], ins[1]
    xd, wd, od = c_dims(TRACE[x_node]["shape"]), c_dims(TRACE[w_node]["shape"]), c_dims(shape)
    st, pad, dil = a["stride"], a["padding"], a["dilation"]
    transposed = a["transposed"]
    body = []
    # An output position reads input position (p * stride - pad + k * dil); transposed, the
    # input position q / stride where q = p + pad - k * dil is a multiple of the stride.
    for i in range(nd - 1):
        if transposed:
            body.append(f"const long kf_q{i} = i{i + 2} + {pad[i]} - kf_k{i} * {dil[i]};")
            body.append(f"if (kf_q{i} < 0 || kf_q{i} % {st[i]} != 0 || kf_q{i} / {st[i]} >= {xd[i + 2]}) continue;")
            body.append(f"const long kf_p{i} = kf_q{i} / {st[i]};")
        else:
            body.append(f"const long kf_p{i} = i{i + 2} * {st[i]} - {pad[i]} + kf_k{i} * {dil[i]};")
            body.append(f"if (kf_p{i} < 0 || kf_p{i} >= {xd[i + 2]}) continue;")
    lp = nd - 1
    x_at = call(x_node, args, ["i0", "kf_c"] + [f"kf_p{i}" for i in range(nd - 1)] + ["kf_p"])
    ks = [f"kf_k{i}" for i in range(nd)]
    # Weights [out, in, k...]; transposed [in, out, k...].
    w_at = call(w_node, args, (["kf_c", "kf_o"] if transposed else ["kf_o", "kf_c"]) + ks)
    if transposed:
        position = [
            f"    const long kf_q = kf_t + {pad[lp]} - kf_k{lp} * {dil[lp]};",
            f"    const long kf_p = kf_q / {st[lp]};",
        ]
        inside = f"kf_t < {od[last]} && kf_q >= 0 && kf_q % {st[lp]} == 0 && kf_p < {xd[last]}"
    else:
        position = [f"    const long kf_p = kf_t * {st[lp]} - {pad[lp]} + kf_k{lp} * {dil[lp]};"]
        inside = f"kf_t < {od[last]} && kf_p >= 0 && kf_p < {xd[last]}"
    body += (
        ["float kf_x[TW];", "#pragma unroll", "for (int j = 0; j < TW; ++j) {",
         "    const long kf_t = kf_t0 + (long)j * WG;"]
        + position
        + [f"    kf_x[j] = ({inside}) ? {x_at} : 0.0f;", "}",
           "#pragma unroll", "for (int o = 0; o < OCT; ++o) {",
           "    const long kf_o = kf_o0 + o;",
           f"    const float kf_w = kf_o < {od[1]} ? {w_at} : 0.0f;",
           "    #pragma unroll", "    for (int j = 0; j < TW; ++j) {",
           "        acc[o][j] = fma(kf_w, kf_x[j], acc[o][j]);", "    }", "}"]
    )
    channels_in = xd[1] if transposed else wd[1]
    loop_text = loops(["kf_c"] + ks, [channels_in] + wd[2:], "\n".join(body)).rstrip("\n")
    bias = f" + {call(ins[2], args, ['i1'])}" if a["bias"] else ""
    # The launch's second dimension: output-channel blocks times the outer spatial positions.
    outer = od[2:last]
    decompose, rest = "", "kf_r"
    for d in range(last - 1, 1, -1):
        decompose = f"    const long i{d} = {rest} % {od[d]};\n" + decompose
        rest = f"({rest} / {od[d]})"
    text = CONV_BLOCKED_KERNEL.format(
        name=name, kernel_params=kernel_params, rows=" * ".join(outer) if outer else "1",
        decompose=decompose, loops=loop_text, channels=od[1], last=last, positions=od[last],
        bias=bias, store=store,
    )
    rows = " * ".join(f"({expr_of(d)})" for d in shape[2:last]) or "1"
    launch = {
        "global": [
            f"((({expr_of(shape[last])}) + WG * TW - 1) / (WG * TW)) * WG",
            f"((({expr_of(shape[1])}) + OCT - 1) / OCT) * ({rows})",
            expr_of(shape[0]),
        ],
        "local": ["WG", "1", "1"],
    }
    return text, launch


MATMUL_BLOCKED_KERNEL = """__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(float16)))
void {name}({kernel_params}) {{
    const long kf_n0 = (long)get_global_id(0) * TN;
    const long kf_m0 = (long)get_global_id(1) * TM;
    const long kf_rows = {rows};
    const long kf_cols = {cols};
    const long kf_depth = {depth};
    float16 acc[TM][TN];
    float tail[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i) {{
        #pragma unroll
        for (int j = 0; j < TN; ++j) {{
            acc[i][j] = (float16)(0.0f);
            tail[i][j] = 0.0f;
        }}
    }}
    // Rows and columns past the end read the last one (their results are not stored), so
    // every load stays inside the operands.
    long kf_k = 0;
    for (; kf_k + 16 <= kf_depth; kf_k += 16) {{
        float16 kf_b[TN];
        #pragma unroll
        for (int j = 0; j < TN; ++j) {{
            const long n = min(kf_n0 + j, kf_cols - 1);
            kf_b[j] = vload16(0, {b} + n * kf_depth + kf_k);
        }}
        #pragma unroll
        for (int i = 0; i < TM; ++i) {{
            const long m = min(kf_m0 + i, kf_rows - 1);
            const float16 kf_a = vload16(0, {a} + m * kf_depth + kf_k);
            #pragma unroll
            for (int j = 0; j < TN; ++j) {{
                acc[i][j] = fma(kf_a, kf_b[j], acc[i][j]);
            }}
        }}
    }}
    for (; kf_k < kf_depth; ++kf_k) {{
        #pragma unroll
        for (int i = 0; i < TM; ++i) {{
            const long m = min(kf_m0 + i, kf_rows - 1);
            #pragma unroll
            for (int j = 0; j < TN; ++j) {{
                const long n = min(kf_n0 + j, kf_cols - 1);
                tail[i][j] = fma({a}[m * kf_depth + kf_k], {b}[n * kf_depth + kf_k], tail[i][j]);
            }}
        }}
    }}
    #pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const long kf_m = kf_m0 + i;
        if (kf_m >= kf_rows) {{
            break;
        }}
{decompose}        #pragma unroll
        for (int j = 0; j < TN; ++j) {{
            const long i{last} = kf_n0 + j;
            if (i{last} < kf_cols) {{
                const float8 h8 = acc[i][j].lo + acc[i][j].hi;
                const float4 h4 = h8.lo + h8.hi;
                const float2 h2 = h4.lo + h4.hi;
                const float kf_v = h2.x + h2.y + tail[i][j];
                {store}
            }}
        }}
    }}
}}
"""

# The blocked matrix product's parameters and constraints in a manifest.
MATMUL_BLOCKED_PARAMS = """[params]
TM = [4, 2, 1, 8]
TN = [4, 2, 1, 8]
WG = [4, 1, 2, 8, 16]

[constraints]
rules = ["TM * TN <= 32", "WG <= max_work_group_size"]
"""


def matmul_blockable(k):
    """Whether node `k` is a matrix product the blocked kernel computes: a buffer times the
    transpose of a 2-D buffer (`nn.Linear`: both read along the contracted dimension), so
    both operands load as float16 vectors."""
    node = TRACE[k]
    if node["op"] != "matmul":
        return False
    a, b = TRACE[node["inputs"][0]], TRACE[node["inputs"][1]]
    return (
        a["op"] == "buffer"
        and len(a["shape"]) >= 2
        and b["op"] == "permute"
        and b["attrs"]["dims"] == [1, 0]
        and TRACE[b["inputs"][0]]["op"] == "buffer"
    )


def blocked_matmul_kernel(name, k, kernel_params, store):
    """The blocked matrix product kernel `name` computing `matmul_blockable` node `k` (TM rows
    x TN columns per work-item, 16 products of the contracted dimension per vector FMA, one
    horizontal sum per output) and `store`, a statement writing the value `kf_v` of element
    `i0..`; and its launch."""
    node = TRACE[k]
    shape = node["shape"]
    a = TRACE[node["inputs"][0]]
    b = TRACE[TRACE[node["inputs"][1]]["inputs"][0]]
    rank = len(shape)
    last = rank - 1
    dims = c_dims(shape)
    rows = " * ".join(dims[:last])
    decompose, rest = "", "kf_m"
    for d in range(last - 1, -1, -1):
        decompose = f"        const long i{d} = {rest} % {dims[d]};\n" + decompose
        rest = f"({rest} / {dims[d]})"
    text = MATMUL_BLOCKED_KERNEL.format(
        name=name, kernel_params=kernel_params, rows=rows, cols=dims[last],
        depth=c_dims(a["shape"])[-1], a=a["attrs"]["name"], b=b["attrs"]["name"],
        decompose=decompose, last=last, store=store,
    )
    plain_rows = " * ".join(f"({expr_of(d)})" for d in shape[:last])
    launch = {
        "global": [
            f"((((({expr_of(shape[last])}) + TN - 1) / TN) + WG - 1) / WG) * WG",
            f"(({plain_rows}) + TM - 1) / TM",
        ],
        "local": ["WG", "1"],
    }
    return text, launch


def seed_manifest(source, what, plan, output_name, params=CONV_BLOCKED_PARAMS, tag="convolution"):
    """A generated seed's manifest: its `[params]` (the blocked convolution's unless given),
    the plan's scratch buffers and kernel sequence (one kernel: its launch only), the output
    named `$out` for the importer to name once the reference is known."""
    quote = lambda items: "[" + ", ".join(f'"{i}"' for i in items) + "]"
    kernels = plan["kernels"]
    lines = [
        "# Generated by `kf task import-kernelbench` from the problem's forward(): a starting point",
        "# of the search beside the naive kernel.",
        f'source = "{source}"',
        f'entry = "{kernels[-1]["entry"]}"',
        'language = "opencl"',
        f'description = "{what}"',
        f'tags = ["{tag}", "generated"]',
        "",
        params,
    ]
    if len(kernels) == 1:
        at = kernels[0]["launch"]
        lines += ["[launch]", f"global = {quote(at['global'])}", f"local = {quote(at['local'])}"]
        return "\n".join(lines) + "\n"
    for s in plan["scratch"]:
        lines += ["[[scratch]]", f'name = "{s["name"]}"', 'dtype = "f32"', f'elements = "{s["elements"]}"', ""]
    for k in kernels:
        writes = ["$out" if w == output_name else w for w in k["writes"]]
        at = k["launch"]
        lines += [
            "[[kernels]]",
            f'entry = "{k["entry"]}"',
            f"writes = {quote(writes)}",
            f"launch = {{ global = {quote(at['global'])}, local = {quote(at['local'])} }}",
            "",
        ]
    return "\n".join(lines)


def conv_epilogue_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """A generated seed for an output that convolves: `{"name", "source", "manifest"}` for
    `kf task import-kernelbench` to write beside the naive kernel as a starting point of the
    search, or None where no convolution can be blocked.

    Where the output is element-wise steps over one convolution of its shape and nothing else
    is expensive, one kernel: the blocked convolution with the steps fused into its stores
    (their other operands, a bias or a residual, read per element as in the naive kernel).
    Otherwise, where the naive kernel computes a convolution into scratch (a pooling, a norm
    or a reduction reads it), the naive sequence with that kernel blocked."""
    if output.node is None or output.integer:
        return None
    fused = fused_conv_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names)
    if fused is not None:
        return fused
    source, plan, blocked = naive_kernels(output, buffer_names, size_names, scalar_names, output_name, int_names, blocked_convs=True)
    if not blocked:
        return None
    source = CONV_BLOCKED_NOTE + "// The other kernels are the naive kernel's.\n" + source
    manifest = seed_manifest("conv_blocked.cl", "The naive sequence with its convolution blocked: OCT output channels x TW positions per work-item.", plan, output_name)
    return {"name": "conv_blocked", "source": source, "manifest": manifest}


POOL_VECTOR_KERNEL = """// A {what} kernel that `kf task import-kernelbench` generated from the problem's forward() (a
// starting point of the search beside the naive kernel): each work-item computes VW
// neighbouring outputs along the last dimension as one vector. A window step loads them with
// one vector load where the stride is 1, two and their even lanes where it is 2, and element
// by element (positions outside the input skipped) at the edges and other strides.
#ifndef VW
#define VW 16
#endif
#if VW == 16
typedef float16 floatv;
#define VLOAD vload16
#define VSTORE vstore16
#elif VW == 8
typedef float8 floatv;
#define VLOAD vload8
#define VSTORE vstore8
#else
typedef float4 floatv;
#define VLOAD vload4
#define VSTORE vstore4
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) __attribute__((vec_type_hint(floatv)))
void {entry}({kernel_params}) {{
    // One flat index over the rows and their VW-wide tiles, so that a work-group never idles
    // on a row shorter than WG tiles. A row's last tile is shifted left to end at the row's
    // end where the row holds a whole vector: it recomputes some outputs of the tile before
    // (the same values) but loads whole vectors instead of lane by lane.
    const long kf_len = {out_len};
    const long kf_in = {in_len};
    const long kf_tiles = (kf_len + VW - 1) / VW;
    const long kf_r = (long)get_global_id(0) / kf_tiles;
    long kf_t0 = ((long)get_global_id(0) % kf_tiles) * VW;
    if (kf_t0 + VW > kf_len && kf_len >= VW) {{
        kf_t0 = kf_len - VW;
    }}
    if (kf_r >= {rows}) {{
        return;
    }}
{decompose}    const long kf_st = {stride}, kf_pad = {pad}, kf_dil = {dil};
    floatv acc = (floatv)({init});
{count_init}{loops}    const floatv kf_out = {result};
    __global float* kf_dst = {output} + ({out_row}) * kf_len;
    if (kf_t0 + VW <= kf_len) {{
        VSTORE(kf_out, 0, kf_dst + kf_t0);
    }} else {{
        float kf_s[VW];
        VSTORE(kf_out, 0, kf_s);
        for (int j = 0; j < VW && kf_t0 + j < kf_len; ++j) {{
            kf_dst[kf_t0 + j] = kf_s[j];
        }}
    }}
}}
"""

# One window step along the last dimension: the VW input values (and, for an average over
# the positions inside the input, which of them are inside).
POOL_VECTOR_STEP = """const long kf_q0 = kf_t0 * kf_st - kf_pad + kf_k * kf_dil;
const long kf_q1 = (kf_t0 + VW - 1) * kf_st - kf_pad + kf_k * kf_dil;
const bool kf_inside = kf_q0 >= 0 && kf_q1 < kf_in;
floatv kf_v;
{mask_decl}if (kf_inside && kf_st == 1) {{
    kf_v = VLOAD(0, {src} + kf_base + kf_q0);
{mask_full}}} else if (kf_inside && kf_st == 2) {{
    const floatv kf_a = VLOAD(0, {src} + kf_base + kf_q0);
    const floatv kf_b = VLOAD(0, {src} + kf_base + kf_q0 + VW);
    kf_v = (floatv)(kf_a.even, kf_b.even);
{mask_full}}} else {{
    float kf_l[VW];
{mask_lanes}    for (int j = 0; j < VW; ++j) {{
        const long kf_q = kf_q0 + (long)j * kf_st;
        const bool kf_in_j = kf_q >= 0 && kf_q < kf_in;
        kf_l[j] = kf_in_j ? {src}[kf_base + kf_q] : {fill};
{mask_lane}    }}
    kf_v = VLOAD(0, kf_l);
{mask_load}}}
acc = {combine};
{count_step}"""

POOL_VECTOR_PARAMS = """[params]
VW = [16, 8, 4]
WG = [64, 16, 4, 1]

[constraints]
rules = ["WG <= max_work_group_size"]
"""


def depthwise(k):
    """Whether node `k` is a depthwise convolution (one input channel per group, any channel
    multiplier; not transposed) of an input buffer by a weight buffer."""
    node = TRACE[k]
    if node["op"] != "conv" or node["attrs"]["transposed"]:
        return False
    ins = node["inputs"]
    weight = TRACE[ins[1]]
    return (
        all(TRACE[i]["op"] == "buffer" for i in ins)
        and always_one(expr_of(weight["shape"][1]))
        and str(node["attrs"]["groups"]) != "1"
    )


def always_one(expr):
    """Whether a size expression is 1 at every size: `1`, or a size divided by itself (a
    depthwise convolution's input channels per group, `in_channels / in_channels`)."""
    text = str(expr).replace(" ", "")
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    parts = text.split("/")
    return text == "1" or (len(parts) == 2 and parts[0].strip("()") == parts[1].strip("()") and parts[0].strip("()") != "0")


def window_of(k):
    """The sliding window that node `k` (a max or average pooling, or a depthwise convolution,
    of an input buffer) moves over its input, as the pieces `window_vector_kernel` writes; None
    where `k` is neither."""
    node = TRACE[k]
    a, ins = node["attrs"], node["inputs"]
    if node["op"] == "pool" and TRACE[ins[0]]["op"] == "buffer":
        padded = any(e != "0" for e in a["padding"])
        kind = "max" if a["kind"] == "max" else "avg"
        return {
            "kind": kind, "nd": a["nd"], "src": ins[0],
            "kernel": [f"(long)({e})" for e in a["kernel"]],
            "stride": [f"(long)({e})" for e in a["stride"]],
            "padding": [f"(long)({e})" for e in a["padding"]],
            "dilation": [f"(long)({e})" for e in a["dilation"]],
            # An average over the positions inside the input counts them per output (per lane).
            "counted": kind == "avg" and padded and not a["count_include_pad"],
        }
    if depthwise(k):
        nd = len(node["shape"]) - 2
        wd = c_dims(TRACE[ins[1]]["shape"])
        return {
            "kind": "conv", "nd": nd, "src": ins[0], "weight": ins[1],
            "bias": ins[2] if a["bias"] else None,
            "kernel": wd[2:],
            "stride": [f"(long)({e})" for e in a["stride"]],
            "padding": [f"(long)({e})" for e in a["padding"]],
            "dilation": [f"(long)({e})" for e in a["dilation"]],
            "counted": False,
            # Output channel i1 reads input channel i1 / (the channel multiplier).
            "channel": f"i1 / ({wd[0]} / {a['groups']})",
        }
    return None


def window_vector_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """A generated seed where the output is a max or average pooling, or a depthwise
    convolution, of an input buffer: `{"name", "source", "manifest"}` (see
    `POOL_VECTOR_KERNEL`), or None otherwise."""
    if output.node is None or output.integer:
        return None
    node = TRACE[output.node]
    w = window_of(output.node)
    if w is None or [expr_of(d) for d in node["shape"]] != [expr_of(d) for d in output.sym_shape]:
        return None
    src_node, shape = TRACE[w["src"]], node["shape"]
    nd, rank, kind, counted = w["nd"], len(shape), w["kind"], w["counted"]
    lead, last = rank - nd, rank - 1
    od, xd = c_dims(shape), c_dims(src_node["shape"])
    ks, st, pad, dil = w["kernel"], w["stride"], w["padding"], w["dilation"]
    decompose, rest = "", "kf_r"
    for d in range(last - 1, -1, -1):
        decompose = f"    const long i{d} = {rest} % {od[d]};\n" + decompose
        rest = f"({rest} / {od[d]})"
    lead_idx = [f"i{d}" for d in range(lead)]
    if kind == "conv":
        decompose += f"    const long kf_g = {w['channel']};\n"
        lead_idx = ["i0", "kf_g"]
    # The outer window dimensions' positions (skipped outside the input), then the last one's
    # steps as vectors; `kf_base` is the input row the last dimension runs along.
    outer = [f"const long kf_p{i} = i{lead + i} * {st[i]} - {pad[i]} + kf_k{i} * {dil[i]};" for i in range(nd - 1)]
    outer += [f"if (kf_p{i} < 0 || kf_p{i} >= {xd[lead + i]}) continue;" for i in range(nd - 1)]
    base_idx = lead_idx + [f"kf_p{i}" for i in range(nd - 1)] + ["0"]
    if kind == "max":
        combine = "fmax(acc, kf_v)"
    elif kind == "avg":
        combine = "acc + kf_v"
    else:
        wd = c_dims(TRACE[w["weight"]]["shape"])
        w_idx = linear_index(wd, ["i1", "0"] + [f"kf_k{i}" for i in range(nd - 1)] + ["kf_k"])
        combine = f"fma(kf_v, (floatv)({TRACE[w['weight']]['attrs']['name']}[{w_idx}]), acc)"
    step = POOL_VECTOR_STEP.format(
        src=src_node["attrs"]["name"],
        fill="-INFINITY" if kind == "max" else "0.0f",
        combine=combine,
        mask_decl="floatv kf_m;\n" if counted else "",
        mask_full="    kf_m = (floatv)(1.0f);\n" if counted else "",
        mask_lanes="    float kf_c[VW];\n" if counted else "",
        mask_lane="        kf_c[j] = kf_in_j ? 1.0f : 0.0f;\n" if counted else "",
        mask_load="    kf_m = VLOAD(0, kf_c);\n" if counted else "",
        count_step="kf_n += kf_m;" if counted else "",
    ).rstrip("\n")
    body = outer + [f"const long kf_base = {linear_index(xd, base_idx)};"]
    body += [f"for (long kf_k = 0; kf_k < {ks[nd - 1]}; ++kf_k) {{"] + ["    " + line for line in step.split("\n")] + ["}"]
    loop_text = loops([f"kf_k{i}" for i in range(nd - 1)], ks[: nd - 1], "\n".join(body))
    if kind == "max":
        init, result = "-INFINITY", "acc"
    elif counted:
        init, result = "0.0f", "acc / kf_n"
    elif kind == "avg":
        init, result = "0.0f", "acc / (float)(" + " * ".join(ks) + ")"
    elif w["bias"] is not None:
        init, result = "0.0f", f"acc + {TRACE[w['bias']]['attrs']['name']}[i1]"
    else:
        init, result = "0.0f", "acc"
    _, _, kernel_params = signatures(buffer_names, size_names, scalar_names, output_name, int_names)
    rows = " * ".join(od[:last]) if last else "1"
    name = "depthwise_vector" if kind == "conv" else "pool_vector"
    source = POOL_VECTOR_KERNEL.format(
        what="depthwise convolution" if kind == "conv" else "pooling", entry=name,
        kernel_params=kernel_params, out_len=od[last], in_len=xd[last], rows=rows, decompose=decompose,
        stride=st[nd - 1], pad=pad[nd - 1], dil=dil[nd - 1], init=init,
        count_init="    floatv kf_n = (floatv)(0.0f);\n" if counted else "", loops=loop_text, result=result,
        output=output_name, out_row=linear_index(od[:last], [f"i{d}" for d in range(last)]) if last else "0",
    )
    plain_rows = " * ".join(f"({expr_of(d)})" for d in shape[:last]) or "1"
    launch = {"global": [f"(((({expr_of(shape[last])}) + VW - 1) / VW * {plain_rows} + WG - 1) / WG) * WG"], "local": ["WG"]}
    plan = {"kernels": [{"entry": name, "launch": launch, "writes": [output_name]}], "scratch": []}
    what = {
        "max": "Max pooling", "avg": "Average pooling", "conv": "Depthwise convolution",
    }[kind] + ", VW outputs along the last dimension per work-item as one vector."
    tag = "convolution" if kind == "conv" else "pooling"
    manifest = seed_manifest(f"{name}.cl", what, plan, output_name, params=POOL_VECTOR_PARAMS, tag=tag)
    return {"name": name, "source": source, "manifest": manifest}


LINE_SCAN_NOTE = """// The naive kernel sequence with its scans computed line by line, generated by `kf task
// import-kernelbench` from the problem's forward() (a starting point of the search beside the
// naive kernel): one work-item walks a line along the scanned dimension once, keeping the
// running sum (product), where the naive kernel sums each element's prefix again. Work-items
// of a group take neighbouring lines (contiguous where the scan is not along the last
// dimension, so the runtime vectorises across them).
"""

LINE_SCAN_PARAMS = """[params]
WG = [1, 16, 4, 64]

[constraints]
rules = ["WG <= max_work_group_size"]
"""


def line_scan_kernel(name, k, kernel_params, args, target):
    """The kernel `name` computing scan node `k` line by line into buffer `target` (the
    scan's shape, row-major), and its launch (one work-item per line, `WG` per group)."""
    node = TRACE[k]
    a, shape = node["attrs"], node["shape"]
    dims = c_dims(shape)
    d, rank = a["dim"], len(shape)
    lines = " * ".join(dims[:d] + dims[d + 1:]) or "1"
    decompose, rest = [], "kf_line"
    for i in range(rank - 1, -1, -1):
        if i == d:
            continue
        decompose.append(f"    const long i{i} = {rest} % {dims[i]};")
        rest = f"({rest} / {dims[i]})"
    decompose.reverse()
    idx = [f"i{i}" if i != d else "kf_s" for i in range(rank)]
    combine = "+" if a["kind"] == "cumsum" else "*"
    text = (
        f"__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\nvoid {name}({kernel_params}) {{\n"
        f"    const long kf_line = get_global_id(0);\n"
        f"    if (kf_line >= {lines}) {{\n        return;\n    }}\n"
        + "".join(line + "\n" for line in decompose)
        + f"    float acc = {'0.0f' if combine == '+' else '1.0f'};\n"
        f"    for (long kf_s = 0; kf_s < {dims[d]}; ++kf_s) {{\n"
        f"        acc {combine}= {call(node['inputs'][0], args, idx)};\n"
        f"        {target}[{linear_index(dims, idx)}] = acc;\n"
        f"    }}\n}}\n"
    )
    plain = " * ".join(f"({expr_of(v)})" for i, v in enumerate(shape) if i != d) or "1"
    return text, {"global": [f"((({plain}) + WG - 1) / WG) * WG"], "local": ["WG"]}


def line_scan_sequence(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """A generated seed where forward() scans (cumsum, cumprod, reversed or exclusive through
    flips and slices): the naive sequence with every scan computed line by line
    (`line_scan_kernel`), `{"name", "source", "manifest"}`; None without a scan."""
    if output.node is None or output.integer:
        return None
    source, plan, scans = naive_kernels(output, buffer_names, size_names, scalar_names, output_name, int_names, line_scans=True)
    if not scans:
        return None
    manifest = seed_manifest("scan_lines.cl", "The naive sequence with its scans computed line by line: one work-item per line.", plan, output_name, params=LINE_SCAN_PARAMS, tag="scan")
    return {"name": "scan_lines", "source": LINE_SCAN_NOTE + "// The other kernels are the naive kernel's.\n" + source, "manifest": manifest}


MATMUL_SEQUENCE_NOTE = """// The naive kernel sequence with its matrix products blocked, generated by `kf task
// import-kernelbench` from the problem's forward() (a starting point of the search beside the
// naive kernel): each product's work-item computes TM rows x TN columns, 16 products of the
// contracted dimension per vector FMA, into the scratch buffer the later kernels read.
"""


def matmul_sequence_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """A generated seed where the naive kernel computes a matrix product into scratch (a norm,
    a reduction or a softmax reads it): the naive sequence with that product's kernel blocked,
    `{"name", "source", "manifest"}`; None where no product can be blocked."""
    if output.node is None or output.integer:
        return None
    source, plan, blocked = naive_kernels(output, buffer_names, size_names, scalar_names, output_name, int_names, blocked_matmuls=True)
    if not blocked:
        return None
    manifest = seed_manifest(
        "matmul_blocked.cl",
        "The naive sequence with its matrix products blocked: TM x TN outputs per work-item.",
        plan, output_name, params=MATMUL_BLOCKED_PARAMS, tag="matmul",
    )
    return {"name": "matmul_blocked", "source": MATMUL_SEQUENCE_NOTE + source, "manifest": manifest}


def fused_conv_kernel(output, buffer_names, size_names, scalar_names, output_name, int_names=()):
    """The one-kernel form of `conv_epilogue_kernel`, or None."""
    if len(output.sym_shape) < 3:
        return None
    root = output.node
    needed = sorted(reachable(root))
    convs = [k for k in needed if TRACE[k]["op"] == "conv"]
    if len(convs) != 1 or not conv_blockable(convs[0]):
        return None
    (c,) = convs
    out_shape = [expr_of(d) for d in output.sym_shape]
    if [expr_of(d) for d in TRACE[c]["shape"]] != out_shape:
        return None
    # The steps between the convolution and the output: element-wise, of the output's shape,
    # reading the convolution (or another step) only at their own element.
    on_path = [k for k in needed if k != c and c in reachable(k)]
    for k in needed:
        node = TRACE[k]
        if k in on_path:
            elementwise = node["op"] in UNARY_C or node["op"] in BINARY_C
            if not elementwise or [expr_of(d) for d in node["shape"]] != out_shape:
                return None
            for i in node["inputs"]:
                if (i == c or i in on_path) and [expr_of(d) for d in TRACE[i]["shape"]] != out_shape:
                    return None
        elif k != c and node["op"] in EXPENSIVE_OPS + ("reshape", "permute"):
            # Anything costly or re-indexed besides the convolution: the sequence form.
            return None
    rank = len(out_shape)
    fn_params, args, kernel_params = signatures(buffer_names, size_names, scalar_names, output_name, int_names)
    idx = [f"i{d}" for d in range(rank)]
    idx_params = ", ".join(f"long {i}" for i in idx)
    funcs = []
    CALL_OVERRIDE.clear()
    CALL_OVERRIDE[c] = lambda _args, _idx: "kf_v"
    for k in on_path:
        CALL_OVERRIDE[k] = lambda a_, i_, k=k: f"e{k}(" + ", ".join([a_, "kf_v"] + list(i_)) + ")"
    try:
        for k in needed:
            node = TRACE[k]
            if node["op"] == "buffer" or k == c:
                continue
            body = node_body(k, node, args)
            if k in on_path:
                funcs.append(f"static float e{k}({fn_params}, const float kf_v, {idx_params}) {{\n{body}\n}}\n")
            else:
                inner = f"{fn_params}, {idx_params}" if node["shape"] else fn_params
                funcs.append(f"static float n{k}({inner}) {{\n{body}\n}}\n")
        epilogue = call(root, args, idx) if root != c else "kf_v"
    finally:
        CALL_OVERRIDE.clear()
    store = f"{output_name}[{linear_index(c_dims(output.sym_shape), idx)}] = {epilogue};"
    text, launch = blocked_conv_kernel("conv_blocked", c, kernel_params, args, store)
    source = (
        CONV_BLOCKED_NOTE
        + "// The element-wise steps after the convolution run on each value before its one store.\n"
        + "\n".join(funcs) + "\n" + text
    )
    if len(source) > 4 * EPILOGUE_MAX_CHARS:
        return None
    plan = {"scratch": [], "kernels": [{"entry": "conv_blocked", "launch": launch, "writes": [output_name]}]}
    manifest = seed_manifest("conv_blocked.cl", "Blocked direct convolution: OCT output channels x TW positions per work-item, epilogue fused.", plan, output_name)
    return {"name": "conv_blocked", "source": source, "manifest": manifest}


def matmul_epilogue_family(output):
    """forward()'s trace as one matrix product followed by element-wise steps (bias, scaling,
    residual terms, activations, clamps): the task file's `[family] kind = "matmul"` (output
    `$out`) with the steps as its `epilogue`, one OpenCL C expression of the product's element
    `acc` and of the task's buffers through the accessors `col_of(b)`, `row_of(b)` and `at(b)`.
    An output of more dimensions is the product of a first operand with those leading
    dimensions by a matrix (`torch.matmul` of an (N, M, K) tensor and a (K, L) matrix, a linear
    layer over a batch of sequences): its rows are the leading dimensions flattened, which is
    how both are laid out. None for a trace of any other shape."""
    if output.node is None or len(output.sym_shape) < 2:
        return None
    out_shape = [expr_of(d) for d in output.sym_shape]
    # The product's rows: the output's leading dimensions, flattened.
    rows_2d = [prod(output.sym_shape[:-1]), output.sym_shape[-1]]
    batched = len(output.sym_shape) > 2
    products = set()

    def element(k):
        node = TRACE[k]
        op, attrs, ins = node["op"], node["attrs"], node["inputs"]
        if op == "matmul":
            products.add(k)
            return "acc"
        if op == "buffer":
            name = attrs["name"]
            if name in ("acc", "row", "col") or len(node["shape"]) > 2:
                raise NotFusable(name)
            src = node["shape"]
            if batched:
                # Over flattened rows only a per-column vector, a scalar and a tensor shaped
                # like the output are read alike.
                if [expr_of(d) for d in src] == out_shape:
                    return f"at({name})"
                if any(int(d) != 1 for d in src[:-1]):
                    raise NotFusable(name)
                src = [sym(1), src[-1]] if src else []
            ext = [sym(1)] * (2 - len(src)) + list(src)
            for have, want in zip(ext, rows_2d):
                if int(have) != 1 and expr_of(have) != expr_of(want):
                    raise NotFusable(name)
            # The epilogue's accessors (kf-search makes them vector loads where a template
            # stores vectors): an element of a per-column vector, of a per-row vector, or of a
            # matrix shaped like the product.
            index = broadcast_index(ext, rows_2d, ["row", "col"])
            accessor = {("0", "col"): "col_of", ("row", "0"): "row_of", ("row", "col"): "at"}
            if tuple(index) in accessor:
                return f"{accessor[tuple(index)]}({name})"
            return f"{name}[0]"
        if [expr_of(d) for d in node["shape"]] != out_shape:
            raise NotFusable(op)
        if op in UNARY_C:
            values = {key: c_float(v) if v is not None else ("-INFINITY" if key == "lo" else "INFINITY") for key, v in attrs.items()}
            operand = element(ins[0])
            text = UNARY_C[op].format(**values)
            return "(" + re.sub(r"\bv\b", lambda _: f"({operand})", text) + ")"
        if op in BINARY_C:
            if len(ins) == 1:
                if attrs.get("scalar_expr"):
                    raise NotFusable(op)
                return binary_c(op, attrs, [element(ins[0])], c_float(attrs["scalar"]))
            return binary_c(op, attrs, [element(ins[0]), element(ins[1])], None)
        raise NotFusable(op)

    try:
        epilogue = element(output.node)
    except NotFusable:
        return None
    if len(products) != 1 or len(epilogue) > EPILOGUE_MAX_CHARS:
        return None
    product = TRACE[products.pop()]
    if [expr_of(d) for d in product["shape"]] != out_shape:
        return None

    def factor(k):
        """A buffer node, or a transposed one: (name, transposed). The first operand of a
        batched product keeps its leading dimensions (not transposed)."""
        node = TRACE[k]
        if node["op"] == "buffer" and len(node["shape"]) == 2:
            return node["attrs"]["name"], False
        leading = [expr_of(d) for d in node["shape"][:-1]]
        if batched and k == product["inputs"][0] and node["op"] == "buffer" and leading == out_shape[:-1]:
            return node["attrs"]["name"], False
        if node["op"] == "permute" and node["attrs"]["dims"] == [1, 0]:
            inner = TRACE[node["inputs"][0]]
            if inner["op"] == "buffer" and len(inner["shape"]) == 2:
                return inner["attrs"]["name"], True
        raise NotFusable(node["op"])

    try:
        (a, transpose_a), (b, transpose_b) = (factor(k) for k in product["inputs"])
    except NotFusable:
        return None
    # The product's first operand as it sees it (after any transpose): M x K.
    k_dim = TRACE[product["inputs"][0]]["shape"][-1]
    if batched and len(TRACE[product["inputs"][1]]["shape"]) != 2:
        return None
    family = {
        "kind": "matmul",
        "a": a,
        "b": b,
        "c": "$out",
        "m": expr_of(rows_2d[0]),
        "n": out_shape[-1],
        "k": expr_of(k_dim),
        "transpose_a": transpose_a,
        "transpose_b": transpose_b,
    }
    if epilogue != "acc":
        family["epilogue"] = epilogue
    return family


def reachable(root):
    seen, stack = set(), [root]
    while stack:
        k = stack.pop()
        if k in seen:
            continue
        seen.add(k)
        stack.extend(TRACE[k]["inputs"])
    return seen


# Nodes whose element another generator supplies while it writes its kernel (node -> a
# function of the arguments text and the index): the blocked convolution's epilogue reads the
# convolution's value from a register instead of calling its function.
CALL_OVERRIDE = {}


def call(k, args, idx):
    """The C expression of node `k`'s element at `idx`: a buffer's element read directly (so
    the transformations see the kernel's memory accesses), any other node's function."""
    if k in CALL_OVERRIDE:
        return CALL_OVERRIDE[k](args, idx)
    node = TRACE[k]
    if node["op"] == "buffer":
        return f"{node['attrs']['name']}[{linear_index(c_dims(node['shape']), list(idx))}]"
    inner = ", ".join([args] + list(idx)) if idx else args
    return f"n{k}({inner})"


def node_body(k, node, args):
    op, a, shape = node["op"], node["attrs"], node["shape"]
    ins = node["inputs"]
    rank = len(shape)
    idx = [f"i{d}" for d in range(rank)]
    if op == "buffer":
        return f"    return {a['name']}[{linear_index(c_dims(shape), idx)}];"
    if op in UNARY_C:
        attrs = {key: c_float(v) if v is not None else ("-INFINITY" if key == "lo" else "INFINITY") for key, v in a.items()}
        return f"    const float v = {call(ins[0], args, idx)};\n    return {UNARY_C[op].format(**attrs)};"
    if op in BINARY_C:
        if len(ins) == 1:
            return f"    return {binary_c(op, a, [call(ins[0], args, idx)], scalar_c(a))};"
        operands = [call(i, args, broadcast_index(TRACE[i]["shape"], shape, idx)) for i in ins]
        return f"    return {binary_c(op, a, operands, None)};"
    if op == "reshape":
        src = TRACE[ins[0]]["shape"]
        flat = linear_index(c_dims(shape), idx)
        lines = [f"    long rest = {flat};"]
        src_dims = c_dims(src)
        for d in range(len(src) - 1, -1, -1):
            lines.append(f"    const long j{d} = rest % {src_dims[d]};")
            lines.append(f"    rest /= {src_dims[d]};")
        lines.append(f"    return {call(ins[0], args, [f'j{d}' for d in range(len(src))])};")
        return "\n".join(lines)
    if op == "permute":
        src_idx = [None] * rank
        for out_d, src_d in enumerate(a["dims"]):
            src_idx[src_d] = idx[out_d]
        return f"    return {call(ins[0], args, src_idx)};"
    if op == "reduce":
        return reduce_body(ins[0], a, shape, args, idx)
    if op == "softmax":
        return softmax_body(ins[0], a, shape, args, idx)
    if op == "matmul":
        a_shape, b_shape = TRACE[ins[0]]["shape"], TRACE[ins[1]]["shape"]
        kdim = c_dims(a_shape)[-1]
        a_idx = idx[: len(a_shape) - 1] + ["kf_k"]
        if len(b_shape) == 2:
            b_idx = ["kf_k", idx[-1]]
        else:
            b_idx = idx[: len(b_shape) - 2] + ["kf_k", idx[-1]]
        return (
            f"    float acc = 0.0f;\n    for (long kf_k = 0; kf_k < {kdim}; ++kf_k) {{\n"
            f"        acc += {call(ins[0], args, a_idx)} * {call(ins[1], args, b_idx)};\n    }}\n    return acc;"
        )
    if op == "conv":
        return conv_body(ins, a, shape, args, idx)
    if op == "pool":
        return pool_body(ins[0], a, shape, args, idx)
    if op == "norm":
        return norm_body(ins, a, shape, args, idx)
    if op == "scan":
        # Element i along the axis: the sum (product) of the elements 0..i, serially.
        d = a["dim"]
        at = idx[:d] + ["kf_s"] + idx[d + 1:]
        combine = "+=" if a["kind"] == "cumsum" else "*="
        start = "0.0f" if a["kind"] == "cumsum" else "1.0f"
        return (
            f"    float acc = {start};\n    for (long kf_s = 0; kf_s <= {idx[d]}; ++kf_s) {{\n"
            f"        acc {combine} {call(ins[0], args, at)};\n    }}\n    return acc;"
        )
    if op == "triangle":
        row, col = idx[-2], idx[-1]
        keep = f"{col} - {row} >= {a['diagonal']}" if a["upper"] else f"{col} - {row} <= {a['diagonal']}"
        return f"    return ({keep}) ? {call(ins[0], args, idx)} : 0.0f;"
    if op == "slice":
        d = a["dim"]
        at = idx[:d] + [f"({idx[d]} + {a['start']})"] + idx[d + 1:]
        return f"    return {call(ins[0], args, at)};"
    if op == "fill":
        return f"    return {c_float(a['value'])};"
    if op == "cat":
        d, offsets = a["dim"], a["offsets"]
        lines = []
        for n, (src, lo) in enumerate(zip(ins, offsets)):
            at = idx[:d] + [f"({idx[d]} - {lo})"] + idx[d + 1:]
            read = f"return {call(src, args, at)};"
            if n + 1 < len(ins):
                lines.append(f"    if ({idx[d]} < {offsets[n + 1]}) {{\n        {read}\n    }}")
            else:
                lines.append(f"    {read}")
        return "\n".join(lines)
    if op == "take":
        d = a["dim"]
        at = idx[:d] + [f"(long)({call(ins[1], args, idx)})"] + idx[d:]
        return f"    return {call(ins[0], args, at)};"
    if op == "flip":
        dims = c_dims(shape)
        at = [f"{dims[d]} - 1 - {i}" if d in a["dims"] else i for d, i in enumerate(idx)]
        return f"    return {call(ins[0], args, at)};"
    raise Unsupported(f"no kernel code for `{op}`")


def broadcast_index(src, out, idx):
    offset = len(out) - len(src)
    return ["0" if int(src[d]) == 1 and int(out[d + offset]) != 1 else idx[d + offset] for d in range(len(src))]


def loops(names, bounds, body, indent=1):
    pad = "    " * indent
    opening = "".join(f"{pad}{'    ' * n}for (long {v} = 0; {v} < {b}; ++{v}) {{\n" for n, (v, b) in enumerate(zip(names, bounds)))
    inner = "".join(f"{pad}{'    ' * len(names)}{line}\n" for line in body.split("\n"))
    closing = "".join(f"{pad}{'    ' * n}}}\n" for n in range(len(names) - 1, -1, -1))
    return opening + inner + closing


def reduce_body(src_node, a, shape, args, idx):
    src = TRACE[src_node]["shape"]
    dims = a["dims"]
    src_dims = c_dims(src)
    names = [f"kf_r{d}" for d in dims]
    src_idx = [f"kf_r{d}" if d in dims else idx[d] for d in range(len(src))]
    value = call(src_node, args, src_idx)
    bounds = [src_dims[d] for d in dims]
    count = " * ".join(bounds) or "1"
    kind = a["kind"]
    if kind in ("sum", "mean"):
        text = "    float acc = 0.0f;\n" + loops(names, bounds, f"acc += {value};")
        return text + ("    return acc;" if kind == "sum" else f"    return acc / (float)({count});")
    if kind in ("max", "min"):
        init, fn = ("-INFINITY", "fmax") if kind == "max" else ("INFINITY", "fmin")
        return f"    float acc = {init};\n" + loops(names, bounds, f"acc = {fn}(acc, {value});") + "    return acc;"
    if kind in ("argmax", "argmin"):
        # The first index of the extreme, as torch returns it (a strict comparison).
        init, better = ("-INFINITY", ">") if kind == "argmax" else ("INFINITY", "<")
        step = f"const float kf_v = {value};\nif (kf_v {better} kf_best) {{ kf_best = kf_v; kf_at = {names[0]}; }}"
        return f"    float kf_best = {init};\n    long kf_at = 0;\n" + loops(names, bounds, step) + "    return (float)kf_at;"
    if kind == "logsumexp":
        return (
            "    float kf_m = -INFINITY;\n"
            + loops(names, bounds, f"kf_m = fmax(kf_m, {value});")
            + "    float acc = 0.0f;\n"
            + loops(names, bounds, f"acc += exp({value} - kf_m);")
            + "    return kf_m + log(acc);"
        )
    raise Unsupported(f"reduction {kind}")


def softmax_body(src_node, a, shape, args, idx):
    d = a["dim"]
    bound = c_dims(shape)[d]
    other = list(idx)
    other[d] = "kf_r"
    value = call(src_node, args, other)
    own = call(src_node, args, idx)
    text = (
        f"    float kf_m = -INFINITY;\n    for (long kf_r = 0; kf_r < {bound}; ++kf_r) {{\n        kf_m = fmax(kf_m, {value});\n    }}\n"
        f"    float acc = 0.0f;\n    for (long kf_r = 0; kf_r < {bound}; ++kf_r) {{\n        acc += exp({value} - kf_m);\n    }}\n"
    )
    return text + (f"    return {own} - kf_m - log(acc);" if a["log"] else f"    return exp({own} - kf_m) / acc;")


def conv_body(ins, a, shape, args, idx):
    x_shape, w_shape = TRACE[ins[0]]["shape"], TRACE[ins[1]]["shape"]
    nd = len(shape) - 2
    xd, wd = c_dims(x_shape), c_dims(w_shape)
    st, pad, dil = a["stride"], a["padding"], a["dilation"]
    lines = ["    float acc = 0.0f;"]
    ks = [f"kf_k{i}" for i in range(nd)]
    if a["transposed"]:
        cond, pos = [], []
        for i in range(nd):
            lines.append(f"    (void)0;")
        body_lines = []
        for i in range(nd):
            body_lines.append(f"const long kf_t{i} = i{i + 2} + {pad[i]} - kf_k{i} * {dil[i]};")
            cond.append(f"kf_t{i} >= 0 && kf_t{i} % {st[i]} == 0 && kf_t{i} / {st[i]} < {xd[i + 2]}")
            pos.append(f"kf_t{i} / {st[i]}")
        # Groups: output channel i1 is channel kf_o of group kf_g, which reads the group's
        # input channels kf_g * cin_g + kf_c.
        groups = a["groups"]
        cin_g = f"({xd[1]} / {groups})"
        lines.append(f"    const long kf_g = i1 / {wd[1]};")
        lines.append(f"    const long kf_o = i1 % {wd[1]};")
        x_val = call(ins[0], args, ["i0", f"kf_g * {cin_g} + kf_c"] + pos)
        w_val = call(ins[1], args, [f"kf_g * {cin_g} + kf_c", "kf_o"] + ks)
        body_lines.append(f"if ({' && '.join(cond)}) {{\n    acc += {x_val} * {w_val};\n}}")
        lines.append(loops(["kf_c"] + ks, [cin_g] + wd[2:], "\n".join(body_lines)).rstrip("\n"))
    else:
        groups = a["groups"]
        cin_g = wd[1]
        cout_g = f"({wd[0]} / {groups})"
        lines.append(f"    const long kf_g = i1 / {cout_g};")
        cond, pos = [], []
        body_lines = []
        for i in range(nd):
            body_lines.append(f"const long kf_p{i} = i{i + 2} * {st[i]} - {pad[i]} + kf_k{i} * {dil[i]};")
            cond.append(f"kf_p{i} >= 0 && kf_p{i} < {xd[i + 2]}")
            pos.append(f"kf_p{i}")
        x_val = call(ins[0], args, ["i0", f"kf_g * {cin_g} + kf_c"] + pos)
        w_val = call(ins[1], args, ["i1", "kf_c"] + ks)
        body_lines.append(f"if ({' && '.join(cond)}) {{\n    acc += {x_val} * {w_val};\n}}")
        lines.append(loops(["kf_c"] + ks, [cin_g] + wd[2:], "\n".join(body_lines)).rstrip("\n"))
    if a["bias"]:
        lines.append(f"    acc += {call(ins[2], args, ['i1'])};")
    lines.append("    return acc;")
    return "\n".join(l for l in lines if l.strip() != "(void)0;")


def pool_body(src_node, a, shape, args, idx):
    nd = a["nd"]
    lead = len(shape) - nd
    # The window's sizes as C expressions over the task's sizes (literals where constant).
    ks, st, pad, dil = ([f"(long)({e})" for e in a[name]] for name in ("kernel", "stride", "padding", "dilation"))
    src_dims = c_dims(TRACE[src_node]["shape"])
    positions = [f"const long kf_p{i} = i{lead + i} * {st[i]} - {pad[i]} + kf_k{i} * {dil[i]};" for i in range(nd)]
    value = call(src_node, args, idx[:lead] + [f"kf_p{i}" for i in range(nd)])
    # Padding reads nothing: a window position outside the input is skipped.
    padded = any(e != "0" for e in a["padding"])
    inside = " && ".join(f"kf_p{i} >= 0 && kf_p{i} < {src_dims[lead + i]}" for i in range(nd)) if padded else None
    names = [f"kf_k{i}" for i in range(nd)]
    count = "(float)(" + " * ".join(ks) + ")"
    if a["kind"] == "max":
        step = f"acc = fmax(acc, {value});"
        start, result = "    float acc = -INFINITY;\n", "    return acc;"
    elif a["count_include_pad"] or inside is None:
        step = f"acc += {value};"
        start, result = "    float acc = 0.0f;\n", f"    return acc / {count};"
    else:
        step = f"acc += {value};\nkf_n += 1.0f;"
        start, result = "    float acc = 0.0f;\n    float kf_n = 0.0f;\n", "    return acc / kf_n;"
    guarded = step if inside is None else f"if ({inside}) {{\n    " + step.replace("\n", "\n    ") + "\n}"
    return start + loops(names, ks, "\n".join(positions + [guarded])) + result


def norm_body(ins, a, shape, args, idx):
    kind = a["kind"]
    dims = c_dims(shape)
    rank = len(shape)
    src = ins[0]
    if kind == "batch":
        red = [d for d in range(rank) if d != 1]
        names = [f"kf_r{d}" for d in red]
        src_idx = [f"kf_r{d}" if d in red else idx[d] for d in range(rank)]
        bounds = [dims[d] for d in red]
        channel = "i1"
    elif kind == "instance":
        red = list(range(2, rank))
        names = [f"kf_r{d}" for d in red]
        src_idx = idx[:2] + [f"kf_r{d}" for d in red]
        bounds = [dims[d] for d in red]
        channel = "i1"
    elif kind == "layer":
        red = list(range(rank - a["normalized"], rank))
        names = [f"kf_r{d}" for d in red]
        src_idx = [f"kf_r{d}" if d in red else idx[d] for d in range(rank)]
        bounds = [dims[d] for d in red]
        channel = None
    else:  # group: channels of this element's group, and all of space
        per = f"({dims[1]} / {a['groups']})"
        names = ["kf_rc"] + [f"kf_r{d}" for d in range(2, rank)]
        src_idx = ["i0", f"(i1 / {per}) * {per} + kf_rc"] + [f"kf_r{d}" for d in range(2, rank)]
        bounds = [per] + [dims[d] for d in range(2, rank)]
        channel = "i1"
    count = " * ".join(bounds) or "1"
    value = call(src, args, src_idx)
    text = (
        "    float kf_mean = 0.0f;\n" + loops(names, bounds, f"kf_mean += {value};") + f"    kf_mean /= (float)({count});\n"
        "    float kf_var = 0.0f;\n" + loops(names, bounds, f"const float kf_d = {value} - kf_mean;\nkf_var += kf_d * kf_d;")
        + f"    kf_var /= (float)({count});\n"
        + f"    float kf_y = ({call(src, args, idx)} - kf_mean) / sqrt(kf_var + {c_float(a['eps'])});\n"
    )
    k = 1
    if kind == "layer":
        affine_idx = idx[rank - a["normalized"] :]
    else:
        affine_idx = [channel]
    if a["weight"]:
        text += f"    kf_y *= {call(ins[k], args, affine_idx)};\n"
        k += 1
    if a["bias"]:
        text += f"    kf_y += {call(ins[k], args, affine_idx)};\n"
    return text + "    return kf_y;"
