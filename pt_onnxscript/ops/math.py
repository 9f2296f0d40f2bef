"""Reductions (CAReduce family), Argmax, Dot."""

import numpy as np
import onnx_ir as ir
import pytensor.scalar.basic as ps
from pytensor.graph.traversal import ancestors
from pytensor.tensor.elemwise import CAReduce, Elemwise
from pytensor.tensor.math import Argmax, Dot, MulWithoutZeros, ProdWithoutZeros

from pt_onnxscript.ops.common import (
    any_last,
    constant,
    ints,
    loop,
    ordered_int64,
    out_dtype,
    pad_zeros,
    raise_if,
    where,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.runtime_gaps import has_kernel, kernel_dtype
from pt_onnxscript.translate import translate_node
from pt_onnxscript.types import onnx_dtype

REDUCTIONS = {
    ps.Add: "ReduceSum",
    ps.Mul: "ReduceProd",
    MulWithoutZeros: "ReduceProd",
    ps.ScalarMaximum: "ReduceMax",
    ps.ScalarMinimum: "ReduceMin",
    ps.AND: "ReduceMin",
    ps.OR: "ReduceMax",
}


@register(CAReduce)
def careduce(g, node, x):
    """CAReduce -> Reduce{Sum,Prod,Max,Min}, computed in the accumulation dtype.

    NumPy's empty reductions: any of nothing is False, all of nothing is True, max and min
    raise. Integer sums and products are exact and wrap as NumPy's do (ONNX Runtime's
    integer ReduceSum and ReduceProd saturate), so they run as a MatMul with ones and as a
    tree of multiplications. A sum or product fused with an Elemwise (`unfused`) is that
    Elemwise, then that reduction.
    """
    parts = unfused(node)
    if parts is not None:
        for part in parts:
            [x] = translate_node(g, part, [x])
        return x
    scalar_op = type(node.op.scalar_op)
    name = next((n for cls, n in REDUCTIONS.items() if issubclass(scalar_op, cls)), None)
    in_dtype = node.inputs[0].type.dtype
    if scalar_op in (ps.AND, ps.OR) and in_dtype != "bool":
        x = g.Not(g.Equal(x, g.CastLike(0, x)))
        in_dtype = "bool"
    if node.op.axis == () or node.inputs[0].type.ndim == 0:
        return g.Cast(x, to=out_dtype(node))
    ndim = node.inputs[0].type.ndim
    axes = list(range(ndim)) if node.op.axis is None else sorted(node.op.axis)
    if scalar_op in (ps.AND, ps.OR):
        # uint8: its empty ReduceMin is 255 (true) and its empty ReduceMax 0 (false).
        result = getattr(g, name)(g.Cast(x, to=ir.DataType.UINT8), ints(g, axes), keepdims=0)
        return g.Cast(result, to=out_dtype(node))
    acc = getattr(node.op, "acc_dtype", None) or node.outputs[0].type.dtype
    if name in ("ReduceSum", "ReduceProd"):
        acc = _modular(acc)
    elif acc != "uint64":  # uint64 is mapped to int64 in order below
        acc = kernel_dtype(name, acc)
    given = x
    if isinstance(node.op, ProdWithoutZeros):
        x = g.Where(g.Equal(x, g.CastLike(0, x)), g.CastLike(1, x), x)
    if in_dtype != acc:
        x = g.Cast(x, to=onnx_dtype(acc))
    if acc == "uint64" and name in ("ReduceMax", "ReduceMin"):
        result = _from_ordered(g, getattr(g, name)(ordered_int64(g, x), ints(g, axes), keepdims=0))
    elif name in ("ReduceSum", "ReduceProd") and np.dtype(acc).kind != "f":
        rows = _reduced_last(g, x, axes, ndim)
        result = (
            _integer_sum(g, rows)
            if name == "ReduceSum"
            else _integer_prod(g, rows, ndim - len(axes))
        )
    else:
        result = getattr(g, name)(x, ints(g, axes), keepdims=0)
    if name in ("ReduceMax", "ReduceMin"):
        if np.dtype(acc).kind == "f":
            _, any_nan = _nan_flags(g, x, axes)
            result = g.Where(any_nan, g.CastLike(np.nan, result), result)
        if not getattr(node.op, "empty_is_identity", False):  # rewrites.StabilizingMax
            result = _raise_if_empty(g, node, x, axes, result, _no_identity(name))
    if acc != node.outputs[0].type.dtype:
        result = g.Cast(result, to=out_dtype(node))
    if isinstance(node.op, ProdWithoutZeros):
        result = _where_all_zero(g, node, given, axes, ndim, result)
    return result


def _where_all_zero(g, node, x, axes, ndim, result):
    """ProdWithoutZeros's `result` (the product of the nonzero elements), or where a reduced
    slice of `x` holds only zeros, what PyTensor's MulWithoutZeros(a, b) (b if a is 0, a if b
    is 0) leaves: the slice's last zero, -0.0 included; 0 for an empty slice."""
    dtype = node.outputs[0].type.dtype
    rows = _reduced_last(g, x, axes, ndim)
    last = g.Gather(pad_zeros(g, rows, -1, before=ints(g, [1])), ints(g, -1), axis=-1)
    if node.inputs[0].type.dtype != dtype:
        last = g.Cast(last, to=onnx_dtype(dtype))
    some = any_last(g, g.Not(g.Equal(rows, g.CastLike(0, rows))))
    return where(g, some, result, last, dtype)


def _nan_flags(g, x, axes):
    """Where `x` is NaN (uint8), and whether any element over `axes` is (bool)."""
    nan = g.Cast(g.IsNaN(x), to=ir.DataType.UINT8)
    return nan, g.Cast(g.ReduceMax(nan, ints(g, axes), keepdims=0), to=ir.DataType.BOOL)


def _no_identity(name: str) -> str:
    what = "maximum" if name == "ReduceMax" else "minimum"
    return f"zero-size array to reduction operation {what} which has no identity"


def _from_ordered(g, x):
    """The uint64 values of `ordered_int64`'s results."""
    return g.Cast(g.Add(x, ints(g, np.iinfo(np.int64).min)), to=ir.DataType.UINT64)


def _raise_if_empty(g, node, x, axes, result, message):
    """`result`, raising NumPy's error when the reduced dims hold no element."""
    static = [node.inputs[0].type.shape[d] for d in axes]
    if all(size is not None and size > 0 for size in static):
        return result
    sizes = g.Gather(g.Shape(x), ints(g, axes), axis=0)
    empty = g.Equal(g.ReduceProd(sizes, keepdims=0), ints(g, 0))
    return raise_if(g, empty, result, ValueError, message)


def _reduced_last(g, x, axes, ndim):
    """`x` with the kept dims first and the reduced ones flattened into a last dim."""
    kept = [d for d in range(ndim) if d not in axes]
    if kept + axes != list(range(ndim)):
        x = g.Transpose(x, perm=kept + axes)
    shape = g.Shape(x)
    count = g.ReduceProd(g.Slice(shape, ints(g, [len(kept)]), ints(g, [ndim])), keepdims=1)
    parts = [g.Slice(shape, ints(g, [0]), ints(g, [len(kept)])), count] if kept else [count]
    return g.Reshape(x, g.Concat(*parts, axis=0) if kept else count, allowzero=1)


def _integer_sum(g, rows):
    """The exact, wrapping sums over the last dim of int64 `rows`: a MatMul with ones."""
    ones = g.Expand(ints(g, 1), g.Shape(rows, start=-1))
    return g.MatMul(rows, ones)


def _integer_prod(g, rows, kept: int):
    """The exact, wrapping products over the last dim of int64 `rows` (of rank kept + 1):
    pairs multiplied until one value is left, padded with ones to an even length."""
    rows = g.Concat(
        rows, g.Expand(ints(g, 1), g.Concat(g.Shape(rows, end=-1), ints(g, [1]), axis=0)), axis=-1
    )

    def step(g, _, y):
        length = g.Shape(y, start=-1)
        half = g.Div(g.Add(length, ints(g, 1)), ints(g, 2))
        pads = g.Concat(ints(g, [0] * (2 * kept + 1)), g.Sub(g.Add(half, half), length), axis=0)
        y = g.Pad(y, pads, ints(g, 1))
        y = g.Reshape(y, g.Concat(g.Shape(y, end=-1), half, ints(g, [2]), axis=0), allowzero=1)
        y = g.Mul(g.Gather(y, ints(g, 0), axis=-1), g.Gather(y, ints(g, 1), axis=-1))
        return [g.Squeeze(g.Greater(half, ints(g, [1])), ints(g, [0])), y]

    go = g.Squeeze(g.Greater(g.Shape(rows, start=-1), ints(g, [1])), ints(g, [0]))
    (rows,) = loop(g, None, [rows], step, "prod", condition=go)
    return g.Squeeze(rows, ints(g, [-1]))


@register(Argmax)
def argmax(g, node, x, *axis_input):
    """Argmax -> ArgMax over one axis (several axes are moved last and flattened first).

    As NumPy: the first NaN wins, and an empty axis raises."""
    ndim = node.inputs[0].type.ndim
    axes = list(range(ndim)) if node.op.axis is None else sorted(node.op.axis)
    dtype = node.inputs[0].type.dtype
    original = x
    if dtype == "uint64":
        x = ordered_int64(g, x)
    elif (via := kernel_dtype("ArgMax", dtype)) != dtype:
        x = g.Cast(x, to=onnx_dtype(via))
    if len(axes) != 1:
        x = _reduced_last(g, x, axes, ndim)
    axis = axes[0] if len(axes) == 1 else ndim - len(axes)
    result = g.ArgMax(x, axis=axis, keepdims=0)
    if np.dtype(dtype).kind == "f":
        nan, any_nan = _nan_flags(g, x, [axis])
        result = g.Where(any_nan, g.ArgMax(nan, axis=axis, keepdims=0), result)
    return _raise_if_empty(
        g, node, original, axes, result, "attempt to get argmax of an empty sequence"
    )


def _modular(dtype: str) -> str:
    """The dtype integer sums (MatMul with ones), products and dot products of `dtype` compute
    in: `dtype` where ONNX Runtime's MatMul has a sound kernel for it, else int64, which holds
    the same bits modulo 2**64 (its unsigned MatMul fails on an empty inner dim)."""
    if np.dtype(dtype).kind == "f":
        return dtype
    if has_kernel("MatMul", dtype) and np.dtype(dtype).kind == "i":
        return dtype
    return "int64"


def unfused(node) -> list | None:
    """The nodes that PyTensor's local_careduce_fusion (a rewrite for its C backend, in
    2.38's default mode) fused into CAReduce `node`: its scalar op a Composite([acc, x],
    [acc + f(x)]) (or *, maybe cast to the accumulation dtype) is Elemwise(f) and then the
    CAReduce of + (*); None for any other CAReduce."""
    fused = node.op.scalar_op
    if not isinstance(fused, ps.Composite) or len(fused.inputs) != 2 or len(fused.outputs) != 1:
        return None
    acc, arg = fused.inputs
    out = fused.outputs[0]
    if out.owner is not None and isinstance(out.owner.op, ps.Cast):
        out = out.owner.inputs[0]
    if out.owner is None or type(out.owner.op) not in (ps.Add, ps.Mul):
        return None
    if len(out.owner.inputs) != 2 or out.owner.inputs[0] is not acc:
        return None
    value = out.owner.inputs[1]
    if acc in ancestors([value]):
        return None
    x = node.inputs[0]
    parts = []
    if value is not arg:
        parts.append(Elemwise(ps.Composite([arg], [value])).make_node(x))
        x = parts[-1].outputs[0]
    op = node.op
    reduce = CAReduce(
        out.owner.op,
        axis=op.axis,
        dtype=op.dtype,
        acc_dtype=op.acc_dtype,
        upcast_discrete_output=op.upcast_discrete_output,
    )
    parts.append(reduce.make_node(x))
    # The same dtype and rank (static sizes may be known only to the parts: a baked input).
    if not node.outputs[0].type.is_super(parts[-1].outputs[0].type):
        return None
    return parts


@register_check(CAReduce)
def reduction_kind(node):
    if unfused(node) is not None:
        return None
    scalar_op = type(node.op.scalar_op)
    if not any(issubclass(scalar_op, cls) for cls in REDUCTIONS):
        return f"no ONNX reduction for CAReduce({scalar_op.__name__})"
    return None


def matmul(g, node, x, y):
    """MatMul of x and y in the node's output dtype (via a wider int type where ORT needs it);
    of booleans, NumPy's: whether any x[i, k] and y[k, j] are both true."""
    dtype = node.outputs[0].type.dtype
    if dtype == "bool":
        # A count of the true pairs in float32 (ONNX has no boolean MatMul): a sum of 0s and
        # 1s is 0 only when every term is, however it rounds.
        x, y = (g.Cast(v, to=ir.DataType.FLOAT) for v in (x, y))
        return g.Greater(g.MatMul(x, y), constant(g, 0.0, "float32"))
    compute = _modular(dtype)
    x, y = [
        v if var.type.dtype == compute else g.Cast(v, to=onnx_dtype(compute))
        for var, v in zip(node.inputs[:2], (x, y), strict=True)
    ]
    result = g.MatMul(x, y)
    return result if compute == dtype else g.Cast(result, to=onnx_dtype(dtype))


@register(Dot)
@register_blockwise(Dot)
def dot(g, node, x, y):
    """Dot -> MatMul (which broadcasts batch dims as Blockwise does)."""
    return matmul(g, node, x, y)
