"""Tensor construction and joining: the Ops of pytensor.tensor.basic."""

import numpy as np
import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.basic import (
    ARange,
    Alloc,
    AllocEmpty,
    ExtractDiag,
    Eye,
    Join,
    MakeVector,
    Nonzero,
    ScalarFromTensor,
    Split,
    TensorFromScalar,
)

from pt_onnxscript.ops.common import constant, out_dtype, raise_if
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.types import as_ir_tensor, onnx_dtype


def shape_vector(op, dims):
    """An int64 vector from scalar dims."""
    if not dims:
        return op.Constant(value_ints=[])
    zero = op.Constant(value_ints=[0])
    return op.Concat(*[op.Unsqueeze(op.Cast(d, to=ir.DataType.INT64), zero) for d in dims], axis=0)


@register(Alloc)
def alloc(op, node, value, *shape):
    """Alloc -> Expand of the value to the given shape; an empty tensor from ConstantOfShape
    when a size is a constant 0 (ONNX Runtime's optimizer drops an Expand to a constant shape
    with a 0, leaving the value's own shape: the file is right, the session is not)."""
    if any(isinstance(var, Constant) and var.data == 0 for var in node.inputs[1:]):
        zero = as_ir_tensor(np.zeros((1,)), node.outputs[0].type.dtype)
        return op.ConstantOfShape(shape_vector(op, shape), value=zero)
    return op.Expand(value, shape_vector(op, shape))


@register(AllocEmpty)
def alloc_empty(op, node, *shape):
    """AllocEmpty -> zeros (ConstantOfShape): ONNX has no uninitialised memory."""
    zero = as_ir_tensor(np.zeros((1,)), node.outputs[0].type.dtype)
    return op.ConstantOfShape(shape_vector(op, shape), value=zero)


@register(MakeVector)
def make_vector(op, node, *scalars):
    """MakeVector -> Concat of the scalars, cast to the op's dtype."""
    if not scalars:
        return op.Constant(value=as_ir_tensor(np.zeros((0,)), node.op.dtype))
    zero = op.Constant(value_ints=[0])
    return op.Concat(*[op.Unsqueeze(op.Cast(s, to=out_dtype(node)), zero) for s in scalars], axis=0)


@register(ScalarFromTensor, TensorFromScalar)
def scalar_tensor(op, node, x):
    """ScalarFromTensor, TensorFromScalar -> Identity (both are 0-d tensors in ONNX)."""
    return op.Identity(x)


@register_check(Join, Split)
def constant_axis(node):
    var = node.inputs[0] if isinstance(node.op, Join) else node.inputs[1]
    return None if isinstance(var, Constant) else f"the axis must be a constant for ONNX, got {var}"


def _static_axis(node, var, ndim: int) -> int:
    axis = int(var.data)
    return axis + ndim if axis < 0 else axis


@register(Join)
def join(op, node, axis, *tensors):
    """Join -> Concat on the constant axis, inputs cast to the output dtype."""
    out = node.outputs[0].type
    at = _static_axis(node, node.inputs[0], out.ndim)
    tensors = [
        x if var.type.dtype == out.dtype else op.Cast(x, to=onnx_dtype(out.dtype))
        for var, x in zip(node.inputs[1:], tensors, strict=True)
    ]
    return op.Concat(*tensors, axis=at) if len(tensors) > 1 else op.Identity(tensors[0])


@register(Split)
def split(op, node, x, axis, splits):
    """Split -> Split with the sizes as input, raising PyTensor's error when they are negative
    or do not add up to the length of the axis."""
    at = _static_axis(node, node.inputs[1], node.inputs[0].type.ndim)
    sizes = op.Cast(splits, to=ir.DataType.INT64) if node.inputs[2].type.dtype != "int64" else splits
    length = op.Shape(x, start=at, end=at + 1)
    zero = constant(op, 0, "int64")
    failed = [
        op.Not(op.Equal(op.ReduceSum(sizes, keepdims=1), length)),
        op.Less(op.ReduceMin(op.Concat(sizes, constant(op, [0], "int64"), axis=0), keepdims=0), zero),
    ]
    x = raise_if(op, failed, x, ValueError, f"{node.op}: the split sizes are negative or do not add up to the length of axis {at}")
    outputs = op.Split(x, sizes, axis=at, _outputs=len(node.outputs))
    return outputs if len(node.outputs) > 1 else [outputs]


