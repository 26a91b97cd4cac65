"""KernelBench problem analysis for `kf task import-kernelbench` (run by kf in a subprocess).

Reads a JSON request on stdin, prints one JSON object on stdout:
  {"ok": true, ...} or {"ok": false, "error": "..."}.

The problem file is parsed with `ast` (it imports torch, which may be absent); the reference
(the unchanged problem run with torch, or the user's NumPy `<stem>_ref.py`) is run at three small
"probe" size settings to learn the shapes and dtypes of the outputs (and, with torch, of the
model's parameters). Each observed dimension is fitted to an expression over the sizes by the
rule documented in `fit_dim`.
"""
import ast
import copy
import math
import importlib.util
import json
import pathlib
import re
import sys
import traceback

import numpy as np

TORCH_FACTORIES = {
    "rand": "uniform(0, 1)",
    "randn": "normal",
    "ones": "uniform(0, 1)",
    "zeros": "uniform(0, 1)",
    "empty": "uniform(0, 1)",
    "rand_like": "uniform(0, 1)",
    "randint": None,
}
# A size varies across probes when it appears in a get_inputs() shape, or when its declared
# value exceeds this: small constants (kernel_size, stride, a reduced dimension's index) keep
# their declared value, since changing them changes the problem.
SMALL_CONSTANT = 16
# The most input elements the NumPy stand-in for torch runs a problem on (in float64, with
# direct convolutions): KernelBench's own sizes are meant for large GPUs. 32 MiB of f32, the
# size rule's budget, so that every problem the rule fits runs.
STAND_IN_ELEMENTS = 1 << 23


class ImportFailure(Exception):
    """A problem the user must fix; the message is shown as is."""


# ---------------------------------------------------------------- constants and expressions
def const_eval(node, env):
    """Evaluates constant arithmetic over already-known module constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(
        node.value, bool
    ):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -const_eval(node.operand, env)
    if isinstance(node, ast.BinOp):
        a, b = const_eval(node.left, env), const_eval(node.right, env)
        ops = {
            ast.Add: lambda: a + b,
            ast.Sub: lambda: a - b,
            ast.Mult: lambda: a * b,
            ast.FloorDiv: lambda: a // b,
            ast.Div: lambda: a / b,
            ast.Pow: lambda: a**b,
            ast.Mod: lambda: a % b,
        }
        for kind, fn in ops.items():
            if isinstance(node.op, kind):
                return fn()
    raise ValueError("not a constant expression")


def shape_exprs(nodes, sizes, tuples, where):
    """Shape arguments as expressions; `*name` expands a module-level tuple constant."""
    out = []
    for node in nodes:
        if isinstance(node, ast.Starred) and isinstance(node.value, ast.Name) and node.value.id in tuples:
            out.extend(tuples[node.value.id])
        else:
            out.append(shape_expr(node, sizes, where))
    return out


def shape_expr(node, sizes, where):
    """Converts a shape argument to an expression over sizes in kf's syntax (`/` on integers
    is integer division there, like Python's `//`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return str(node.value)
    if isinstance(node, ast.Name):
        if node.id not in sizes:
            raise ImportFailure(f"{where}: shape uses `{node.id}`, which is not a module-level int constant")
        return node.id
    if isinstance(node, ast.BinOp):
        ops = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/"}
        for kind, sym in ops.items():
            if isinstance(node.op, kind):
                left = shape_expr(node.left, sizes, where)
                right = shape_expr(node.right, sizes, where)
                return f"({left} {sym} {right})"
    raise ImportFailure(f"{where}: cannot read the shape expression `{ast.unparse(node)}`")


def eval_shape(exprs, sizes):
    """Evaluates kf shape expressions in Python (integer division)."""
    return tuple(int(eval(e.replace("/", "//"), {"__builtins__": {}}, dict(sizes))) for e in exprs)


# ---------------------------------------------------------------- the problem file
def find_function(tree, name):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def returned_list(func, where):
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, (ast.List, ast.Tuple)):
            return node.value.elts
    raise ImportFailure(f"{where} does not return a list literal")


def torch_call(node):
    """(factory name, call) when node is torch.<factory>(...)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
        and node.func.attr in TORCH_FACTORIES
    ):
        return node.func.attr, node
    return None


def dtype_of(call):
    for kw in call.keywords:
        if kw.arg == "dtype":
            text = ast.unparse(kw.value)
            if text in ("torch.float16", "torch.half"):
                return "f16"
            if text in ("torch.int32", "torch.int", "torch.int64", "torch.long"):
                return "i32"
            if text in ("torch.float32", "torch.float"):
                return "f32"
            raise ImportFailure(f"get_inputs(): dtype {text} is not supported (f32, f16, i32)")
    return None


CASTS = {"float": "f32", "half": "f16", "int": "i32", "long": "i32", "bool": "bool"}

# torch.tril/triu (function or method) of an input: the task's `structure`.
TRIANGLES = {"tril": "lower", "triu": "upper"}


def last_dim_softmax(node):
    """The operand of `X.softmax(dim=-1)`, `torch.softmax(X, dim=-1)` or
    `torch.nn.functional.softmax(X, -1)` (along the last dimension), else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "softmax"):
        return None
    head = ast.unparse(node.func.value)
    is_function = head in ("torch", "F", "torch.nn.functional", "nn.functional")
    operands = node.args[:1] if is_function else [node.func.value]
    rest = node.args[1:] if is_function else node.args
    dims = [literal(a) for a in rest] + [literal(k.value) for k in node.keywords if k.arg == "dim"]
    if len(operands) != 1 or len(dims) != 1 or dims[0] != -1 or any(k.arg not in ("dim",) for k in node.keywords):
        return None
    return operands[0]


def structure_step(node):
    """(structure, operand) when `node` gives its operand a structure: `torch.tril(X)`,
    `X.triu()` (no diagonal offset), `(X + X.T) / 2` (symmetric), or a softmax along the
    last dimension (probability rows); else None."""
    row = last_dim_softmax(node)
    if row is not None:
        return "softmax", row
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TRIANGLES:
        is_torch = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
        operands = node.args[:1] if is_torch else [node.func.value]
        extra = node.args[1:] if is_torch else node.args
        if len(operands) == 1 and not extra and not node.keywords:
            return TRIANGLES[node.func.attr], operands[0]
        return None
    # (X + X.T) / 2, 0.5 * (X + X.T), (X + X.transpose(0, 1)) * 0.5
    half, total = None, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and literal(node.right) == 2:
        total = node.left
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        half = [n for n in (node.left, node.right) if literal(n) == 0.5]
        total = next((n for n in (node.left, node.right) if literal(n) != 0.5), None) if half else None
    if isinstance(total, ast.BinOp) and isinstance(total.op, ast.Add):
        a, b = total.left, total.right
        transposed = lambda t, x: ast.dump(t) in (
            ast.dump(ast.Attribute(value=x, attr="T", ctx=ast.Load())),
            ast.dump(ast.Attribute(value=x, attr="mT", ctx=ast.Load())),
        ) or (
            isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and t.func.attr in ("t", "transpose")
            and ast.dump(t.func.value) == ast.dump(x)
        )
        if isinstance(a, ast.Name) and transposed(b, a):
            return "symmetric", a
        if isinstance(b, ast.Name) and transposed(a, b):
            return "symmetric", b
    return None


def resolve_structure(name, chain, history, where):
    """Follows an input's assignments (`chain`, in order; `history` holds every variable's)
    back to its tensor factory: the expression that holds the factory and the structure
    given on the way (None, "symmetric", "lower", "upper")."""
    structure, at = None, len(chain) - 1
    node = chain[at]
    while True:
        step = structure_step(node)
        if step is None:
            return node, structure
        if structure is not None and structure != step[0]:
            raise ImportFailure(f"{where}: two structures ({structure} and {step[0]}) on one input")
        structure, operand = step
        if not isinstance(operand, ast.Name):
            node = operand
            continue
        if operand.id != name:
            name, chain = operand.id, history.get(operand.id, [])
            at = len(chain)
        at -= 1
        if at < 0:
            raise ImportFailure(f"{where}: `{operand.id}` is not assigned before it is used")
        node = chain[at]


