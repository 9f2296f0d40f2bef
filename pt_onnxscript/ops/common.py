"""Small helpers shared by translations."""

from functools import reduce

import numpy as np
import onnx_ir as ir
import pytensor.scalar.basic as ps
from pytensor.graph.basic import Constant
from pytensor.raise_op import Assert
from pytensor.tensor import constant as tensor_constant
from pytensor.tensor.basic import Join, MakeVector
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.shape import Reshape
from pytensor.tensor.subtensor import Subtensor

from pt_onnxscript.optimize import no_negative_zero
from pt_onnxscript.rewrites import is_length, length_at_least_zero_of
from pt_onnxscript.runtime_gaps import kernel_dtype
from pt_onnxscript.scripted import inline
from pt_onnxscript.translate import constant_value
from pt_onnxscript.types import onnx_dtype

# The int64 extremes: Slice's start or end past any dim, forward or backward.
INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def out_dtype(node, i: int = 0):
    """The ONNX dtype of output `i` of `node`."""
    return onnx_dtype(node.outputs[i].type.dtype)


def cast_inputs_to_output(g, node, inputs):
    """Cast the inputs whose dtype differs from the output's (PyTensor's upcast) to it."""
    target = node.outputs[0].type.dtype
    return [
        x if var.type.dtype == target else g.Cast(x, to=onnx_dtype(target))
        for var, x in zip(node.inputs, inputs, strict=True)
    ]


def constant(g, value, dtype: str):
    """A constant of PyTensor dtype `dtype`, shared with the graph's other constants."""
    return constant_value(g, tensor_constant(np.asarray(value, dtype=dtype)))


def ints(g, value):
    """An int64 constant (a shape, axes, an index, a bound)."""
    return constant(g, value, "int64")


def ordered_int64(g, x):
    """uint64 `x` as the int64 values in the same order (ONNX Runtime has no uint64 ReduceMax,
    ReduceMin, ArgMax or TopK): its bits, shifted by 2**63 modulo 2**64."""
    return g.Add(g.Cast(x, to=ir.DataType.INT64), ints(g, np.iinfo(np.int64).min))


def broadcast_shape(g, shapes):
    """The broadcast of 1-d shape values, as NumPy computes it (a 0 beats a 1)."""
    zero = constant(g, 0, "int8")
    return g.Shape(reduce(g.Add, [g.Expand(zero, shape) for shape in shapes]))


def range_to(g, n):
    """0, 1, ..., n - 1 (int64) for a 0-d int64 `n`."""
    return g.Range(ints(g, 0), n, ints(g, 1))


def any_last(g, mask):
    """Whether any of the last axis of bool `mask` is true (false when it is empty)."""
    return g.Cast(
        g.ReduceMax(g.Cast(mask, to=ir.DataType.UINT8), ints(g, [-1]), keepdims=0),
        to=ir.DataType.BOOL,
    )


def any_of(g, flags):
    """Whether any of the bool `flags` (0-d, or of any shape) holds (false when empty)."""
    flat = g.Cast(g.Reshape(flags, ints(g, [-1])), to=ir.DataType.UINT8)
    found = g.ReduceMax(g.Concat(flat, constant(g, [0], "uint8"), axis=0), keepdims=0)
    return g.Cast(found, to=ir.DataType.BOOL)


def where(g, cond, a, b, dtype: str):
    """Where(cond, a, b) for values of PyTensor dtype `dtype`.

    ONNX Runtime's Where turns a -0.0 taken from `a` (not from `b`) into +0.0 (most
    broadcasts). A constant without -0.0 goes first, as is, or the condition is negated (by
    Xor: ONNX Runtime fuses a Not into the Where, swapping the branches back) to put it
    there; otherwise a zero taken from a -0.0 in `a` that came out +0.0 gets its sign back by
    a multiplication by -1.
    """
    via = kernel_dtype("Where", dtype, keep="bits")
    if np.dtype(dtype).kind == "f":
        if no_negative_zero(a):
            return g.Where(cond, a, b)
        if no_negative_zero(b):
            return g.Where(negate(g, cond), b, a)
        zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
        negative_zero = g.And(g.Equal(a, zero), g.Less(g.Div(one, a), zero))
        result = g.Where(cond, a, b)
        lost = g.And(g.And(cond, negative_zero), g.Greater(g.Div(one, result), zero))
        return g.Mul(result, g.Where(lost, constant(g, -1, dtype), one))
    if via == dtype:
        return g.Where(cond, a, b)
    to, back = onnx_dtype(via), onnx_dtype(dtype)
    return g.Cast(g.Where(cond, g.Cast(a, to=to), g.Cast(b, to=to)), to=back)