@register(ARange)
def arange(op, node, start, stop, step):
    """ARange -> NumPy's arange: n = ceil((stop - start) / step) in float64, then
    start + i * delta, where delta = (start + step) - start in the output dtype."""
    dtype = node.outputs[0].type.dtype
    f64 = ir.DataType.DOUBLE
    start64, stop64, step64 = (op.Cast(v, to=f64) for v in (start, stop, step))
    count = op.Cast(
        op.Max(op.Ceil(op.Div(op.Sub(stop64, start64), step64)), constant(op, 0.0, "float64")),
        to=ir.DataType.INT64,
    )
    index = op.Range(constant(op, 0, "int64"), count, constant(op, 1, "int64"))
    if dtype.startswith(("int", "uint")):
        first = op.Cast(start, to=ir.DataType.INT64)
        values = op.Add(first, op.Mul(index, op.Cast(step, to=ir.DataType.INT64)))
        return values if dtype == "int64" else op.Cast(values, to=onnx_dtype(dtype))
    target = onnx_dtype(dtype)
    first = op.Cast(start64, to=target)
    second = op.Cast(op.Add(start64, step64), to=target)
    values = op.Add(first, op.Mul(op.Cast(index, to=target), op.Sub(second, first)))
    # NumPy stores start + step itself as the second value.
    return op.Where(op.Equal(index, constant(op, 1, "int64")), second, values)


@register(Eye)
def eye(op, node, n, m, k):
    """Eye -> (column - row == k) on Range grids, cast to the output dtype."""
    i64 = ir.DataType.INT64
    zero, one = constant(op, 0, "int64"), constant(op, 1, "int64")
    rows = op.Unsqueeze(op.Range(zero, op.Cast(n, to=i64), one), constant(op, [1], "int64"))
    cols = op.Range(zero, op.Cast(m, to=i64), one)
    return op.Cast(op.Equal(op.Sub(cols, rows), op.Cast(k, to=i64)), to=out_dtype(node))


@register(Nonzero)
def nonzero(op, node, x):
    """Nonzero -> the rows of NonZero(x != 0)."""
    dtype = node.inputs[0].type.dtype
    coords = op.NonZero(x if dtype == "bool" else op.Not(op.Equal(x, constant(op, 0, dtype))))
    rows = [op.Gather(coords, constant(op, i, "int64"), axis=0) for i in range(len(node.outputs))]
    return rows if len(rows) > 1 else rows[0]


@register(ExtractDiag)
def extract_diag(op, node, x):
    """ExtractDiag -> Gather of the diagonal's flat positions after moving axis1, axis2 last."""
    d = node.op
    ndim = node.inputs[0].type.ndim
    rest = [a for a in range(ndim) if a not in (d.axis1, d.axis2)]
    perm = rest + [d.axis1, d.axis2]
    if perm != list(range(ndim)):
        x = op.Transpose(x, perm=perm)
    rows = op.Shape(x, start=ndim - 2, end=ndim - 1)
    cols = op.Shape(x, start=ndim - 1, end=ndim)
    row0, col0 = max(-d.offset, 0), max(d.offset, 0)
    length = op.Max(
        op.Min(op.Sub(rows, constant(op, [row0], "int64")), op.Sub(cols, constant(op, [col0], "int64"))),
        constant(op, [0], "int64"),
    )
    i = op.Range(constant(op, 0, "int64"), op.Squeeze(length, constant(op, [0], "int64")), constant(op, 1, "int64"))
    positions = op.Add(
        op.Mul(op.Add(i, constant(op, row0, "int64")), op.Squeeze(cols, constant(op, [0], "int64"))),
        op.Add(i, constant(op, col0, "int64")),
    )
    flat = op.Reshape(x, op.Concat(op.Shape(x, start=0, end=ndim - 2), op.Mul(rows, cols), axis=0), allowzero=1)
    return op.Gather(flat, positions, axis=-1)