def input_spec(elt, assigned, sizes, tuples, specs, forward_args, index):
    """One get_inputs() element as {name, dtype, shape, init | int_bounds, bool}."""
    name = forward_args[index] if index < len(forward_args) else f"in{index}"
    where = f"get_inputs() element {index} (`{ast.unparse(elt)}`)"
    if isinstance(elt, ast.Name) and elt.id in assigned:
        node, structure = resolve_structure(elt.id, assigned[elt.id], assigned, where)
    else:
        node, structure = resolve_structure(None, [elt], assigned, where)
    number = literal(node)
    if isinstance(number, (int, float)) and not isinstance(number, bool) and structure is None:
        # A Python number (`s = 3.14`): a constant forward() argument, the task's scalar;
        # an int stays an int for forward() (a dimension, an exponent).
        return {"name": name, "constant": number}
    # The tensor factory may be wrapped: `torch.rand(...) * scale`, `torch.randint(...).float()`.
    found = next((f for f in map(torch_call, ast.walk(node)) if f is not None), None)
    cast = next(
        (
            CASTS[n.func.attr]
            for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CASTS and not n.args
        ),
        None,
    )
    if found is None:
        raise ImportFailure(f"{where}: only torch.rand/randn/randint/ones/zeros/empty tensors are understood")
    factory, call = found
    args = list(call.args)
    spec = {"name": name, "bool": cast == "bool"}
    if structure is not None:
        spec["structure"] = structure
    if factory == "randint":
        # torch.randint(low, high, size) or torch.randint(high, size); the bounds may be sizes.
        if len(args) == 3:
            lo, hi, shape_node = args
        elif len(args) == 2:
            lo, (hi, shape_node) = ast.Constant(0), args
        else:
            raise ImportFailure(f"{where}: torch.randint needs (low, high, size)")
        shape_nodes = shape_node.elts if isinstance(shape_node, (ast.Tuple, ast.List)) else [shape_node]
        bounds = [shape_expr(lo, sizes, where), f"{shape_expr(hi, sizes, where)} - 1"]
        # A bool mask (`torch.randint(0, 2, shape).bool()`) multiplies floats: 0/1 floats.
        dtype = "f32" if cast == "bool" else cast or "i32"
        spec.update(dtype=dtype, int_bounds=bounds)
    else:
        shape_nodes = args[0].elts if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) else args
        dtype = "f32" if cast == "bool" else cast
        spec.update(dtype=dtype or dtype_of(call) or "f32", init=TORCH_FACTORIES[factory])
    if (
        len(shape_nodes) == 1
        and isinstance(shape_nodes[0], ast.Attribute)
        and shape_nodes[0].attr == "shape"
        and isinstance(shape_nodes[0].value, ast.Name)
        and shape_nodes[0].value.id in specs
    ):
        # `torch.randint(0, 2, x.shape)`: the shape of an earlier input.
        shape = list(specs[shape_nodes[0].value.id]["shape"])
    else:
        shape = shape_exprs(shape_nodes, sizes, tuples, where)
    if not shape:
        raise ImportFailure(f"{where}: a scalar input is not supported")
    spec["shape"] = shape
    return spec


def analyze(path):
    source = open(path, encoding="utf-8").read()
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise ImportFailure(f"{path}: syntax error at line {e.lineno}: {e.msg}")
    sizes, scalars, env, tuples = {}, {}, {}, {}
    body = []
    for node in tree.body:
        # `height = width = 128` and `height, width = 128, 128`: one assignment per name.
        if isinstance(node, ast.Assign) and len(node.targets) > 1 and all(isinstance(t, ast.Name) for t in node.targets):
            body.extend(ast.Assign(targets=[t], value=node.value) for t in node.targets)
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(node.targets[0].elts) == len(node.value.elts)
            and all(isinstance(t, ast.Name) for t in node.targets[0].elts)
        ):
            body.extend(ast.Assign(targets=[t], value=v) for t, v in zip(node.targets[0].elts, node.value.elts))
        else:
            body.append(node)
    for node in body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Tuple)
        ):
            # `input_shape = (num_classes,)` or `(4096,)`: each element is a size expression;
            # a literal element becomes a size of its own, `<name>_<i>`.
            name, elements = node.targets[0].id, []
            for i, elt in enumerate(node.value.elts):
                if isinstance(elt, ast.Name) and elt.id in sizes:
                    elements.append(elt.id)
                    continue
                try:
                    value = const_eval(elt, env)
                except (ValueError, ZeroDivisionError):
                    elements = None
                    break
                if not isinstance(value, int):
                    elements = None
                    break
                sizes[f"{name}_{i}"] = env[f"{name}_{i}"] = value
                elements.append(f"{name}_{i}")
            if elements is not None:
                tuples[name] = elements
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = const_eval(node.value, env)
            except (ValueError, ZeroDivisionError):
                continue
            name = node.targets[0].id
            env[name] = value
            # Sizes are positive; other ints (`hardtanh_min = -1`) are scalars.
            if isinstance(value, int) and value > 0:
                sizes[name] = value
            else:
                scalars[name] = value
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        raise ImportFailure(f"{path}: no `class Model`")
    forward = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        raise ImportFailure(f"{path}: Model has no forward()")
    forward_args = [a.arg for a in forward.args.args[1:]]
    get_inputs = find_function(tree, "get_inputs")
    if get_inputs is None or find_function(tree, "get_init_inputs") is None:
        raise ImportFailure(f"{path}: get_inputs() and get_init_inputs() are both required")
    # Every assignment of each name, in order (`A = torch.rand(N, N)`, then `A = torch.tril(A)`).
    assigned = {}
    for node in ast.walk(get_inputs):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node.value)
    inputs, by_variable, input_order, constants = [], {}, [], {}
    for i, elt in enumerate(returned_list(get_inputs, "get_inputs()")):
        spec = input_spec(elt, assigned, sizes, tuples, by_variable, forward_args, i)
        input_order.append(spec["name"])
        if "constant" in spec:
            if spec["name"] in sizes or spec["name"] in scalars:
                raise ImportFailure(f"get_inputs() element {i} (`{spec['name']}`) has the name of a module constant")
            constants[spec["name"]] = spec["constant"]
            scalars[spec["name"]] = float(spec["constant"])
            continue
        inputs.append(spec)
        if isinstance(elt, ast.Name):
            by_variable[elt.id] = spec
    description = ast.get_docstring(model) or ""
    accumulates = accumulation_length(tree, model, forward, forward_args, inputs, env)
    try:
        family = recognise_family(forward, inputs, env, held_modules(tree, model), sizes)
    except (ValueError, TypeError, ArithmeticError, RecursionError):
        # The family is optional: a forward() the recogniser misreads imports without one.
        family = None
    return {
        "accumulates": accumulates,
        "family": family,
        "sizes": sizes,
        "tuples": tuples,
        "scalars": scalars,
        "inputs": inputs,
        # forward()'s arguments in order: the inputs' buffers and the constants among them.
        "input_order": input_order,
        "constants": constants,
        "description": " ".join(description.split()),
    }


# ---------------------------------------------------------------- accumulating outputs
ACCUMULATING = {"cumsum", "sum", "mean"}
PRODUCTS = {"matmul", "mm", "bmm"}


def init_attributes(tree, model, env):
    """`self.name = parameter` assignments of Model.__init__, valued from get_init_inputs()."""
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    get_init = find_function(tree, "get_init_inputs")
    if init is None or get_init is None:
        return {}
    params = [a.arg for a in init.args.args[1:]]
    try:
        values = [const_eval(e, env) for e in returned_list(get_init, "get_init_inputs()")]
    except (ImportFailure, ValueError, ZeroDivisionError):
        return {}
    by_param = dict(zip(params, values))
    attrs = {}
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and isinstance(node.targets[0].value, ast.Name)
            and node.targets[0].value.id == "self"
            and isinstance(node.value, ast.Name)
            and node.value.id in by_param
        ):
            attrs[node.targets[0].attr] = by_param[node.value.id]
    return attrs


def accumulation_length(tree, model, forward, forward_args, inputs, env):
    """The number of terms each output element sums, as a size expression, when forward()
    is a scan or reduction over one dimension of an input (torch.cumsum / sum / mean with a
    `dim`) or a matrix product (torch.matmul / mm / bmm, `@`): the task file's `accumulates`
    (the evaluator's accumulation rule). None when forward() is neither, or is not understood."""
    attrs = init_attributes(tree, model, env)
    shapes = {spec["name"]: spec["shape"] for spec in inputs}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = value(node.operand)
            return None if inner is None else -inner
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return attrs.get(node.attr)
        if isinstance(node, ast.Name):
            return env.get(node.id)
        return None

    def operand(node):
        """The forward() argument a tensor expression is computed from (the first found)."""
        return next((n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in shapes), None)

    def dim_of(shape, dim):
        if not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
            return None
        return shape[dim]

    for node in ast.walk(forward):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            name = operand(node.left)
            return dim_of(shapes[name], -1) if name else None
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        is_torch = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
        if method in PRODUCTS and is_torch and node.args:
            name = operand(node.args[0])
            return dim_of(shapes[name], -1) if name else None
        if method in ACCUMULATING:
            # torch.cumsum(x, dim) or x.cumsum(dim): the tensor, then the dim.
            tensor = node.args[0] if is_torch and node.args else node.func.value
            positional = node.args[1:] if is_torch else node.args
            dim_node = next((k.value for k in node.keywords if k.arg == "dim"), None)
            if dim_node is None and positional:
                dim_node = positional[0]
            name = operand(tensor)
            if dim_node is None or name is None:
                return None
            return dim_of(shapes[name], value(dim_node))
    return None