def negation_of(value: ir.Value) -> ir.Value | None:
    """w where ONNX value `value` is Neg(w), else None."""
    node = value.producer()
    if node is None or node.op_type != "Neg" or node.domain not in ("", "ai.onnx"):
        return None
    return node.inputs[0]


def unguarded(value: ir.Value) -> ir.Value:
    """The value `value` passes through a failure guard (``Expand(v, guard)`` of
    `failure_guard`), or `value` itself: the same elements."""
    node = value.producer()
    if node is None or node.op_type != "Expand" or len(node.inputs) != 2:
        return value
    shape = node.inputs[1].producer() if node.inputs[1] is not None else None
    return node.inputs[0] if shape is not None and CHECK in shape.meta else value


def negate(g, cond):
    """Not(cond), as Xor(cond, True): ONNX Runtime's NotWhereFusion rewrites Where(Not(c), x, y)
    into Where(c, y, x), which would put a branch back where Where loses its -0.0."""
    return g.Xor(cond, constant(g, True, "bool"))


CHECK = "pt_onnxscript.check"


def failure_guard(g, failed, exc_type: type[Exception], message: str):
    """A value that makes ONNX Runtime fail when any of `failed` (a bool tensor, or a list of
    them) is true: an empty shape vector to Expand values by (``g.Expand(value, guard)``
    leaves them unchanged, -0.0 and NaN included), gathered from one empty row at index 1
    when the check fails.

    ONNX has no operator that raises; ONNX Runtime refuses the out-of-range Gather, and its
    error repeats the Gather's name, which holds `message`. Mode "ONNX" raises
    ``exc_type(message)``.
    """
    flags = []
    for value in failed if isinstance(failed, list | tuple) else [failed]:
        if value.shape is None or len(value.shape) != 0:
            value = g.ReduceMax(g.Cast(value, to=ir.DataType.UINT8), keepdims=0)
        flags.append(g.Cast(value, to=ir.DataType.INT64))
    index = flags[0] if len(flags) == 1 else g.Max(*flags)
    rows = constant(g, np.zeros((1, 0)), "int64")
    name = f"{g.builder._qualify_node_name('check')}: {message}"
    guard = g.Gather(rows, index, axis=0, _name=name)
    guard.producer().meta[CHECK] = (exc_type, message)
    return guard


def pad_zeros(g, x, axis: int, before=None, after=None):
    """`x` with `before` and `after` (1-element int64 counts; None: none) zeros along negative
    `axis`, by Concat: ONNX Runtime's transpose optimizer mis-permutes the pads of a Pad that
    has its `axes` input (QUIRKS["pad_axes_transpose"]), and padding every axis needs x's
    rank."""
    if axis >= 0:
        raise ValueError(f"pad_zeros takes a negative axis, not {axis}")

    def zeros(count):
        tail = [g.Shape(x, start=axis + 1)] if axis < -1 else []
        shape = g.Concat(g.Shape(x, end=axis), count, *tail, axis=0)
        return g.CastLike(g.ConstantOfShape(shape), x)

    parts = [zeros(before)] if before is not None else []
    parts.append(x)
    if after is not None:
        parts.append(zeros(after))
    return g.Concat(*parts, axis=axis) if len(parts) > 1 else x


def binary_search(g, values, keys, before, length: int | None):
    """For each of `keys` (..., m), the position NumPy's binary search (npysort/binsearch.cpp,
    one key per call, as np.vectorize calls np.searchsorted) finds along the last axis of
    `values` (..., n), their leading dims alike (or both 1-d): from [lo, hi) = [0, n), lo
    moves past the middle where ``before(value at the middle, key)``, else hi comes down to
    it, until lo = hi. On sorted values that is the first position whose value is not before
    the key; on unsorted ones (a cumulative sum of probabilities below 0), NumPy's answer too.

    `length` is n where known at export (its bit length of steps, unrolled), else None (a
    Loop of at least as many: a step once lo = hi changes nothing). log2(n) gathers per key,
    no (m, n) comparison."""
    # Read only where lo = hi = n (a step that changes nothing): the values padded by one.
    padded = pad_zeros(g, values, -1, after=ints(g, [1]))
    zero, one, two = (constant(g, v, "int64") for v in (0, 1, 2))

    def step(g, lo, hi):
        middle = g.Add(lo, g.Div(g.Sub(hi, lo), two))
        go_on = before(g, g.GatherElements(padded, middle, axis=-1), keys)
        return g.Min(g.Where(go_on, g.Add(middle, one), lo), hi), g.Where(go_on, hi, middle)

    lo = g.Expand(zero, g.Shape(keys))
    hi = g.Expand(g.Shape(values, start=-1), g.Shape(keys))
    if length is not None:
        for _ in range(int(length).bit_length()):
            lo, hi = step(g, lo, hi)
        return lo
    n = g.Cast(g.Max(g.Squeeze(g.Shape(values, start=-1)), one), to=ir.DataType.DOUBLE)
    bits = g.Floor(g.Div(g.Log(n), constant(g, np.log(2.0), "float64")))
    count = g.Add(g.Cast(bits, to=ir.DataType.INT64), two)  # one more: Log's rounding
    return loop(g, count, [lo, hi], lambda g, k, lo, hi: step(g, lo, hi), "search")[0]


