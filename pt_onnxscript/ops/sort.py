"""SortOp and ArgSortOp: stable sorts, NaNs last, as NumPy's kind="stable"."""

import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.sort import ArgSortOp, SortOp

from pt_onnxscript.ops.common import constant
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.types import onnx_dtype

# ONNX Runtime's TopK kernels; other dtypes sort as a wider dtype holding the same values.
TOPK_DTYPE = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "int32",
              "uint16": "int32", "uint32": "int64", "float16": "float32"}


@register_check(SortOp, ArgSortOp)
def constant_sort_axis(node):
    if not isinstance(node.inputs[1], Constant):
        return "the sort axis must be a constant for ONNX"
    return None


def _axis(node, x):
    """The sort axis, and `x` flattened when PyTensor sorts the flattened array."""
    var = node.inputs[1]
    if var.data is None:
        return 0
    axis = int(var.data)
    return axis + node.inputs[0].type.ndim if axis < 0 else axis


def _ascending(op, key, axis: int):
    """Indices sorting `key` along `axis`; TopK breaks ties by the lower index, so it is stable."""
    count = op.Shape(key, start=axis, end=axis + 1)
    _, indices = op.TopK(key, count, axis=axis, largest=0, sorted=1, _outputs=2)
    return indices


def argsort(op, node, x):
    """Stable ascending order of x along its axis, NaNs last in their original order."""
    axis = _axis(node, x)
    dtype = node.inputs[0].type.dtype
    if node.inputs[1].data is None:
        x = op.Reshape(x, constant(op, [-1], "int64"))
    via = TOPK_DTYPE.get(dtype)
    key = x if via is None else op.Cast(x, to=onnx_dtype(via))
    if not dtype.startswith("float"):
        return _ascending(op, key, axis)
    nan = op.IsNaN(key)
    order = _ascending(op, op.Where(nan, constant(op, float("inf"), via or dtype), key), axis)
    # Then move the NaNs last: a stable sort on the NaN flag keeps both groups in order.
    flags = op.Cast(op.GatherElements(nan, order, axis=axis), to=ir.DataType.INT32)
    return op.GatherElements(order, _ascending(op, flags, axis), axis=axis)


@register(ArgSortOp)
def argsort_op(op, node, x, axis):
    """ArgSortOp -> TopK(largest=0) indices, NaNs moved last."""
    return argsort(op, node, x)


@register(SortOp)
def sort_op(op, node, x, axis):
    """SortOp -> x gathered in its stable sorted order."""
    order = argsort(op, node, x)
    if node.inputs[1].data is None:
        x = op.Reshape(x, constant(op, [-1], "int64"))
    return op.GatherElements(x, order, axis=_axis(node, x))
