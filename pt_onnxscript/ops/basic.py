"""Tensor construction and joining: the Ops of pytensor.tensor.basic."""

import numpy as np
import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.basic import (
    Alloc,
    AllocDiag,
    AllocEmpty,
    ARange,
    Choose,
    ExtractDiag,
    Eye,
    Join,
    MakeVector,
    Nonzero,
    NotScalarConstantError,
    PermuteRowElements,
    ScalarFromTensor,
    Split,
    TensorFromScalar,
    get_scalar_constant_value,
)
from pytensor.tensor.shape import Shape_i
from pytensor.tensor.type import TensorType

from pt_onnxscript.ops.common import (
    broadcast_shape,
    check_runtime_broadcast,
    constant,
    dim_lengths,
    known_size,
    out_dtype,
    pad_zeros,
    raise_first,
    raise_if,
    same_dim,
    where,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.translate import blockwise_core_node
from pt_onnxscript.types import as_ir_tensor, onnx_dtype


def shape_vector(g, dims):
    """An int64 vector from scalar dims."""
    if not dims:
        return g.Constant(value_ints=[])
    zero = g.Constant(value_ints=[0])
    return g.Concat(*[g.Unsqueeze(g.Cast(d, to=ir.DataType.INT64), zero) for d in dims], axis=0)


@register(Alloc)
def alloc(g, node, value, *shape):
    """Alloc -> Expand of the value to the given shape; an empty tensor from ConstantOfShape
    when a size is a constant 0 (ONNX Runtime's optimizer drops an Expand to a constant shape
    with a 0, leaving the value's own shape: the file is right, the session is not)."""
    if any(isinstance(var, Constant) and var.data == 0 for var in node.inputs[1:]):
        zero = as_ir_tensor(np.zeros((1,)), node.outputs[0].type.dtype)
        return g.ConstantOfShape(shape_vector(g, shape), value=zero)
    target = shape_vector(g, shape)
    return _checked_alloc(g, node, g.Expand(value, target), value, target)


def _checked_alloc(g, node, result, value, target):
    """`result`, raising PyTensor's ValueErrors where a dim of the value not declared
    broadcastable differs from the shape's: ONNX's Expand broadcasts both ways (a (3,) value
    to a (2, 1) shape gave (2, 3)), and Alloc refuses to broadcast a length-1 dim at run time
    that its type does not say is broadcastable (its own message), or a dim that differs
    otherwise (NumPy's assignment's)."""
    value_shape = node.inputs[0].type.shape
    rank, length = len(value_shape), len(node.inputs) - 1
    sizes = node.inputs[1 + length - rank :]
    kept = [
        i
        for i, dim in enumerate(value_shape)
        if dim != 1 and not _dim_of(sizes[i], node.inputs[0], i)
    ]
    if not kept:
        return result
    at = constant(g, kept, "int64")
    dims = g.Gather(g.Shape(value), at, axis=0)
    wanted = g.Gather(target, constant(g, [length - rank + i for i in kept], "int64"), axis=0)
    differ = g.Not(g.Equal(dims, wanted))
    one = g.Equal(dims, constant(g, 1, "int64"))
    mismatch = (
        f"{node.op}: could not broadcast the value into the shape given (a dim of the value "
        "is neither 1 nor the shape's)"
    )
    checks = [
        (g.And(differ, one), ValueError, Alloc._runtime_broadcast_error_msg),
        (g.And(differ, g.Not(one)), ValueError, mismatch),
    ]
    return raise_first(g, result, checks)


def _dim_of(size, var, axis: int) -> bool:
    """Whether `size` is known to be dim `axis` of `var`: both static (Alloc's make_node
    checked them), or `size` is Shape_i{axis}(var)."""
    if var.type.shape[axis] is not None and isinstance(size, Constant):
        return True
    owner = size.owner
    return (
        owner is not None
        and isinstance(owner.op, Shape_i)
        and owner.op.i == axis
        and (owner.inputs[0] is var)
    )


@register(AllocEmpty)
def alloc_empty(g, node, *shape):
    """AllocEmpty -> zeros (ConstantOfShape): ONNX has no uninitialised memory."""
    zero = as_ir_tensor(np.zeros((1,)), node.outputs[0].type.dtype)
    return g.ConstantOfShape(shape_vector(g, shape), value=zero)


@register(MakeVector)
def make_vector(g, node, *scalars):
    """MakeVector -> Concat of the scalars, cast to the op's dtype."""
    if not scalars:
        return g.Constant(value=as_ir_tensor(np.zeros((0,)), node.op.dtype))
    zero = g.Constant(value_ints=[0])
    return g.Concat(*[g.Unsqueeze(g.Cast(s, to=out_dtype(node)), zero) for s in scalars], axis=0)


@register(ScalarFromTensor, TensorFromScalar)
def scalar_tensor(g, node, x):
    """ScalarFromTensor, TensorFromScalar -> Identity (both are 0-d tensors in ONNX)."""
    return g.Identity(x)


@register_check(Join, Split)
def constant_axis(node):
    var = node.inputs[0] if isinstance(node.op, Join) else node.inputs[1]
    if _axis_value(var) is None:
        return f"the axis must be known at export for ONNX, got {var}"
    return None


def _axis_value(var) -> int | None:
    """The axis `var` holds if PyTensor can tell it at export: a constant, or computed from
    constants (vectorize_graph's Join of a batch of one takes a Squeeze of [0])."""
    try:
        return int(get_scalar_constant_value(var))
    except NotScalarConstantError:
        return None


def _static_axis(node, var, ndim: int) -> int:
    axis = _axis_value(var)
    return axis + ndim if axis < 0 else axis


@register(Join)
def join(g, node, axis, *tensors):
    """Join -> Concat on the constant axis, inputs cast to the output dtype."""
    at = _static_axis(node, node.inputs[0], node.outputs[0].type.ndim)
    return _concatenated(g, node, tensors, at)


@register_blockwise(Join)
def blockwise_join(g, node, axis, *tensors):
    """Blockwise(Join) of an axis the same for the whole batch (vectorize_graph's Join of
    batched and unbatched arrays, which PyTensor leaves a Blockwise) -> the arrays expanded
    to the batch shape they broadcast to, joined on the core axis past the batch dims."""
    batch = node.op.batch_ndim(node)
    core = blockwise_core_node(node)
    at = batch + _static_axis(core, core.inputs[0], core.outputs[0].type.ndim)
    shape = broadcast_shape(g, [g.Shape(x, end=batch) for x in tensors])
    tensors = [
        g.Expand(x, g.Concat(shape, constant(g, [1] * (var.type.ndim - batch), "int64"), axis=0))
        for var, x in zip(node.inputs[1:], tensors, strict=True)
    ]
    return _concatenated(g, node, tensors, at, batch)


def _concatenated(g, node, tensors, at: int, batch: int = 0):
    """Join's `tensors` (the node's inputs after its axis) cast to its output dtype and
    concatenated along `at`; their first `batch` dims are alike."""
    out = node.outputs[0].type
    tensors = [
        x if var.type.dtype == out.dtype else g.Cast(x, to=onnx_dtype(out.dtype))
        for var, x in zip(node.inputs[1:], tensors, strict=True)
    ]
    if len(tensors) == 1:
        return g.Identity(tensors[0])
    tensors[0] = _other_dims_checked(g, node, tensors, at, batch)
    return g.Concat(*tensors, axis=at)


def _other_dims_checked(g, node, values, at: int, batch: int = 0):
    """The first of the values to join along `at`, made to raise PyTensor's (NumPy's) error
    where the values differ in another dim (after the first `batch`, alike): ONNX Runtime's
    Concat raises there too, but skips an empty input without looking at its shape. Dims
    known equal (the same static size, or the same graph input's dim) need no check."""
    pairs = list(zip(node.inputs[1:], values, strict=True))
    checked = []
    for d in range(batch, node.outputs[0].type.ndim):
        if d == at:
            continue
        sizes = {known_size(var, value, d) for var, value in pairs}
        if not (len(sizes) == 1 and None not in sizes) and not same_dim(g, pairs, d):
            checked.append(d)
    if not checked:
        return values[0]
    lengths = dim_lengths(g, values, checked)
    first = constant(g, [0], "int64")
    failed = g.Not(
        g.Equal(g.ReduceMin(lengths, first, keepdims=0), g.ReduceMax(lengths, first, keepdims=0))
    )
    message = f"{node.op}: the arrays' dimensions other than the join axis {at} do not match"
    return raise_if(g, failed, values[0], ValueError, message)


@register(Split)
def split(g, node, x, axis, splits):
    """Split -> Split with the sizes as input, raising PyTensor's errors, in its order, when
    they are not n_splits, do not add up to the length of the axis or are negative."""
    at = _static_axis(node, node.inputs[1], node.inputs[0].type.ndim)
    return _split(g, node, x, splits, at)


@register_blockwise(Split)
def blockwise_split(g, node, x, axis, splits):
    """Blockwise(Split) of an axis and sizes the same for the whole batch -> Split on the core
    axis past the batch dims (sizes that vary over the batch: a Loop over it)."""
    batch = node.op.batch_ndim(node)
    if not all(node.inputs[2].type.broadcastable[:batch]):
        from pt_onnxscript.ops.blockwise import loop_over_batch

        return loop_over_batch(g, node, [x, axis, splits])
    core = blockwise_core_node(node)
    at = batch + _static_axis(core, core.inputs[1], core.inputs[0].type.ndim)
    return _split(g, node, x, g.Reshape(splits, constant(g, [-1], "int64")), at, batch)


def _split(g, node, x, splits, at: int, batch: int = 0):
    """Split's outputs: `x` split along `at` (past `batch` dims) by the 1-d `splits`,
    checked as PyTensor does."""
    sizes = g.Cast(splits, to=ir.DataType.INT64) if node.inputs[2].type.dtype != "int64" else splits
    length = g.Shape(x, start=at, end=at + 1)
    count = len(node.outputs)
    checks = []
    if node.inputs[2].type.shape[-1] != count:
        wrong_count = g.Not(g.Equal(g.Shape(sizes), constant(g, [count], "int64")))
        checks.append((wrong_count, ValueError, "Length of splits is not equal to n_splits"))
    smallest = g.ReduceMin(g.Concat(sizes, constant(g, [0], "int64"), axis=0), keepdims=0)
    checks += [
        (
            g.Not(g.Equal(g.ReduceSum(sizes, keepdims=1), length)),
            ValueError,
            f"Split sizes do not sum to the length of axis {at - batch}",
        ),
        (g.Less(smallest, constant(g, 0, "int64")), ValueError, "Split sizes cannot be negative"),
    ]
    x = raise_first(g, x, checks)
    return g.Split(x, sizes, axis=at, _outputs=count)


@register(ARange)
def arange(g, node, start, stop, step):
    """ARange -> NumPy's arange: n = ceil((stop - start) / step), the difference in the
    inputs' type (int64 for integers: in float64, arange(10**17, 10**17 + 3) was empty) and
    the quotient in float64, then start + i * delta, where delta = (start + step) - start in
    the output dtype.

    As NumPy: a zero step raises ZeroDivisionError, a length that is NaN or past int64
    ValueError (it was an empty array), and a quotient that underflows to 0 (an infinite
    step) is one element when (stop - start) has the step's sign."""
    dtype = node.outputs[0].type.dtype
    f64 = ir.DataType.DOUBLE
    start64, stop64, step64 = (g.Cast(v, to=f64) for v in (start, stop, step))
    if all(var.type.dtype.startswith("int") for var in node.inputs):
        int64 = ir.DataType.INT64
        distance = g.Cast(g.Sub(g.Cast(stop, to=int64), g.Cast(start, to=int64)), to=f64)
    else:
        distance = g.Sub(stop64, start64)
    quotient = g.Div(distance, step64)
    length = g.Ceil(quotient)
    zero_step = g.Equal(step64, constant(g, 0.0, "float64"))
    length = raise_if(g, zero_step, length, ZeroDivisionError, f"{node.op}: the step is zero")
    if any(var.type.dtype.startswith("float") for var in node.inputs):
        # Integers make none of these: no run-time checks for arange(x.shape[0]).
        nan = g.IsNaN(length)
        unknown = g.And(nan, g.Not(zero_step))
        too_long = g.Not(g.Less(g.Abs(length), constant(g, 2.0**63, "float64")))
        too_long = g.And(too_long, g.Not(g.Or(nan, zero_step)))
        length = raise_if(g, unknown, length, ValueError, "arange: cannot compute length")
        length = raise_if(g, too_long, length, ValueError, "Maximum allowed size exceeded")
        # NumPy: a quotient 0.0 of a nonzero distance is one element (-0.0: none).
        underflow = g.And(
            g.Equal(quotient, constant(g, 0.0, "float64")),
            g.Not(g.Equal(distance, constant(g, 0.0, "float64"))),
        )
        positive = g.Greater(g.Reciprocal(quotient), constant(g, 0.0, "float64"))
        length = g.Where(underflow, g.Cast(positive, to=f64), length)
    count = g.Cast(g.Max(length, constant(g, 0.0, "float64")), to=ir.DataType.INT64)
    index = g.Range(constant(g, 0, "int64"), count, constant(g, 1, "int64"))
    if dtype.startswith(("int", "uint")):
        first = g.Cast(start, to=ir.DataType.INT64)
        values = g.Add(first, g.Mul(index, g.Cast(step, to=ir.DataType.INT64)))
        return values if dtype == "int64" else g.Cast(values, to=onnx_dtype(dtype))
    target = onnx_dtype(dtype)
    first = g.Cast(start64, to=target)
    second = g.Cast(g.Add(start64, step64), to=target)
    values = g.Add(first, g.Mul(g.Cast(index, to=target), g.Sub(second, first)))
    # NumPy stores start and start + step themselves as the first two values (0 * an
    # infinite delta would be NaN, and -0.0 + 0.0 is +0.0: `where` keeps a start of -0.0).
    values = g.Where(g.Equal(index, constant(g, 1, "int64")), second, values)
    return where(g, g.Equal(index, constant(g, 0, "int64")), first, values, dtype)


@register(Eye)
def eye(g, node, n, m, k):
    """Eye -> (column - row == k) on Range grids, cast to the output dtype; a negative n or
    m raises ValueError, as NumPy's eye (it was an empty matrix)."""
    i64 = ir.DataType.INT64
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    n, m = g.Cast(n, to=i64), g.Cast(m, to=i64)
    n = raise_if(
        g,
        [g.Less(n, zero), g.Less(m, zero)],
        n,
        ValueError,
        f"{node.op}: negative dimensions are not allowed",
    )
    rows = g.Unsqueeze(g.Range(zero, n, one), constant(g, [1], "int64"))
    cols = g.Range(zero, m, one)
    return g.Cast(g.Equal(g.Sub(cols, rows), g.Cast(k, to=i64)), to=out_dtype(node))


@register(Nonzero)
def nonzero(g, node, x):
    """Nonzero -> the rows of NonZero(x != 0)."""
    dtype = node.inputs[0].type.dtype
    coords = g.NonZero(x if dtype == "bool" else g.Not(g.Equal(x, constant(g, 0, dtype))))
    rows = [g.Gather(coords, constant(g, i, "int64"), axis=0) for i in range(len(node.outputs))]
    return rows


@register(ExtractDiag)
def extract_diag(g, node, x):
    """ExtractDiag -> Gather of the diagonal's flat positions after moving axis1, axis2 last."""
    op = node.op
    ndim = node.inputs[0].type.ndim
    rest = [a for a in range(ndim) if a not in (op.axis1, op.axis2)]
    perm = rest + [op.axis1, op.axis2]
    if perm != list(range(ndim)):
        x = g.Transpose(x, perm=perm)
    rows = g.Shape(x, start=ndim - 2, end=ndim - 1)
    cols = g.Shape(x, start=ndim - 1, end=ndim)
    row0, col0 = max(-op.offset, 0), max(op.offset, 0)
    length = g.Max(
        g.Min(g.Sub(rows, constant(g, [row0], "int64")), g.Sub(cols, constant(g, [col0], "int64"))),
        constant(g, [0], "int64"),
    )
    i = g.Range(
        constant(g, 0, "int64"),
        g.Squeeze(length, constant(g, [0], "int64")),
        constant(g, 1, "int64"),
    )
    positions = g.Add(
        g.Mul(g.Add(i, constant(g, row0, "int64")), g.Squeeze(cols, constant(g, [0], "int64"))),
        g.Add(i, constant(g, col0, "int64")),
    )
    flat = g.Reshape(
        x, g.Concat(g.Shape(x, start=0, end=ndim - 2), g.Mul(rows, cols), axis=0), allowzero=1
    )
    return g.Gather(flat, positions, axis=-1)


@register(AllocDiag)
def alloc_diag(g, node, diag):
    """AllocDiag -> a Where between the diagonal `offset` (a mask) and the values padded to
    m = k + |offset| (row i of that diagonal holds value i - max(-offset, 0)), then axis1 and
    axis2 moved where the op puts them: two passes over the result, where PyTensor's inner
    graph (a zero matrix and an advanced set_subtensor) would be translated into several."""
    op = node.op
    dtype = node.outputs[0].type.dtype
    ndim = node.inputs[0].type.ndim
    shift = constant(g, [abs(op.offset)], "int64")
    values = pad_zeros(g, diag, -1, **({"after": shift} if op.offset >= 0 else {"before": shift}))
    m = g.Squeeze(g.Shape(values, start=-1), constant(g, [0], "int64"))
    index = g.Range(constant(g, 0, "int64"), m, constant(g, 1, "int64"))
    mask = g.Equal(
        g.Sub(index, g.Unsqueeze(index, constant(g, [-1], "int64"))),
        constant(g, op.offset, "int64"),
    )
    # A constant 0 (broadcast by the Where): where() puts it first, with the mask negated.
    zero = constant(g, 0, dtype)
    result = where(g, mask, g.Unsqueeze(values, constant(g, [-1], "int64")), zero, dtype)
    if ndim > 1:  # as AllocDiag's inner graph transposes
        axes = list(range(ndim - 1))
        last = axes[-1]
        axes = [*axes[: op.axis1], last + 1, *axes[op.axis1 :]]
        axes = [*axes[: op.axis2], last + 2, *axes[op.axis2 :]]
        result = g.Transpose(result, perm=axes)
    return result


@register_check(Choose)
def _check_choose(node):
    if not isinstance(node.inputs[1].type, TensorType):
        return "choose with a list of choices of different shapes (a typed list: stack them)"
    return None


@register(Choose)
def choose(g, node, a, choices):
    """Choose -> np.choose(a, choices): each element of choices[a] (a broadcast against the
    choices' shape), by GatherElements along the choices' axis; a wrapped or clipped into
    [0, n) (mode "wrap", "clip") or checked (mode "raise": NumPy's ValueError)."""
    n = g.Shape(choices, start=0, end=1)
    index = g.Cast(a, to=ir.DataType.INT64)
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    count = g.Squeeze(n, constant(g, [0], "int64"))
    if node.op.mode == "wrap":
        index = g.Mod(index, g.Max(count, one))
    elif node.op.mode == "clip":
        index = g.Max(g.Min(index, g.Sub(count, one)), zero)
    else:
        outside = g.Or(g.Less(index, zero), g.GreaterOrEqual(index, count))
        message = "invalid entry in choice array (choose with mode='raise')"
        index = raise_if(g, outside, index, ValueError, message)
    # The output's shape: a's and one choice's, broadcast.
    shape = broadcast_shape(g, [g.Shape(a), g.Shape(choices, start=1)])
    first = constant(g, [0], "int64")
    index = g.Unsqueeze(g.Expand(index, shape), first)
    picked = g.GatherElements(g.Expand(choices, g.Concat(n, shape, axis=0)), index, axis=0)
    return g.Squeeze(picked, first)


def _fitting_rows(g, node, x, y):
    """x and y, raising PyTensor's ValueError where their last dims m and n differ and
    neither is 1 (for `inverse`, where m is not 1): PyTensor's perform indexes x[y] (or
    writes out[y] = x) with NumPy, which broadcasts only those."""
    m, n = (known_size(var, value, -1) for var, value in zip(node.inputs, (x, y), strict=True))
    inverse = node.op.inverse
    if m == 1 or (m is not None and m == n) or (n == 1 and not inverse):
        return x, y
    rows = [g.Shape(x, start=-1), g.Shape(y, start=-1)]
    one = constant(g, [1], "int64")
    fits = g.Or(g.Equal(rows[0], rows[1]), g.Equal(rows[0], one))
    if not inverse:
        fits = g.Or(fits, g.Equal(rows[1], one))
    message = f"{node.op}: Dimension mismatch: the last dims of x and y differ"
    return raise_if(g, g.Not(fits), x, ValueError, message), y


@register(PermuteRowElements)
def permute_row_elements(g, node, x, y):
    """PermuteRowElements -> out[..., j] = x[..., y[..., j]] by GatherElements on the last axis
    (x and y broadcast over the others), or, inverse, out[..., y[..., j]] = x[..., j] by
    ScatterElements. Last dims that do not fit raise PyTensor's ValueError (a longer y
    gathered a longer result), as does runtime broadcasting of the others."""
    x, y = _fitting_rows(g, node, x, y)
    ndim = node.outputs[0].type.ndim
    if ndim > 1:
        x, y = check_runtime_broadcast(g, node.inputs, [x, y], ndim - 1)
    batch = broadcast_shape(g, [g.Shape(x, end=-1), g.Shape(y, end=-1)])
    rows = g.Max(g.Shape(x, start=-1), g.Shape(y, start=-1))
    full = g.Concat(batch, rows, axis=0)
    index = g.Cast(y, to=ir.DataType.INT64)
    if node.op.inverse:
        values = g.Expand(x, full)
        empty = g.Expand(constant(g, 0, node.outputs[0].type.dtype), full)
        return g.ScatterElements(empty, g.Expand(index, full), values, axis=-1)
    data = g.Expand(x, g.Concat(batch, g.Shape(x, start=-1), axis=0))
    index = g.Expand(index, g.Concat(batch, g.Shape(y, start=-1), axis=0))
    return g.Expand(g.GatherElements(data, index, axis=-1), full)