def raise_if(g, failed, value, exc_type: type[Exception], message: str):
    """`value`, made to raise ``exc_type(message)`` when any of `failed` is true."""
    return g.Expand(value, failure_guard(g, failed, exc_type, message))


def raise_first(g, value, checks):
    """`value`, made to raise as the first failing of `checks`, (failed, exc_type, message)
    triples in the order PyTensor checks them: each check reads its flags through the guard
    of the one before, so ONNX Runtime evaluates them in that order."""
    guard = None
    for failed, exc_type, message in checks:
        flags = list(failed) if isinstance(failed, list | tuple) else [failed]
        if guard is not None:
            flags = [g.Expand(flag, guard) for flag in flags]
        guard = failure_guard(g, flags, exc_type, message)
    return value if guard is None else g.Expand(value, guard)


RUNTIME_BROADCAST = (
    "Runtime broadcasting not allowed: an input has length 1 in a dimension it was not "
    "declared broadcastable in. If broadcasting was intended, use `specify_broadcastable` "
    "on the relevant input."
)


def known_size(var, value, d: int) -> int | None:
    """Dim `d` of `var`, if PyTensor's type (`static_size`) or the ONNX value's inferred shape
    (a baked weight's, say) knows it."""
    size = static_size(var, d)
    if size is not None:
        return size
    shape = value.shape
    if shape is not None and len(shape) == var.type.ndim and isinstance(shape[d], int):
        return shape[d]
    return None


def static_size(var, d: int, depth: int = 4) -> int | None:
    """Dim `d` of PyTensor variable `var` where its type, or the node making it, fixes it: a
    Reshape to a constant shape (its -1 from the input's static size), a Join of arrays of
    static sizes. (A rewrite that folds a Reshape's shape to a constant leaves the type the
    node was made with; a vectorized log-density's gradient pieces are such Reshapes.)"""
    ndim = var.type.ndim
    d = d % ndim if ndim else d
    if var.type.shape[d] is not None or var.owner is None or depth == 0:
        return var.type.shape[d]
    op, inputs = var.owner.op, var.owner.inputs
    if isinstance(op, Reshape) and isinstance(inputs[1], Constant):
        shape = [int(n) for n in np.ravel(inputs[1].data)]
        if shape[d] >= 0:
            return shape[d]
        x = inputs[0]
        sizes = [static_size(x, k, depth - 1) for k in range(x.type.ndim)]
        rest = [n for k, n in enumerate(shape) if k != d]
        if None in sizes or -1 in rest or 0 in rest:
            return None
        return int(np.prod(sizes, dtype=np.int64)) // int(np.prod(rest, dtype=np.int64))
    if isinstance(op, Join) and isinstance(inputs[0], Constant):
        axis = int(inputs[0].data) % ndim
        sizes = [static_size(x, d, depth - 1) for x in inputs[1:]]
        if d == axis:
            return None if None in sizes else sum(sizes)
        return next((n for n in sizes if n is not None), None)
    return None


def input_dim_name(g, var, value, d: int) -> str | None:
    """The symbolic dim that dim `d` of the ONNX value's inferred shape carries, if it names one
    dim of one graph input (`_Builder.input_dim_names`): values carrying the same such name
    have the same size there (the rows of ``x @ w`` and of ``x @ v``)."""
    shape = value.shape
    if shape is None or len(shape) != var.type.ndim or not isinstance(shape[d], ir.SymbolicDim):
        return None
    name = shape[d].value
    return name if name in g.builder.root.input_dim_names else None


def same_dim(g, pairs, d: int) -> bool:
    """Whether dim `d` of the variables of all (variable, ONNX value) `pairs` is known to be
    one size: their values' inferred shapes carry one graph input's symbolic dim there
    (`input_dim_name`), or PyTensor's shape inference of the graph gives that dim of each as
    one variable (a batched log-density's number of points, through its reshapes)."""
    names = {input_dim_name(g, var, value, d) for var, value in pairs}
    if len(names) == 1 and None not in names:
        return True
    shape_of = g.builder.root.shape_of
    dims = set()
    for var, _ in pairs:
        shape = shape_of.get(var)
        if shape is None or len(shape) != var.type.ndim:
            return False
        dims.add(_dim_root(shape[d]))
    return len(dims) == 1