# ---------------------------------------------------------------- operator families
# Element-wise operations (torch.<op>, torch.nn.functional.<op>, x.<op>()): a forward() made of
# these and arithmetic on one tensor is a map.
ELEMENTWISE = {
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid",
    "tanh", "hardtanh", "hardsigmoid", "hardswish", "softplus", "softsign", "logsigmoid",
    "tanhshrink", "softshrink", "hardshrink", "threshold", "exp", "log", "abs", "sqrt", "rsqrt",
    "pow", "clamp", "neg", "erf", "sin", "cos", "square", "reciprocal", "sign",
}
ROW_NORMS = {"softmax": "softmax", "log_softmax": "log_softmax"}
ROW_REDUCTIONS = {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod"}


def call_name(node):
    """`relu` for torch.relu(x), F.relu(x), torch.nn.functional.relu(x) and x.relu()."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def recognise_family(forward, inputs, env, modules=None, sizes=None):
    """The operator family of a forward() that returns one expression over its inputs: a
    matrix product (torch.matmul / mm, `@`, with `.T` transposes), a softmax over the last
    dimension (row_norm), a reduction or cumsum over the last dimension (row_reduce, scan), an
    element-wise map of one tensor, or one of the model's modules applied to an input (see
    `module_family`: `modules` as `held_modules` reads them, `sizes` the problem's). The
    output's name is left to the importer (`$out`). None when forward() is none of these or is
    not understood."""
    returns = [n for n in forward.body if isinstance(n, ast.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    expr = returns[0].value
    # Dimensions as size expressions; literal ones as integers (a matrix-vector product's 1).
    shapes = {
        spec["name"]: [int(d) if str(d).isdigit() else str(d) for d in spec["shape"]] for spec in inputs
    }
    float_inputs = [spec["name"] for spec in inputs if spec.get("dtype", "f32") == "f32"]

    # `self.ln(x)`: the family of the module the model holds.
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and isinstance(expr.func.value, ast.Name)
        and expr.func.value.id == "self"
        and len(expr.args) == 1
        and not expr.keywords
        and isinstance(expr.args[0], ast.Name)
        and expr.args[0].id in float_inputs
    ):
        held = (modules or {}).get(expr.func.attr)
        if held is None:
            return None
        return module_family(expr.func.attr, held, expr.args[0].id, shapes[expr.args[0].id], sizes or {}, env)

    norm = expression_norm(inline_locals(forward, expr, modules or {}), shapes, float_inputs, env)
    if norm is not None:
        return norm

    def factor(node):
        """(input name, transposed) for `A`, `A.T`, `A.t()`, `A.transpose(0, 1)`."""
        if isinstance(node, ast.Name) and node.id in shapes:
            return node.id, False
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(node.value, ast.Name):
            return (node.value.id, True) if node.value.id in shapes else None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("t", "transpose")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in shapes
        ):
            return node.func.value.id, True
        return None

    def matmul(a_node, b_node):
        a, b = factor(a_node), factor(b_node)
        if a is None or b is None:
            return None
        (a, ta), (b, tb) = a, b
        sa, sb = shapes[a], shapes[b]
        if len(sa) != 2 or len(sb) not in (1, 2):
            return None
        m, k = (sa[1], sa[0]) if ta else (sa[0], sa[1])
        if len(sb) == 1:
            n = 1
        else:
            n = sb[0] if tb else sb[1]
        return {"kind": "matmul", "a": a, "b": b, "c": "$out", "m": m, "n": n, "k": k,
                "transpose_a": ta, "transpose_b": tb}

    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.MatMult):
        return matmul(expr.left, expr.right)
    name = call_name(expr)
    if name in ("matmul", "mm") and len(expr.args) == 2:
        return matmul(expr.args[0], expr.args[1])

    def last_dim(node, shape):
        """Whether the `dim` of a call is the last dimension of `shape`."""
        dim = next((k.value for k in node.keywords if k.arg == "dim"), None)
        is_method = not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "F"))
        positional = node.args if is_method else node.args[1:]
        if dim is None and positional:
            dim = positional[0]
        try:
            d = const_eval(dim, env) if dim is not None else None
        except (ValueError, ZeroDivisionError):
            return False
        return isinstance(d, int) and d in (-1, len(shape) - 1)

    def tensor_of(node):
        is_method = not (isinstance(node.func.value, ast.Name) and node.func.value.id in ("torch", "F", "nn"))
        if is_method:
            target = node.func.value
        else:
            target = node.args[0] if node.args else None
        return target.id if isinstance(target, ast.Name) and target.id in shapes else None

    def rows(shape):
        leading = [str(d) if str(d).isidentifier() or isinstance(d, int) else f"({d})" for d in shape[:-1]]
        return {"rows": " * ".join(leading) if leading else 1, "length": shape[-1]}

    if name is not None:
        x = tensor_of(expr)
        if x is not None and x in float_inputs:
            shape = shapes[x]
            if name in ROW_NORMS and last_dim(expr, shape):
                return {"kind": "row_norm", "input": x, "output": "$out", **rows(shape), "op": ROW_NORMS[name]}
            keepdim = any(k.arg == "keepdim" for k in expr.keywords)
            if name in ROW_REDUCTIONS and last_dim(expr, shape) and not keepdim:
                return {"kind": "row_reduce", "input": x, "output": "$out", **rows(shape), "op": name}
            if name == "cumsum" and last_dim(expr, shape):
                return {"kind": "scan", "input": x, "output": "$out", **rows(shape), "op": "cumsum"}

    # A map: every call element-wise, every tensor the same single input.
    names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id in shapes}
    calls = [call_name(n) for n in ast.walk(expr) if isinstance(n, ast.Call)]
    if len(names) == 1 and len(inputs) == 1 and calls and all(c in ELEMENTWISE for c in calls):
        (x,) = names
        if x in float_inputs:
            family = {"kind": "map", "input": x, "output": "$out"}
            # The operation's name where the whole expression is one call (relu(x)).
            if call_name(expr):
                family["op"] = call_name(expr)
            c_expr = map_expression(expr, x, env)
            if c_expr is not None:
                family["expr"] = c_expr
            return family
    return None


# ---------------------------------------------------------------- modules held by the model
# The torch.nn modules whose family the importer recognises: their parameters in positional
# order, and PyTorch's defaults for those the constructor may leave out.
CONV_PARAMETERS = ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups",
                   "bias", "padding_mode")
CONV_DEFAULTS = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": True, "padding_mode": "zeros"}
INSTANCE_NORM = (("num_features", "eps", "momentum", "affine", "track_running_stats"),
                 {"eps": 1e-5, "momentum": 0.1, "affine": False, "track_running_stats": False})
MODULE_SIGNATURES = {
    "Conv1d": (CONV_PARAMETERS, CONV_DEFAULTS),
    "Conv2d": (CONV_PARAMETERS, CONV_DEFAULTS),
    "LayerNorm": (("normalized_shape", "eps", "elementwise_affine", "bias"),
                  {"eps": 1e-5, "elementwise_affine": True, "bias": True}),
    # eps None: the input dtype's machine epsilon (f32 here).
    "RMSNorm": (("normalized_shape", "eps", "elementwise_affine"),
                {"eps": None, "elementwise_affine": True}),
    "InstanceNorm1d": INSTANCE_NORM,
    "InstanceNorm2d": INSTANCE_NORM,
    "InstanceNorm3d": INSTANCE_NORM,
}
F32_EPSILON = float(np.finfo(np.float32).eps)
# The kind `held_modules` gives an attribute that holds a plain value, not a module.
VALUE = "="


class _Substitute(ast.NodeTransformer):
    """Replaces the names of __init__'s parameters by the expressions they are called with."""

    def __init__(self, values):
        self.values = values

    def visit_Name(self, node):
        return self.values.get(node.id, node)


def held_modules(tree, model):
    """The torch.nn modules of MODULE_SIGNATURES that Model.__init__ assigns to attributes
    (`self.ln = nn.LayerNorm(normalized_shape=normalized_shape)`), by attribute: (class name,
    {parameter: expression}), each expression over the module-level constants (the model's
    parameters replaced by get_init_inputs()' elements, or by their defaults in __init__), and
    PyTorch's defaults as constants. A parameter with no known value is left out. Plain values
    (`self.eps = eps`) are there too, as (VALUE, {"value": expression})."""
    init = next((n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    get_init = find_function(tree, "get_init_inputs")
    if init is None or get_init is None:
        return {}
    try:
        given = returned_list(get_init, "get_init_inputs()")
    except ImportFailure:
        return {}
    params = init.args.args[1:]
    defaults = [None] * (len(params) - len(init.args.defaults)) + list(init.args.defaults)
    # Elements after a `*rest` in get_init_inputs() have unknown positions.
    starred = next((i for i, e in enumerate(given) if isinstance(e, ast.Starred)), None)
    values = {}
    for i, (param, default) in enumerate(zip(params, defaults)):
        if i < len(given) and (starred is None or i < starred):
            values[param.arg] = given[i]
        elif i >= len(given) and starred is None and default is not None:
            values[param.arg] = default
    for param, default in zip(init.args.kwonlyargs, init.args.kw_defaults):
        if default is not None:
            values[param.arg] = default
    substitute = _Substitute(values)
    unknown = {p.arg for p in params + init.args.kwonlyargs} - set(values)
    for extra in (init.args.vararg, init.args.kwarg):
        if extra is not None:
            unknown.add(extra.arg)
    # An attribute assigned more than once (in branches, say) has no single value.
    assigned = [
        n.targets[0].attr
        for n in ast.walk(init)
        if isinstance(n, ast.Assign)
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Attribute)
        and isinstance(n.targets[0].value, ast.Name)
        and n.targets[0].value.id == "self"
    ]
    modules = {}
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
            node.targets[0], ast.Attribute
        ) and assigned.count(node.targets[0].attr) > 1:
            continue
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and isinstance(node.targets[0].value, ast.Name)
            and node.targets[0].value.id == "self"
            and not isinstance(node.value, ast.Call)
            and not any(isinstance(n, ast.Name) and n.id in unknown for n in ast.walk(node.value))
        ):
            # `self.eps = eps`: a plain value (VALUE), as an expression over the constants.
            modules[node.targets[0].attr] = (VALUE, {"value": substitute.visit(copy.deepcopy(node.value))})
            continue
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and isinstance(node.targets[0].value, ast.Name)
            and node.targets[0].value.id == "self"
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and ast.unparse(node.value.func.value) in ("nn", "torch.nn")
            and node.value.func.attr in MODULE_SIGNATURES
        ):
            continue
        call = node.value
        names, module_defaults = MODULE_SIGNATURES[call.func.attr]
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            continue
        bound = {name: ast.Constant(value) for name, value in module_defaults.items()}
        bound.update(zip(names, call.args))
        bound.update((k.arg, k.value) for k in call.keywords)
        arguments = {}
        for name, arg in bound.items():
            # An argument that uses a parameter of __init__ nothing gives a value is left out.
            if not any(isinstance(n, ast.Name) and n.id in unknown for n in ast.walk(arg)):
                arguments[name] = substitute.visit(copy.deepcopy(arg))
        modules[node.targets[0].attr] = (call.func.attr, arguments)
    return modules


