"""Reductions (CAReduce family), Argmax, Dot."""

import numpy as np
import onnx_ir as ir
import pytensor.scalar.basic as ps
from pytensor.tensor.elemwise import CAReduce
from pytensor.tensor.math import Argmax, Dot, ProdWithoutZeros

from pt_onnxscript.ops.common import constant, loop, out_dtype, raise_if
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.types import onnx_dtype

REDUCTIONS = {
    ps.Add: "ReduceSum",
    ps.Mul: "ReduceProd",
    ps.ScalarMaximum: "ReduceMax",
    ps.ScalarMinimum: "ReduceMin",
    ps.AND: "ReduceMin",
    ps.OR: "ReduceMax",
}
# Dtypes ORT's CPU kernels lack, and the wider dtype that computes them exactly:
# modular for sums and products (same bits), order-preserving for max, min and argmax.
MODULAR = {"bool": "int64", "int8": "int64", "int16": "int64"} | {
    f"uint{b}": "int64" for b in (8, 16, 32, 64)
}
ORDERED = {"bool": "int32", "int16": "int32", "uint16": "int32", "uint32": "int64"}
WIDER = {"ReduceSum": MODULAR, "ReduceProd": MODULAR, "ReduceMax": ORDERED, "ReduceMin": ORDERED}


@register(CAReduce)
def careduce(op, node, x):
    """CAReduce -> Reduce{Sum,Prod,Max,Min}, computed in the accumulation dtype.

    NumPy's empty reductions: any of nothing is False, all of nothing is True, max and min
    raise. Integer sums and products are exact and wrap as NumPy's do (ONNX Runtime's
    integer ReduceSum and ReduceProd saturate), so they run as a MatMul with ones and as a
    tree of multiplications.
    """
    scalar_op = type(node.op.scalar_op)
    name = next((n for cls, n in REDUCTIONS.items() if issubclass(scalar_op, cls)), None)
    in_dtype = node.inputs[0].type.dtype
    if scalar_op in (ps.AND, ps.OR) and in_dtype != "bool":
        x = op.Not(op.Equal(x, op.CastLike(0, x)))
        in_dtype = "bool"
    if node.op.axis == () or node.inputs[0].type.ndim == 0:
        return op.Cast(x, to=out_dtype(node))
    ndim = node.inputs[0].type.ndim
    axes = list(range(ndim)) if node.op.axis is None else sorted(node.op.axis)
    if scalar_op in (ps.AND, ps.OR):
        # uint8: its empty ReduceMin is 255 (true) and its empty ReduceMax 0 (false).
        result = getattr(op, name)(op.Cast(x, to=ir.DataType.UINT8), _int(op, axes), keepdims=0)
        return op.Cast(result, to=out_dtype(node))
    acc = getattr(node.op, "acc_dtype", None) or node.outputs[0].type.dtype
    acc = WIDER[name].get(acc, acc)
    if isinstance(node.op, ProdWithoutZeros):
        x = op.Where(op.Equal(x, op.CastLike(0, x)), op.CastLike(1, x), x)
    if in_dtype != acc:
        x = op.Cast(x, to=onnx_dtype(acc))
    if acc == "uint64" and name in ("ReduceMax", "ReduceMin"):
        result = _from_ordered(op, getattr(op, name)(_to_ordered(op, x), _int(op, axes), keepdims=0))
    elif name in ("ReduceSum", "ReduceProd") and np.dtype(acc).kind != "f":
        rows = _reduced_last(op, x, axes, ndim)
        result = _integer_sum(op, rows) if name == "ReduceSum" else _integer_prod(op, rows, ndim - len(axes))
    else:
        result = getattr(op, name)(x, _int(op, axes), keepdims=0)
    if name in ("ReduceMax", "ReduceMin"):
        if np.dtype(acc).kind == "f":
            _, any_nan = _nan_flags(op, x, axes)
            result = op.Where(any_nan, op.CastLike(np.nan, result), result)
        result = _raise_if_empty(op, node, x, axes, result, _no_identity(name))
    if acc != node.outputs[0].type.dtype:
        result = op.Cast(result, to=out_dtype(node))
    return result


def _int(op, value):
    return constant(op, value, "int64")


def _nan_flags(op, x, axes):
    """Where `x` is NaN (uint8), and whether any element over `axes` is (bool)."""
    nan = op.Cast(op.IsNaN(x), to=ir.DataType.UINT8)
    return nan, op.Cast(op.ReduceMax(nan, _int(op, axes), keepdims=0), to=ir.DataType.BOOL)


def _no_identity(name: str) -> str:
    what = "maximum" if name == "ReduceMax" else "minimum"
    return f"zero-size array to reduction operation {what} which has no identity"


def _to_ordered(op, x):
    """uint64 `x` as the int64 values in the same order (ONNX Runtime has no uint64 ReduceMax,
    ReduceMin or ArgMax): its bits, shifted by 2**63 modulo 2**64."""
    return op.Add(op.Cast(x, to=ir.DataType.INT64), _int(op, np.iinfo(np.int64).min))


def _from_ordered(op, x):
    """The uint64 values of `_to_ordered`'s results."""
    return op.Cast(op.Add(x, _int(op, np.iinfo(np.int64).min)), to=ir.DataType.UINT64)