def _dim_root(dim, depth: int = 8):
    """The variable a dim of PyTensor's shape inference is, where its graph only restates it:
    an Assert of it (a shape graph's broadcast checks, which the computation it describes
    made: a runtime-broadcast guard, or ONNX Runtime's own), an entry of a MakeVector, a
    Reshape's request of a length (>= 0, never its -1), the maximum of a length and 0, a
    switch of a constant condition."""
    owner = dim.owner
    if owner is None or depth == 0:
        return dim
    op = owner.op
    if isinstance(op, Assert):
        return _dim_root(owner.inputs[0], depth - 1)
    if isinstance(op, Subtensor) and owner.inputs[0].owner is not None:
        vector = owner.inputs[0].owner
        index = owner.inputs[1] if len(owner.inputs) == 2 else None
        if isinstance(vector.op, MakeVector) and isinstance(index, Constant):
            return _dim_root(vector.inputs[int(index.data)], depth - 1)
        return dim
    if not isinstance(op, Elemwise):
        return dim

    def root(var):
        return _dim_root(var, depth - 1)

    if isinstance(op.scalar_op, ps.Switch):
        condition = root(owner.inputs[0])
        if isinstance(condition, Constant) and condition.type.ndim == 0:
            return root(owner.inputs[1] if condition.data else owner.inputs[2])
        # switch(eq(n, -1), inferred, n) of a length n: Reshape's request
        test = owner.inputs[0].owner
        if (
            test is not None
            and isinstance(test.op, Elemwise)
            and isinstance(test.op.scalar_op, ps.EQ)
        ):
            a, b = (root(var) for var in test.inputs)
            if _is_negative(b) and a is root(owner.inputs[2]) and is_length(a):
                return a
    n = length_at_least_zero_of(owner, root)
    return dim if n is None else n


def _is_negative(var) -> bool:
    return isinstance(var, Constant) and var.type.ndim == 0 and var.data < 0


def dim_lengths(g, values, dims: list[int]):
    """The lengths of dims `dims` of each of `values`: an int64 (len(values), len(dims))."""
    positions = constant(g, dims, "int64")
    first = constant(g, [0], "int64")
    return g.Concat(
        *[g.Unsqueeze(g.Gather(g.Shape(v), positions, axis=0), first) for v in values], axis=0
    )


def check_runtime_broadcast(g, variables, values, ndim: int):
    """`values`, guarded to raise PyTensor's runtime-broadcasting error where, in one of the
    first `ndim` dims, an input not declared broadcastable there has length 1 at run time
    while another has not (ONNX would broadcast it; Elemwise and Blockwise refuse). Dims
    known equal (the same static size, or the same graph input's dim) need no check."""
    checked = []
    for d in range(ndim):
        undeclared = [
            (var, value)
            for var, value in zip(variables, values, strict=True)
            if not var.type.broadcastable[d]
        ]
        candidates = [known_size(var, value, d) for var, value in undeclared]
        if (
            len(candidates) > 1
            and (None in candidates or (1 in candidates and len(set(candidates)) > 1))
            and not same_dim(g, undeclared, d)
        ):
            checked.append(d)
    if not checked:
        return list(values)
    lengths = dim_lengths(g, values, checked)
    declared = np.array([[not var.type.broadcastable[d] for d in checked] for var in variables])
    one = g.Equal(lengths, constant(g, 1, "int64"))
    undeclared_one = g.Cast(g.And(one, constant(g, declared, "bool")), to=ir.DataType.UINT8)
    other = g.Cast(g.Not(one), to=ir.DataType.UINT8)
    axis = constant(g, [0], "int64")
    failed = g.And(
        g.Cast(g.ReduceMax(undeclared_one, axis, keepdims=0), to=ir.DataType.BOOL),
        g.Cast(g.ReduceMax(other, axis, keepdims=0), to=ir.DataType.BOOL),
    )
    guard = failure_guard(g, failed, ValueError, RUNTIME_BROADCAST)
    return [g.Expand(v, guard) for v in values]


