"""Reductions (CAReduce family), Argmax, Dot."""

import numpy as np
import onnx_ir as ir
import pytensor.scalar.basic as ps
from pytensor.tensor.elemwise import CAReduce
from pytensor.tensor.math import Argmax, Dot, ProdWithoutZeros

from pt_onnxscript.ops.common import out_dtype
from pt_onnxscript.registry import register, register_blockwise
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


def reduce_axes(op, node):
    axis = node.op.axis
    return None if axis is None else op.Constant(value_ints=list(axis))


@register(CAReduce)
def careduce(op, node, x):
    """CAReduce -> Reduce{Sum,Prod,Max,Min}, computed in the accumulation dtype."""
    scalar_op = type(node.op.scalar_op)
    name = next((n for cls, n in REDUCTIONS.items() if issubclass(scalar_op, cls)), None)
    if name is None:
        raise NotImplementedError(f"No ONNX reduction for CAReduce({scalar_op.__name__})")
    in_dtype = node.inputs[0].type.dtype
    if scalar_op in (ps.AND, ps.OR) and in_dtype != "bool":
        x = op.Not(op.Equal(x, op.CastLike(0, x)))
        in_dtype = "bool"
    if node.op.axis == () or node.inputs[0].type.ndim == 0:
        return op.Cast(x, to=out_dtype(node))
    acc = getattr(node.op, "acc_dtype", None) or node.outputs[0].type.dtype
    acc = WIDER[name].get(acc, acc)
    if acc == "uint64":
        raise TypeError(f"{node.op} of uint64 has no exact ONNX translation")
    if isinstance(node.op, ProdWithoutZeros):
        x = op.Where(op.Equal(x, op.CastLike(0, x)), op.CastLike(1, x), x)
    if in_dtype != acc:
        x = op.Cast(x, to=onnx_dtype(acc))
    axes = reduce_axes(op, node)
    args = [x] if axes is None else [x, axes]
    result = getattr(op, name)(*args, keepdims=0)
    if name in ("ReduceMax", "ReduceMin") and np.dtype(acc).kind == "f":
        nan = op.Cast(op.IsNaN(x), to=onnx_dtype(acc))
        any_nan = op.Cast(op.ReduceMax(*([nan] if axes is None else [nan, axes]), keepdims=0), to=ir.DataType.BOOL)
        result = op.Where(any_nan, op.CastLike(np.nan, result), result)
    if acc != node.outputs[0].type.dtype:
        result = op.Cast(result, to=out_dtype(node))
    return result


@register(Argmax)
def argmax(op, node, x, *axis_input):
    """Argmax -> ArgMax over one axis (several axes are moved last and flattened first)."""
    ndim = node.inputs[0].type.ndim
    axes = list(range(ndim)) if node.op.axis is None else list(node.op.axis)
    dtype = node.inputs[0].type.dtype
    if dtype == "uint64":
        raise TypeError(f"{node.op} of uint64 has no exact ONNX translation")
    if dtype in ORDERED:
        x = op.Cast(x, to=onnx_dtype(ORDERED[dtype]))
    if len(axes) == 1:
        return op.ArgMax(x, axis=axes[0], keepdims=0)
    kept = [d for d in range(ndim) if d not in axes]
    x = op.Transpose(x, perm=kept + axes) if kept + axes != list(range(ndim)) else x
    kept_shape = op.Shape(x, start=0, end=len(kept)) if kept else op.Constant(value_ints=[])
    x = op.Reshape(x, op.Concat(kept_shape, op.Constant(value_ints=[-1]), axis=0))
    return op.ArgMax(x, axis=len(kept), keepdims=0)


MATMUL_DTYPES = {"float16", "float32", "float64", "int32", "int64", "uint32", "uint64"}
MATMUL_WIDER = {"int8": "int64", "int16": "int64", "uint8": "uint64", "uint16": "uint64"}


def matmul(op, node, x, y):
    """MatMul of x and y in the node's output dtype (via a wider int type where ORT needs it)."""
    dtype = node.outputs[0].type.dtype
    compute = dtype if dtype in MATMUL_DTYPES else MATMUL_WIDER.get(dtype)
    if compute is None:
        raise TypeError(f"Dot of {dtype} has no exact ONNX translation")
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