def _raise_if_empty(op, node, x, axes, result, message):
    """`result`, raising NumPy's error when the reduced dims hold no element."""
    static = [node.inputs[0].type.shape[d] for d in axes]
    if all(size is not None and size > 0 for size in static):
        return result
    sizes = op.Gather(op.Shape(x), _int(op, axes), axis=0)
    empty = op.Equal(op.ReduceProd(sizes, keepdims=0), _int(op, 0))
    return raise_if(op, empty, result, ValueError, message)


def _reduced_last(op, x, axes, ndim):
    """`x` with the kept dims first and the reduced ones flattened into a last dim."""
    kept = [d for d in range(ndim) if d not in axes]
    if kept + axes != list(range(ndim)):
        x = op.Transpose(x, perm=kept + axes)
    shape = op.Shape(x)
    count = op.ReduceProd(op.Slice(shape, _int(op, [len(kept)]), _int(op, [ndim])), keepdims=1)
    parts = [op.Slice(shape, _int(op, [0]), _int(op, [len(kept)])), count] if kept else [count]
    return op.Reshape(x, op.Concat(*parts, axis=0) if kept else count, allowzero=1)


def _integer_sum(op, rows):
    """The exact, wrapping sums over the last dim of int64 `rows`: a MatMul with ones."""
    ones = op.Expand(_int(op, 1), op.Shape(rows, start=-1))
    return op.MatMul(rows, ones)


def _integer_prod(op, rows, kept: int):
    """The exact, wrapping products over the last dim of int64 `rows` (of rank kept + 1):
    pairs multiplied until one value is left, padded with ones to an even length."""
    rows = op.Concat(rows, op.Expand(_int(op, 1), op.Concat(op.Shape(rows, end=-1), _int(op, [1]), axis=0)), axis=-1)

    def step(op, _, y):
        length = op.Shape(y, start=-1)
        half = op.Div(op.Add(length, _int(op, 1)), _int(op, 2))
        pads = op.Concat(_int(op, [0] * (2 * kept + 1)), op.Sub(op.Add(half, half), length), axis=0)
        y = op.Pad(y, pads, _int(op, 1))
        y = op.Reshape(y, op.Concat(op.Shape(y, end=-1), half, _int(op, [2]), axis=0), allowzero=1)
        y = op.Mul(op.Gather(y, _int(op, 0), axis=-1), op.Gather(y, _int(op, 1), axis=-1))
        return [op.Squeeze(op.Greater(half, _int(op, [1])), _int(op, [0])), y]

    go = op.Squeeze(op.Greater(op.Shape(rows, start=-1), _int(op, [1])), _int(op, [0]))
    (rows,) = loop(op, None, [rows], step, "prod", condition=go)
    return op.Squeeze(rows, _int(op, [-1]))


@register(Argmax)
def argmax(op, node, x, *axis_input):
    """Argmax -> ArgMax over one axis (several axes are moved last and flattened first).

    As NumPy: the first NaN wins, and an empty axis raises."""
    ndim = node.inputs[0].type.ndim
    axes = list(range(ndim)) if node.op.axis is None else sorted(node.op.axis)
    dtype = node.inputs[0].type.dtype
    original = x
    if dtype in ORDERED:
        x = op.Cast(x, to=onnx_dtype(ORDERED[dtype]))
    elif dtype == "uint64":
        x = _to_ordered(op, x)
    if len(axes) != 1:
        x = _reduced_last(op, x, axes, ndim)
    axis = axes[0] if len(axes) == 1 else ndim - len(axes)
    result = op.ArgMax(x, axis=axis, keepdims=0)
    if np.dtype(dtype).kind == "f":
        nan, any_nan = _nan_flags(op, x, [axis])
        result = op.Where(any_nan, op.ArgMax(nan, axis=axis, keepdims=0), result)
    return _raise_if_empty(op, node, original, axes, result, "attempt to get argmax of an empty sequence")


# Integers ONNX Runtime's MatMul lacks (its unsigned kernels also fail on an empty inner dim)
# multiply in int64, which holds the same bits modulo 2**64.
MATMUL_DTYPES = {"float16", "float32", "float64", "int32", "int64"}
MATMUL_WIDER = {"int8": "int64", "int16": "int64"} | {f"uint{b}": "int64" for b in (8, 16, 32, 64)}


@register_check(Dot)
def dot_dtype(node):
    dtype = node.outputs[0].type.dtype
    if dtype not in MATMUL_DTYPES and dtype not in MATMUL_WIDER:
        return f"Dot of {dtype} has no exact ONNX translation (cast the operands to an integer type)"
    return None


@register_check(CAReduce)
def reduction_kind(node):
    scalar_op = type(node.op.scalar_op)
    if not any(issubclass(scalar_op, cls) for cls in REDUCTIONS):
        return f"no ONNX reduction for CAReduce({scalar_op.__name__})"
    return None


def matmul(op, node, x, y):
    """MatMul of x and y in the node's output dtype (via a wider int type where ORT needs it)."""
    dtype = node.outputs[0].type.dtype
    compute = dtype if dtype in MATMUL_DTYPES else MATMUL_WIDER.get(dtype)
    x, y = [
        v if var.type.dtype == compute else op.Cast(v, to=onnx_dtype(compute))
        for var, v in zip(node.inputs[:2], (x, y), strict=True)
    ]
    result = op.MatMul(x, y)
    return result if compute == dtype else op.Cast(result, to=onnx_dtype(dtype))


@register(Dot)
@register_blockwise(Dot)
def dot(op, node, x, y):
    """Dot -> MatMul (which broadcasts batch dims as Blockwise does)."""
    return matmul(op, node, x, y)