def inline_in_float64(g, node, function, *inputs, variables=None):
    """Inline scripted float64 `function` on `inputs` (the ONNX values of `variables`, by
    default the node's inputs) cast to float64, its result rounded once to the node's output
    dtype."""
    variables = node.inputs if variables is None else variables
    args = [
        x if var.type.dtype == "float64" else g.Cast(x, to=onnx_dtype("float64"))
        for var, x in zip(variables, inputs, strict=True)
    ]
    result = inline(g, function, *args)
    out = node.outputs[0].type.dtype
    return result if out == "float64" else g.Cast(result, to=onnx_dtype(out))


def subgraph(g, kind: str, build, inputs=(), outputs=()) -> ir.Graph:
    """The body of a Loop or a branch of an If: ``build(g, *inputs)`` traced into a graph of
    its own, returning its `outputs`.

    `inputs` and `outputs` are (dtype, shape) pairs (shape None: unknown). Value names in the
    body start with a tag numbered per model, so they stay apart from the enclosing graphs'
    (ONNX wants names unique across nested graphs) and the same graph gives the same file.
    """
    tag = subgraph_tag(g, kind)

    def trace(g, *args):
        g.builder.push_module(tag)
        return build(g, *args)

    return g.builder.subgraph(
        trace,
        inputs=[ir.val(f"{tag}_in{i}", dtype, shape) for i, (dtype, shape) in enumerate(inputs)],
        outputs=[ir.val(f"{tag}_out{i}", dtype, shape) for i, (dtype, shape) in enumerate(outputs)],
        name=tag,
    )


def loop(g, count, state, step, kind: str, *, condition=None, stacked=()):
    """The final `state` of an ONNX Loop running ``state = step(g, k, *state)`` for k in
    range(`count`) (None: no bound), followed by the values of `stacked` dtypes that each step
    also returns after its state, stacked along a new first axis (Loop's scan outputs).

    With a `condition` (a 0-d bool: whether to run the first step), the Loop runs while it
    holds and `step` returns ``(go_on, *state, *stacked)``. Each value of `state` keeps its
    rank from step to step (the body declares it, `_rank_only`); its dims may change. The
    Loop's outputs carry those ranks (and the stacked values' ranks plus one) where ONNX's
    inference leaves them unknown.
    """
    scalar_int, scalar_bool = (ir.DataType.INT64, []), (ir.DataType.BOOL, [])

    def body(g, k, go, *values):
        results = list(step(g, k, *values))
        return [g.Identity(go), *results] if condition is None else results

    graph = subgraph(
        g,
        kind,
        body,
        inputs=[scalar_int, scalar_bool, *[(v.dtype, _rank_only(v)) for v in state]],
        outputs=[scalar_bool, *[(v.dtype, None) for v in state], *[(d, None) for d in stacked]],
    )
    n = len(state) + len(stacked)
    # An explicit condition even without one: ONNX optimizers drop a trailing empty input,
    # and a Loop needs two.
    start = constant(g, True, "bool") if condition is None else condition
    result = g.Loop(count, start, *state, body=graph, _outputs=n)
    result = list(result) if n > 1 else [result]
    # What ONNX's inference of a Loop leaves unknown: the carried values' ranks, and the
    # stacked ones' (one more than the body's), for the inference of what reads them; their
    # dtypes where it leaves those unknown too (a value with a shape and no type is not
    # written to the file: onnx-ir warns of each).
    steps = graph.outputs[1 + len(state) :]
    ranks = [_rank_only(v) for v in state] + [_rank_only(v, 1) for v in steps]
    dtypes = [v.dtype for v in state] + list(stacked)
    for value, rank, dtype in zip(result, ranks, dtypes, strict=True):
        if value.dtype is None and dtype is not None:
            value.dtype = dtype
        if value.shape is None and rank is not None:
            value.shape = ir.Shape(rank)
    return result


def _rank_only(value, more: int = 0) -> list | None:
    """The shape a Loop body declares for a carried `value`: its rank (plus `more`), each dim
    unknown (the steps may change the dims, not the rank). Inference then knows the body's
    values' ranks, and ONNX Runtime those of the values a Loop that runs no step stacks (it
    warns of each such Loop whose body does not say, and gives shape (0,))."""
    return None if value.shape is None else [None] * (len(value.shape) + more)


def branch(g, kind: str, build, dtypes) -> ir.Graph:
    """A branch of an ONNX If: ``build(g)``, returning values of `dtypes`."""
    return subgraph(g, kind, build, outputs=[(dtype, None) for dtype in dtypes])


def subgraph_tag(g, kind: str) -> str:
    """A prefix for a subgraph's value names: ONNX wants names unique across nested graphs.

    Numbered per model, so exporting the same graph twice gives the same file."""
    root = g.builder.root
    root.subgraph_count = getattr(root, "subgraph_count", 0) + 1
    return f"{kind}{root.subgraph_count}"