def literal(node):
    """The Python value of a literal (a number, string, bool, None, or a tuple of them)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNKNOWN


_UNKNOWN = object()


def elements(node):
    """A module argument that may be an int or a tuple (`kernel_size=(3, 3)`, `(features, dim1,
    dim2)`): its elements."""
    return list(node.elts) if isinstance(node, (ast.Tuple, ast.List)) else [node]


def family_size(node, sizes):
    """A module argument as a family size: an int literal, else an expression over the sizes
    (a module-level constant that is a size, `features * 2`); None otherwise."""
    value = literal(node)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        text = shape_expr(node, sizes, "module argument")
    except ImportFailure:
        return None
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def size_value(expr, sizes):
    """The value of a family size at the problem's sizes, or None."""
    try:
        return eval_shape([str(expr)], sizes)[0]
    except Exception:  # noqa: BLE001 - an expression over names that are not sizes
        return None


def product(dims):
    """The product of dimensions as one family size: 1, a dimension, or `a * (b + 1) * c`."""
    if not dims:
        return 1
    if len(dims) == 1:
        return dims[0]
    return " * ".join(str(d) if isinstance(d, int) or str(d).isidentifier() else f"({d})" for d in dims)


def module_family(attr, held, x, shape, sizes, env):
    """The family of `self.<attr>(x)` for the module `held` (from `held_modules`) applied to the
    input `x` of `shape`; its parameters are named as the importer names the model's parameters
    (`<attr>_weight`, `<attr>_bias`). Recognised: nn.Conv1d (groups 1, zero padding) and a 1×1
    nn.Conv2d (stride 1, no padding, groups 1: a 1-D convolution of kernel size 1 over the
    flattened image) as conv1d; nn.LayerNorm over the trailing dimensions and nn.InstanceNorm
    (a layer norm of each channel's elements) as row_norm `layer_norm`, nn.RMSNorm as row_norm
    `rms_norm`. None for anything else, or where an argument is not known."""
    kind, args = held
    value = lambda name: literal(args[name]) if name in args else _UNKNOWN  # noqa: E731

    def matches(expr, dim):
        """Whether a module's size agrees with the input's dimension at the problem's sizes."""
        v = size_value(expr, sizes)
        return v is not None and v == size_value(dim, sizes)

    if kind in ("Conv1d", "Conv2d"):
        spatial = 1 if kind == "Conv1d" else 2
        if len(shape) != 2 + spatial or value("groups") != 1 or value("padding_mode") != "zeros":
            return None
        if not isinstance(value("bias"), bool) or any(
            n not in args for n in ("in_channels", "out_channels", "kernel_size")
        ):
            return None
        in_channels = family_size(args["in_channels"], sizes)
        out_channels = family_size(args["out_channels"], sizes)
        if in_channels is None or out_channels is None or not matches(in_channels, shape[1]):
            return None
        family = {"kind": "conv1d", "input": x, "weight": f"{attr}_weight", "output": "$out"}
        if value("bias"):
            family["bias"] = f"{attr}_bias"
        family.update(batch=shape[0], in_channels=in_channels, out_channels=out_channels)
        if kind == "Conv1d":
            # Each of kernel_size, stride, dilation, padding: an int or a 1-tuple.
            fields = {}
            for name in ("kernel_size", "stride", "dilation", "padding"):
                parts = elements(args[name])
                if len(parts) != 1:
                    return None
                if name == "padding" and literal(parts[0]) == "valid":
                    fields[name] = 0
                    continue
                fields[name] = family_size(parts[0], sizes)
                if fields[name] is None:
                    return None
            family.update(length=shape[2], kernel_size=fields["kernel_size"])
            # PyTorch's defaults are left out, as a user writes the table.
            for name, default in (("stride", 1), ("dilation", 1), ("padding", 0)):
                if fields[name] != default:
                    family[name] = fields[name]
            return family
        # A pointwise 2-D convolution: every output pixel is a product of the channels at that
        # pixel, which is a 1-D convolution of kernel size 1 over height * width.
        square = lambda name, want: value(name) in (want, (want, want), [want, want])  # noqa: E731
        if not (square("kernel_size", 1) and square("stride", 1) and (
            square("padding", 0) or value("padding") in ("valid", "same")
        )):
            return None
        family.update(length=product(shape[2:]), kernel_size=1)
        return family

    if kind in ("LayerNorm", "RMSNorm"):
        if "normalized_shape" not in args:
            return None
        normalized = [family_size(e, sizes) for e in elements(args["normalized_shape"])]
        if not normalized or len(normalized) > len(shape) or None in normalized:
            return None
        leading, trailing = shape[: len(shape) - len(normalized)], shape[len(shape) - len(normalized):]
        if not all(matches(n, d) for n, d in zip(normalized, trailing)):
            return None
        eps = F32_EPSILON if value("eps") is None else number(args.get("eps"), env)
        affine = value("elementwise_affine")
        if eps is None or not isinstance(affine, bool):
            return None
        op = "layer_norm" if kind == "LayerNorm" else "rms_norm"
        family = {"kind": "row_norm", "input": x, "output": "$out", "rows": product(leading),
                  "length": product(trailing), "op": op}
        if affine:
            family["weight"] = f"{attr}_weight"
            if kind == "LayerNorm":
                has_bias = value("bias")
                if not isinstance(has_bias, bool):
                    return None
                if has_bias:
                    family["bias"] = f"{attr}_bias"
        family["eps"] = eps
        return family

    if kind.startswith("InstanceNorm"):
        # Each (sample, channel) normalised over its spatial elements, which are contiguous:
        # a layer norm of rows batch * channels; an affine instance norm's weight is per
        # channel, not per element of a row, and running statistics change the operator.
        spatial = int(kind[-2])
        if len(shape) != 2 + spatial or value("affine") is not False or value("track_running_stats") is not False:
            return None
        features = family_size(args["num_features"], sizes) if "num_features" in args else None
        eps = number(args.get("eps"), env)
        if features is None or not matches(features, shape[1]) or eps is None:
            return None
        return {"kind": "row_norm", "input": x, "output": "$out", "rows": product(shape[:2]),
                "length": product(shape[2:]), "op": "layer_norm", "eps": eps}
    return None


# ---------------------------------------------------------------- norms written as expressions
def inline_locals(forward, expr, modules):
    """forward()'s returned expression with its local variables (each assigned once, at the top
    level of forward()) written out, and the model's plain values (`self.eps`) replaced by
    theirs: `rms = torch.sqrt(...); return x / rms` becomes `x / torch.sqrt(...)`."""
    assigned, count = {}, {}
    for node in ast.walk(forward):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    count[n.id] = count.get(n.id, 0) + 1
    for node in forward.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value

    class Inline(ast.NodeTransformer):
        def __init__(self, depth):
            self.depth = depth

        def visit_Name(self, node):
            if node.id in assigned and count.get(node.id) == 1 and self.depth < 8:
                return Inline(self.depth + 1).visit(copy.deepcopy(assigned[node.id]))
            return node

        def visit_Attribute(self, node):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                kind, args = modules.get(node.attr, (None, {}))
                if kind == VALUE:
                    return copy.deepcopy(args["value"])
            return self.generic_visit(node)

    return Inline(0).visit(copy.deepcopy(expr))


def expression_norm(expr, shapes, float_inputs, env):
    """A normalisation written as an expression over one input x, along one dimension `d`
    (keepdim): `x / torch.sqrt(torch.mean(x ** 2, dim=d, keepdim=True) + eps)` an RMS norm,
    `x / torch.norm(x, p=2, dim=d, keepdim=True)` an L2 norm, `x / torch.sum(torch.abs(x),
    dim=d, keepdim=True)` an L1 norm (squares also as `x * x`, `x.pow(2)`, `torch.square(x)`;
    the calls also as methods of x). A row_norm family, with `inner` where `d` is not the last
    dimension; None for anything else."""
    if not (isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div) and isinstance(expr.left, ast.Name)):
        return None
    x = expr.left.id
    if x not in float_inputs:
        return None
    shape = shapes[x]

    def is_x(node):
        return isinstance(node, ast.Name) and node.id == x

    def call(node, names):
        """(operand, call) for torch.<name>(operand, ...), torch.linalg.<name>(operand, ...) or
        operand.<name>(...); None otherwise."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names):
            return None
        if ast.unparse(node.func.value) in ("torch", "torch.linalg"):
            return (node.args[0], node) if node.args else None
        return node.func.value, node

    def argument(node, name, position):
        """A call's argument by keyword, else by position (after the operand of a function)."""
        is_function = ast.unparse(node.func.value) in ("torch", "torch.linalg")
        found = next((k.value for k in node.keywords if k.arg == name), None)
        index = position + (1 if is_function else 0)
        if found is None and len(node.args) > index:
            found = node.args[index]
        return found

    def squares(node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            return is_x(node.left) and number(node.right, env) == 2
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return is_x(node.left) and is_x(node.right)
        found = call(node, ("pow",))
        if found is not None:
            return is_x(found[0]) and number(argument(found[1], "exponent", 0), env) == 2
        found = call(node, ("square",))
        return found is not None and is_x(found[0])

    def reduced_dim(node):
        """The dimension a keepdim reduction runs over (dim at position 0 after the operand)."""
        keepdim = next((k.value for k in node.keywords if k.arg == "keepdim"), None)
        dim = argument(node, "dim", 0)
        if dim is None or not (isinstance(keepdim, ast.Constant) and keepdim.value is True):
            return None
        d = number(dim, env)
        if d is None or d != int(d) or not -len(shape) <= int(d) < len(shape):
            return None
        return int(d) % len(shape)

    divisor, op, eps, d = expr.right, None, None, None
    sqrt = call(divisor, ("sqrt",))
    if sqrt is not None and isinstance(sqrt[0], ast.BinOp) and isinstance(sqrt[0].op, ast.Add):
        mean = call(sqrt[0].left, ("mean",))
        eps = number(sqrt[0].right, env)
        if mean is not None and squares(mean[0]) and eps is not None:
            op, d = "rms_norm", reduced_dim(mean[1])
    norm = call(divisor, ("norm", "vector_norm"))
    if norm is not None and is_x(norm[0]):
        p = argument(norm[1], "p" if norm[1].func.attr == "norm" else "ord", 0)
        if p is None or number(p, env) == 2:
            # torch.norm(x, p, dim, keepdim): dim is the second argument after x.
            dim = argument(norm[1], "dim", 1)
            keepdim = next((k.value for k in norm[1].keywords if k.arg == "keepdim"), None)
            if dim is not None and isinstance(keepdim, ast.Constant) and keepdim.value is True:
                d = number(dim, env)
                if d is not None and d == int(d) and -len(shape) <= int(d) < len(shape):
                    op, d = "l2_norm", int(d) % len(shape)
    total = call(divisor, ("sum",))
    if total is not None:
        absolute = call(total[0], ("abs",))
        if absolute is not None and is_x(absolute[0]):
            op, d = "l1_norm", reduced_dim(total[1])
    if op is None or d is None:
        return None
    family = {"kind": "row_norm", "input": x, "output": "$out", "rows": product(shape[:d] + shape[d + 1:]),
              "length": shape[d]}
    if d != len(shape) - 1:
        family["inner"] = product(shape[d + 1:])
    family["op"] = op
    if eps is not None:
        family["eps"] = eps
    return family


# ---------------------------------------------------------------- a map as an OpenCL C expression
MATH_CONSTANTS = {"pi": math.pi, "e": math.e}
MATH_FUNCTIONS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "tanh": math.tanh}


def number(node, env):
    """A constant of the expression (literals, module constants, math.pi, math.sqrt(2 / math.pi)),
    or None."""
    try:
        return float(const_eval(node, env))
    except (ValueError, ZeroDivisionError, TypeError):
        pass
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math":
        return MATH_CONSTANTS.get(node.attr)
    if isinstance(node, ast.BinOp):
        a, b = number(node.left, env), number(node.right, env)
        if a is None or b is None:
            return None
        env2 = {"a": a, "b": b}
        return float(const_eval(ast.BinOp(ast.Name("a"), node.op, ast.Name("b")), env2))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = number(node.operand, env)
        return None if v is None else -v
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "math"
        and node.func.attr in MATH_FUNCTIONS
        and len(node.args) == 1
    ):
        v = number(node.args[0], env)
        return None if v is None else MATH_FUNCTIONS[node.func.attr](v)
    return None


def c_float(v):
    """A float literal of OpenCL C (`0.5f`)."""
    text = repr(float(v))
    return text + "f" if ("." in text or "e" in text) else text + ".0f"


def map_expression(expr, x, env):
    """forward()'s element-wise expression over the tensor `x` as one OpenCL C expression in
    which `x` stands for one element (the task file's `[family] expr`), valid for float vectors
    too; None where an operation is not translated."""

    def kwarg(call, name, position, default):
        node = next((k.value for k in call.keywords if k.arg == name), None)
        if node is None and len(call.args) > position:
            node = call.args[position]
        if node is None:
            return default
        return number(node, env)

    def tr(node):
        if isinstance(node, ast.Name) and node.id == x:
            return x
        v = number(node, env)
        if v is not None:
            return c_float(v)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            a = tr(node.operand)
            return None if a is None else f"-({a})"
        if isinstance(node, ast.BinOp):
            a, b = tr(node.left), tr(node.right)
            if a is None or b is None:
                return None
            symbol = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(node.op))
            if symbol is not None:
                return f"({a} {symbol} {b})"
            if isinstance(node.op, ast.Pow):
                return power(a, number(node.right, env), b)
            return None
        name = call_name(node)
        if name is None:
            return None
        # torch.relu(x), F.relu(x), torch.nn.functional.relu(x) are functions; x.relu() a method.
        root = node.func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        is_method = not (isinstance(root, ast.Name) and root.id in ("torch", "F", "nn"))
        operand = node.func.value if is_method else (node.args[0] if node.args else None)
        if operand is None:
            return None
        a = tr(operand)
        if a is None:
            return None
        first = 0 if is_method else 1  # position of the first argument after the tensor
        simple = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf",
                  "sin": "sin", "cos": "cos", "tanh": "tanh", "abs": "fabs"}
        if name in simple:
            return f"{simple[name]}({a})"
        if name == "relu":
            return f"fmax({a}, 0.0f)"
        if name == "relu6":
            return f"clamp({a}, 0.0f, 6.0f)"
        if name == "sigmoid":
            return f"(1.0f / (1.0f + exp(-({a}))))"
        if name == "silu":
            return f"({a} / (1.0f + exp(-({a}))))"
        if name == "gelu":
            approximate = next((k.value for k in node.keywords if k.arg == "approximate"), None)
            if approximate is None or (isinstance(approximate, ast.Constant) and approximate.value == "none"):
                return f"(0.5f * {a} * (1.0f + erf({a} * 0.7071067811865476f)))"
            return None
        if name == "leaky_relu":
            slope = kwarg(node, "negative_slope", first, 0.01)
            return None if slope is None else f"(fmax({a}, 0.0f) + {c_float(slope)} * fmin({a}, 0.0f))"
        if name == "elu":
            alpha = kwarg(node, "alpha", first, 1.0)
            if alpha is None or alpha <= 0:
                return None
            return f"(fmax({a}, 0.0f) + fmin({c_float(alpha)} * (exp({a}) - 1.0f), 0.0f))"
        if name == "hardtanh":
            lo, hi = kwarg(node, "min_val", first, -1.0), kwarg(node, "max_val", first + 1, 1.0)
            return None if lo is None or hi is None else f"clamp({a}, {c_float(lo)}, {c_float(hi)})"
        if name == "hardsigmoid":
            return f"clamp({a} / 6.0f + 0.5f, 0.0f, 1.0f)"
        if name == "hardswish":
            return f"({a} * clamp({a} / 6.0f + 0.5f, 0.0f, 1.0f))"
        if name == "softsign":
            return f"({a} / (1.0f + fabs({a})))"
        if name == "tanhshrink":
            return f"({a} - tanh({a}))"
        if name == "square":
            return f"({a} * {a})"
        if name == "reciprocal":
            return f"(1.0f / {a})"
        if name == "neg":
            return f"-({a})"
        if name == "pow":
            exponent = kwarg(node, "exponent", first, None)
            return None if exponent is None else power(a, exponent, c_float(exponent))
        if name == "clamp":
            lo, hi = kwarg(node, "min", first, None), kwarg(node, "max", first + 1, None)
            if lo is None or hi is None:
                return None
            return f"clamp({a}, {c_float(lo)}, {c_float(hi)})"
        return None

    def power(a, exponent, exponent_text):
        # OpenCL's pow has no vector-by-scalar overload: small integer powers as products,
        # other constant exponents through exp2 and log2 (NaN for a negative base, as torch's
        # pow with a fractional exponent; larger integer powers are left untranslated).
        if exponent is None:
            return None
        if exponent == int(exponent):
            if 1 <= exponent <= 4:
                return "(" + " * ".join([a] * int(exponent)) + ")"
            return None
        return f"exp2(log2({a}) * {exponent_text})"

    return tr(expr)


# ---------------------------------------------------------------- running the reference
def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportFailure(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise ImportFailure(f"{path}: syntax error at line {e.lineno}: {e.msg}")
    return module


def make_input(spec, shape, rng, sizes):
    if "int_bounds" in spec:
        lo, hi = eval_shape(spec["int_bounds"], sizes)
        return rng.integers(lo, hi + 1, size=shape).astype(np.int32 if spec["dtype"] == "i32" else np.float32)
    dtype = np.float16 if spec["dtype"] == "f16" else np.float32
    if spec["init"] == "normal":
        return rng.standard_normal(shape).astype(dtype)
    return rng.random(shape).astype(dtype)


def probe_sizes(sizes, varying, tie_equal=False, needs=None):
    """Three settings: varying sizes get small distinct values, the others keep theirs. With
    tie_equal, sizes whose declared values are equal get equal values too (some problems only
    work while two sizes agree, e.g. a (batch,) vector broadcast against (batch, n) rows).
    `needs` (the stand-in's `{"divisible": [[multiple, divisor]], "equal": [[a, b]]}`) are
    kept where the first of a pair is a varying size, or an expression of one: it is raised to
    the next multiple of its divisor (the expression's size until the expression is one), or
    takes its equal's value (a torch module refuses channels its groups do not divide)."""
    needs = needs or {}
    settings = []
    for base, step in ((12, 2), (20, 3), (17, 5)):
        setting, first_of_value = dict(sizes), {}
        for i, name in enumerate(varying):
            first = first_of_value.setdefault(sizes[name], name) if tie_equal else name
            setting[name] = setting[first] if first != name else base + step * i
        for multiple, divisor in needs.get("divisible", []):
            unit = eval_or_none([divisor], setting)
            if not unit or unit[0] <= 0:
                continue
            if multiple in varying:
                setting[multiple] = -(-setting[multiple] // unit[0]) * unit[0]
                continue
            # An expression of one varying size (a transposed convolution's output channels,
            # `(out_channels / 1) * 1`): that size raised until the expression is a multiple.
            names = [n for n in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", multiple)) if n in varying]
            if len(names) != 1:
                continue
            for _ in range(4 * unit[0]):
                value = eval_or_none([multiple], setting)
                if value and value[0] > 0 and value[0] % unit[0] == 0:
                    break
                setting[names[0]] += 1
        for a, b in needs.get("equal", []):
            if a in varying and b in setting:
                setting[a] = setting[b]
        settings.append(setting)
    return settings


def observe(request, analysis, reference, settings, parameters):
    """Runs the reference at each setting; the shapes and dtypes it saw, and the parameters."""
    torch_params = getattr(reference, "torch_parameter_shapes", None)
    inputs = analysis["inputs"]
    rng = np.random.default_rng(1)
    observed = []
    for setting in settings:
        arrays = {}
        if torch_params is not None:
            # The torch adapter reports the model's parameters at these sizes.
            try:
                shapes = torch_params(setting)
            except Exception as e:  # noqa: BLE001 - the model refusing these sizes is reported
                raise ImportFailure(
                    f"{request['reference']}: the model cannot be built at probe sizes {setting}: "
                    f"{type(e).__name__}: {e}"
                )
            parameters = [{"name": n, "dtype": "f32", "shape": list(s), "init": "normal"} for n, s in shapes.items()]
        for spec in inputs:
            arrays[spec["name"]] = make_input(spec, eval_shape(spec["shape"], setting), rng, setting)
        for spec in parameters:
            shape = spec["shape"]
            shape = shape if torch_params is not None else eval_shape(shape, setting)
            arrays[spec["name"]] = make_input(spec, tuple(shape), rng, setting)
        try:
            result = reference.reference(arrays, dict(setting), dict(analysis["scalars"]))
        except Exception as e:  # noqa: BLE001 - a reference failure is reported to the user
            raise ImportFailure(
                f"{request['reference']}: reference() raised at probe sizes {setting}: "
                f"{type(e).__name__}: {e}"
            )
        if not isinstance(result, dict) or not result:
            raise ImportFailure(f"{request['reference']}: reference() must return a non-empty dict")
        outputs = {}
        for name, value in result.items():
            value = np.asarray(value)
            if value.dtype.kind == "f":
                dtype = "f16" if value.dtype == np.float16 else "f32"
            elif value.dtype.kind in "iu":
                dtype = "i32"
            else:
                raise ImportFailure(f"output {name}: dtype {value.dtype} is not supported (f32, f16, i32)")
            outputs[name] = {"dtype": dtype, "shape": list(value.shape) or [1]}
        observed.append(
            {
                "outputs": outputs,
                "parameters": {p["name"]: list(arrays[p["name"]].shape) for p in parameters},
            }
        )
    return observed, parameters


def structured(values, structure):
    """`values` given the task file's `structure` as the evaluator gives it (kf-eval's
    `Structure::apply`)."""
    if structure == "symmetric":
        return (values + np.swapaxes(values, -1, -2)) / 2
    if structure == "lower":
        return np.tril(values)
    if structure == "upper":
        return np.triu(values)
    if structure == "softmax":
        e = np.exp(values - values.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    return values


def unstable_inits(request, analysis):
    """The other input distributions (`request["check_inits"]`: `normal`, `uniform(lo, hi)`)
    under which the reference's output is not finite at the task's sizes, drawing every float
    input from each in turn (a product of 2,048 values from uniform(-3, 3) overflows): no kernel
    can be checked against such a reference, so the task leaves them out. Skipped (none) where
    the inputs are too large to run the reference here."""
    final = {**analysis["sizes"], **request.get("sizes", {})}
    shapes = {i["name"]: eval_shape(i["shape"], final) for i in analysis["inputs"]}
    if sum(int(np.prod(s)) for s in shapes.values()) > STAND_IN_ELEMENTS:
        return []
    reference = load_module(request["reference"], "kf_kernelbench_reference")
    unstable = []
    for init in request["check_inits"]:
        rng = np.random.default_rng(3)
        bounds = re.fullmatch(r"uniform\(\s*(-?[0-9.]+)\s*,\s*(-?[0-9.]+)\s*\)", init)
        arrays = {}
        for p in analysis.get("parameters", []):
            arrays[p["name"]] = rng.standard_normal(eval_shape(p["shape"], final)).astype(np.float32)
        for spec in analysis["inputs"]:
            shape = shapes[spec["name"]]
            if "int_bounds" in spec or spec["dtype"] != "f32":
                arrays[spec["name"]] = make_input(spec, shape, rng, final)
                continue
            if init == "normal":
                values = rng.standard_normal(shape)
            elif bounds:
                values = rng.uniform(float(bounds[1]), float(bounds[2]), shape)
            else:
                raise ImportFailure(f"unknown input distribution {init!r} to check")
            arrays[spec["name"]] = structured(values, spec.get("structure")).astype(np.float32)
        try:
            with np.errstate(all="ignore"):
                result = reference.reference(arrays, dict(final), dict(analysis["scalars"]))
        except Exception:  # noqa: BLE001 - a reference that fails there is checked elsewhere
            continue
        if not all(np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in result.values()):
            unstable.append(init)
    return unstable


def run_probes(request, analysis):
    sizes, inputs = analysis["sizes"], analysis["inputs"]
    reference = load_module(request["reference"], "kf_kernelbench_reference")
    if not hasattr(reference, "reference"):
        raise ImportFailure(f"{request['reference']}: defines no reference(inputs, sizes, scalars)")
    parameters = []
    for name, shape in getattr(reference, "PARAMETERS", {}).items():
        parameters.append({"name": name, "dtype": "f32", "shape": [str(s) for s in shape], "init": "normal"})
    used = set()
    for spec in inputs:
        for expr in spec["shape"]:
            used.update(n for n in sizes if n in expr.replace("(", " ").replace(")", " ").split())
    symbolic = getattr(reference, "symbolic_shapes", None)
    if symbolic is not None:
        # The NumPy stand-in for torch knows every shape as an expression over the sizes.
        final = {**sizes, **request.get("sizes", {})}
        return {**symbolic(final), "varying": []}
    torch_params = getattr(reference, "torch_parameter_shapes", None)
    varying = [n for n, v in sizes.items() if n in used or v > SMALL_CONSTANT]
    needs = request.get("size_needs")
    try:
        settings = probe_sizes(sizes, varying, needs=needs)
        observed, parameters = observe(request, analysis, reference, settings, parameters)
    except ImportFailure as first_failure:
        settings = probe_sizes(sizes, varying, tie_equal=True, needs=needs)
        if settings == probe_sizes(sizes, varying, needs=needs):
            raise
        try:
            observed, parameters = observe(request, analysis, reference, settings, parameters)
        except ImportFailure:
            raise first_failure from None
    names = list(observed[0]["outputs"])
    # The trace's shape of a single output, where it agrees with every probe: exact also in
    # the sizes the probes keep fixed (a kernel size the evaluator's other input sets halve).
    traced = request.get("traced_output") if len(names) == 1 else None
    outputs = []
    for name in names:
        shapes = [o["outputs"][name]["shape"] for o in observed]
        agrees = traced is not None and all(traced_shape_is(traced, st, shape) for st, shape in zip(settings, shapes))
        try:
            shape = fit_shape(f"output `{name}`", shapes, settings, varying)
        except ImportFailure:
            if not agrees:
                raise
            shape = traced
        # The fitted form reads better; a dimension keeps it where it agrees with the trace
        # at every size halved in turn, as the evaluator's other input sets are.
        if agrees and shape is not traced and len(shape) == len(traced):
            shape = [
                fitted if all(eval_or_none([fitted], st) == eval_or_none([exact], st) for st in halvings(settings[0])) else exact
                for fitted, exact in zip(shape, traced)
            ]
        outputs.append({"name": name, "dtype": observed[0]["outputs"][name]["dtype"], "shape": shape})
    fitted_parameters = []
    for p in parameters:
        shape = p["shape"]
        if torch_params is not None:
            shapes = [o["parameters"][p["name"]] for o in observed]
            shape = fit_shape(f"parameter `{p['name']}`", shapes, settings, varying)
        fitted_parameters.append({**p, "shape": shape})
    return {"outputs": outputs, "parameters": fitted_parameters, "varying": varying}


# ---------------------------------------------------------------- fitting shapes
def halvings(sizes):
    """The sizes with each halved in turn, and all halved (the evaluator's other input sets
    without an `[[alternative_sizes]]` table), leaving out those that reach 0."""
    out = [{**sizes, name: v // 2} for name, v in sizes.items() if v // 2 > 0]
    return out + [{name: max(v // 2, 1) for name, v in sizes.items()}]


def eval_or_none(exprs, sizes):
    """`eval_shape`, or None where an expression does not evaluate at these sizes."""
    try:
        return eval_shape(exprs, sizes)
    except (ArithmeticError, NameError, SyntaxError, TypeError, ValueError):
        return None


def traced_shape_is(traced, setting, shape):
    """Whether the trace's shape expressions give `shape` at the sizes `setting` (a 0-d
    output is `["1"]` to the trace)."""
    if traced == ["1"] and list(shape) in ([], [1]):
        return True
    value = eval_or_none(traced, setting)
    return value is not None and list(value) == list(shape)


def conv_candidates(s, names):
    """Output-length formulas of convolutions and pools over spatial size s, written with the
    problem's own size names (absent ones take PyTorch's defaults)."""
    k = "kernel_size" if "kernel_size" in names else None
    if k is None:
        return []
    st = "stride" if "stride" in names else None
    pad = "padding" if "padding" in names else None
    dil = "dilation" if "dilation" in names else None
    span = f"{dil} * ({k} - 1) + 1" if dil else k
    padded = f"{s} + 2 * {pad}" if pad else s
    forward = f"({padded} - ({span})) / {st} + 1" if st else f"{padded} - ({span}) + 1"
    pool = f"({padded} - ({span})) / {k} + 1"
    transposed = (f"({s} - 1) * {st}" if st else f"{s} - 1") + f" + {span}" + (f" - 2 * {pad}" if pad else "")
    if "output_padding" in names:
        transposed += " + output_padding"
    return [forward, transposed, pool]


def fit_dim(values, settings, varying):
    """The rule, first match wins, checked against all three probes:
    1. a varying size equal to the dimension in every probe (declaration order);
    2. a dimension that never changes: `1`, else a non-varying size with that value
       (declaration order), else the literal;
    3. the product of two varying sizes;
    4. a convolution/pool/transposed-convolution length formula over a varying size with the
       problem's kernel_size / stride / padding / dilation names;
    5. `S * c`, `S / c`, `S + c`, `S - c` for a varying size S and an integer literal c.
    None when nothing fits."""
    names = list(settings[0])
    for s in varying:
        if all(st[s] == v for st, v in zip(settings, values)):
            return s
    if len(set(values)) == 1:
        v = values[0]
        if v == 1:
            return "1"
        for s in names:
            if s not in varying and settings[0][s] == v:
                return s
        return str(v)
    for i, a in enumerate(varying):
        for b in varying[i:]:
            if all(st[a] * st[b] == v for st, v in zip(settings, values)):
                return f"{a} * {b}"
    for s in varying:
        for expr in conv_candidates(s, names):
            if all(eval_shape([expr], st)[0] == v for st, v in zip(settings, values)):
                return expr
    for s in varying:
        first, v0 = settings[0][s], values[0]
        candidates = []
        if v0 % first == 0:
            candidates.append(f"{s} * {v0 // first}")
        if v0 and first % v0 == 0:
            candidates.append(f"{s} / {first // v0}")
        candidates.append(f"{s} + {v0 - first}" if v0 >= first else f"{s} - {first - v0}")
        for expr in candidates:
            if all(eval_shape([expr], st)[0] == v for st, v in zip(settings, values)):
                return expr
    return None


def fit_shape(what, shapes, settings, varying):
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise ImportFailure(f"{what}: its rank changes with the sizes ({shapes}); write its shape into the task file")
    shape = []
    for d in range(len(shapes[0])):
        values = [s[d] for s in shapes]
        expr = fit_dim(values, settings, varying)
        if expr is None:
            observed = "; ".join(
                f"{v} at {{{', '.join(f'{n}={st[n]}' for n in varying)}}}" for v, st in zip(values, settings)
            )
            raise ImportFailure(
                f"{what}: cannot express dimension {d} as a size expression (observed {observed}); "
                "write its shape into the task file by hand"
            )
        shape.append(expr)
    return shape


def generate_kernel(request, analysis):
    """The naive OpenCL kernel and the parameters' initial distributions, from the problem's
    forward() run by the NumPy stand-in for torch at the task's sizes."""
    spec = importlib.util.spec_from_file_location("kf_numpy_torch", request["generate"]["shim"])
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    sizes = {**analysis["sizes"], **request.get("sizes", {})}
    names = [i["name"] for i in analysis["inputs"]]
    # f32 inputs drawn as integers (torch.randint(…).float()) are floats to the kernel; i32
    # inputs (class indices) are `int` buffers.
    if any(i["dtype"] not in ("f32", "i32") for i in analysis["inputs"]):
        raise ImportFailure("the generated kernel handles f32 and i32 inputs only")
    int_names = [i["name"] for i in analysis["inputs"] if i["dtype"] == "i32"]
    elements = sum(int(np.prod(eval_shape(i["shape"], sizes))) for i in analysis["inputs"])
    if elements > STAND_IN_ELEMENTS:
        raise ImportFailure(
            f"its inputs have {elements} elements at these sizes, too many to run the stand-in "
            f"(at most {STAND_IN_ELEMENTS}); give smaller sizes with --size or --max-size"
        )
    try:
        params = shim.parameter_inits(request["problem"], sizes, analysis["tuples"])
        rng = np.random.default_rng(0)
        _, model = shim.build(request["problem"], sizes, analysis["tuples"])
        arrays = {}
        for p in params:
            arrays[p["name"]] = rng.standard_normal(eval_shape(p["shape"], sizes))
        for i in analysis["inputs"]:
            arrays[i["name"]] = make_input(i, eval_shape(i["shape"], sizes), rng, sizes)
        arrays.update(analysis["constants"])
        _, out = shim.run(request["problem"], sizes, analysis["tuples"], analysis["input_order"], arrays)
        kernel_args = (out, names + [p["name"] for p in params], list(sizes), list(analysis["scalars"]), "out", int_names)
        source, plan = shim.opencl_kernel(*kernel_args)
        # Kernels generated from the trace beside the naive one, starting points of the
        # search: a parallel two-stage reduction where the output is one reduced value, a
        # blocked convolution, a blocked matrix product read from scratch, a vector pooling or
        # depthwise convolution, line-by-line scans.
        generators = (
            shim.scalar_reduction_kernel,
            shim.conv_epilogue_kernel,
            shim.matmul_sequence_kernel,
            shim.window_vector_kernel,
            shim.line_scan_sequence,
        )
        seeds = [g for g in (generate(*kernel_args) for generate in generators) if g is not None]
        named = kernel_args[1] + kernel_args[2] + kernel_args[3]
        source = shim.rename_reserved(source, named)
        for seed in seeds:
            seed["source"] = shim.rename_reserved(seed["source"], named)
        # The family the trace shows where the source's patterns found none: a matrix product
        # with its element-wise epilogue.
        trace_family = None if analysis.get("family") else shim.matmul_epilogue_family(out)
        flops = shim.product_flops(out) if out.node is not None else None
    except shim.Unsupported as e:
        raise ImportFailure(f"forward() uses {e}, which the NumPy stand-in for torch does not implement")
    except Exception as e:  # noqa: BLE001 - the problem's own code failed on the stand-in
        frame = traceback.extract_tb(e.__traceback__)[-1]
        raise ImportFailure(
            f"the NumPy stand-in for torch failed: {type(e).__name__}: {e} "
            f"(at {pathlib.Path(frame.filename).name}:{frame.lineno})"
        )
    return {
        "kernel": source,
        "plan": plan,
        "parameter_inits": params,
        "trace_family": trace_family,
        "flops": flops,
        "seeds": seeds,
        "output_shape": [d.expr for d in out.sym_shape] or ["1"],
        # What forward() needs of the sizes, for the task's other input sets.
        "constraints": {"divisible": [list(p) for p in shim.DIVISIBLE], "equal": [list(p) for p in shim.EQUAL]},
    }


# Sizes at or below this are a problem's structure (kernel sizes, strides, groups, small
# channel counts), not its scale: the size rule leaves them as they are.
STRUCTURAL_SIZE = 16
# The largest power-of-two factor of a size that the rule keeps (channels divisible by 32
# groups stay so), and at most an eighth of the size, so that it moves in steps of 12.5% or
# finer.
KEPT_FACTOR = 32


# Where no common factor fits with the sizes kept above STRUCTURAL_SIZE (a batched 3-D
# convolution whose batch is already 16), the rule's second pass lets them fall to the
# smallest multiple of their unit at or above this.
LAST_RESORT_SIZE = 8


def scaled_sizes(sizes, factor, floor=STRUCTURAL_SIZE + 1, multiples=()):
    """Every size above STRUCTURAL_SIZE scaled by `factor`, rounded to the nearest multiple of the
    power of two (at most KEPT_FACTOR and an eighth of the size) that divides it, and never below the smallest such
    multiple at or above `floor` (so a length stays above a kernel size). Each `(multiple,
    divisor)` pair of size names (channels and their groups) is then kept divisible: the
    multiple moves to the nearest multiple of the scaled divisor."""
    out = _scaled(sizes, factor, floor)
    for multiple, divisor in multiples:
        d = out[divisor]
        out[multiple] = max(d, round(out[multiple] / d) * d)
    return out


def _scaled(sizes, factor, floor):
    out = {}
    for name, value in sizes.items():
        if value <= STRUCTURAL_SIZE:
            out[name] = value
            continue
        unit = 1
        while unit < KEPT_FACTOR and unit * 2 <= value // 8 and value % (unit * 2) == 0:
            unit *= 2
        smallest = min(value, -(-floor // unit) * unit)
        out[name] = max(round(value * factor / unit) * unit, smallest)
    return out


def probe_run(shim, request, analysis, names, sizes):
    """forward() on the stand-in at `sizes`: the parameters' inits and the output tensor."""
    params = shim.parameter_inits(request["problem"], sizes, analysis["tuples"])
    rng = np.random.default_rng(0)
    arrays = {p["name"]: rng.standard_normal(eval_shape(p["shape"], sizes)) for p in params}
    for i in analysis["inputs"]:
        arrays[i["name"]] = make_input(i, eval_shape(i["shape"], sizes), rng, sizes)
    arrays.update(analysis["constants"])
    _, out = shim.run(request["problem"], sizes, analysis["tuples"], analysis["input_order"], arrays)
    return params, out


def fit_sizes(request, analysis):
    """The size rule (issue 60): one common factor for all of a problem's sizes
    (`scaled_sizes`; sizes given with --size stay), the largest at most 1 under which its
    inputs, weights and outputs take at most `max_bytes` (4 bytes an element) and its matrix
    products and convolutions at most `max_flops`. The shapes and the operation count are read
    from one run of forward() on the NumPy stand-in at the smallest scale, as expressions over
    the sizes."""
    budget = request["fit"]
    spec = importlib.util.spec_from_file_location("kf_numpy_torch", budget["shim"])
    shim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shim)
    defaults = dict(analysis["sizes"])
    given = request.get("sizes", {})
    names = [i["name"] for i in analysis["inputs"]]
    # Pairs of sizes that operations need divisible, learnt from the probe runs that fail.
    multiples = []
    while True:
        probe = {**scaled_sizes(defaults, 0.0, multiples=multiples), **given}
        try:
            params, out = probe_run(shim, request, analysis, names, probe)
            # Pairs met at this scale (divisible here by chance) are kept so at every other.
            multiples += [
                pair for pair in shim.DIVISIBLE
                if pair not in multiples and all(n in defaults and n not in given for n in pair)
            ]
            break
        except shim.Indivisible as e:
            pair = (e.multiple, e.divisor)
            if pair in multiples or not all(n in defaults and n not in given for n in pair):
                raise ImportFailure(f"the size rule cannot keep the sizes divisible: {e}")
            multiples.append(pair)
        except shim.Unsupported as e:
            raise ImportFailure(f"the size rule needs forward() on the NumPy stand-in, which lacks {e}")
        except Exception as e:  # noqa: BLE001 - the problem's own code failed on the stand-in
            raise ImportFailure(f"the size rule could not run forward() on the NumPy stand-in: {type(e).__name__}: {e}")
    output_shape = [shim.expr_of(d) for d in out.sym_shape]
    flops = shim.product_flops(out) if out.node is not None else None
    shapes = [i["shape"] for i in analysis["inputs"]] + [p["shape"] for p in params] + [output_shape]

    def cost(sizes):
        elements = sum(int(np.prod(eval_shape(shape, sizes))) for shape in shapes)
        work = eval_shape([flops], sizes)[0] if flops else 0
        return elements * 4, work

    def fits(factor, floor=STRUCTURAL_SIZE + 1):
        sizes = {**scaled_sizes(defaults, factor, floor, multiples), **given}
        # Sizes that leave a shape empty (a window longer than its input) do not fit.
        if any(d <= 0 for shape in shapes for d in eval_shape(shape, sizes)):
            return False, sizes
        nbytes, work = cost(sizes)
        return nbytes <= budget["max_bytes"] and work <= budget["max_flops"], sizes

    ok, sizes = fits(1.0)
    if not ok:
        lo, hi = 0.0, 1.0
        for _ in range(40):
            mid = (lo + hi) / 2
            if fits(mid)[0]:
                lo = mid
            else:
                hi = mid
        ok, sizes = fits(lo)
    if not ok:
        # The second pass: sizes may fall to LAST_RESORT_SIZE. Below some factor a window may
        # no longer fit its input, so the largest fitting factor is searched from above on a
        # fine geometric grid rather than by bisection.
        factor = 1.0
        while factor > 1e-4 and not ok:
            factor *= 0.97
            ok, sizes = fits(factor, LAST_RESORT_SIZE)
        if not ok:
            ok, smallest = fits(0.0)
            nbytes, work = cost(smallest)
            raise ImportFailure(
                f"no common scale fits {budget['max_bytes']} bytes and {budget['max_flops']:.3g} "
                f"operations: at the smallest ({smallest}) it takes {nbytes} bytes and {work:.3g}"
            )
    nbytes, work = cost(sizes)
    return {"fitted": {"sizes": sizes, "bytes": nbytes, "flops": work}}


def main():
    request = json.load(sys.stdin)
    try:
        analysis = analyze(request["problem"])
        if request.get("fit"):
            print(json.dumps({"ok": True, **fit_sizes(request, analysis)}))
            return
        if request.get("generate"):
            analysis.update(generate_kernel(request, analysis))
        if request.get("reference"):
            analysis.update(run_probes(request, analysis))
            if request.get("check_inits"):
                analysis["unstable_inits"] = unstable_inits(request, analysis)
        # Integer inputs whose bounds are sizes (class labels below num_classes) keep them as
        # expressions, so that other input sets' sizes keep every label in range.
        final = {**analysis["sizes"], **request.get("sizes", {})}
        for spec in analysis["inputs"]:
            if "int_bounds" in spec:
                bounds = spec.pop("int_bounds")
                if all(re.fullmatch(r"[0-9 +\-*/()]+", b) for b in bounds):
                    bounds = eval_shape(bounds, final)
                spec["init"] = f"int({bounds[0]}, {bounds[1]})"
        print(json.dumps({"ok": True, **analysis}))
    except ImportFailure as e:
        print(json.dumps({"ok": False, "error": str(e)}))
    except Exception:  # noqa: BLE001 - any other failure is a bug report, with its trace
        print(json.dumps({"ok": False, "error": "import helper failed:\n" + traceback.format_exc()}))


if __name__ == "__main__":
    main()
