"""SortOp and ArgSortOp: stable sorts, NaNs last, as NumPy's kind="stable"."""

import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.sort import ArgSortOp, SortOp

from pt_onnxscript.ops.common import constant, ordered_int64
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.runtime_gaps import kernel_dtype
from pt_onnxscript.types import onnx_dtype


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


def _ascending(g, key, axis: int):
    """Indices sorting `key` along `axis`; TopK breaks ties by the lower index, so it is stable."""
    count = g.Shape(key, start=axis, end=axis + 1)
    _, indices = g.TopK(key, count, axis=axis, largest=0, sorted=1, _outputs=2)
    return indices


def argsort(g, node, x):
    """Stable ascending order of x along its axis, NaNs last in their original order."""
    axis = _axis(node, x)
    dtype = node.inputs[0].type.dtype
    if node.inputs[1].data is None:
        x = g.Reshape(x, constant(g, [-1], "int64"))
    if dtype == "uint64":  # no kernel holds its values: int64 keys in the same order
        key = ordered_int64(g, x)
    else:
        via = kernel_dtype("TopK", dtype)
        key = x if via == dtype else g.Cast(x, to=onnx_dtype(via))
    if not dtype.startswith("float"):
        return _ascending(g, key, axis)
    nan = g.IsNaN(key)
    order = _ascending(g, g.Where(nan, constant(g, float("inf"), via), key), axis)
    # Then move the NaNs last: a stable sort on the NaN flag keeps both groups in order.
    flags = g.Cast(g.GatherElements(nan, order, axis=axis), to=ir.DataType.INT32)
    return g.GatherElements(order, _ascending(g, flags, axis), axis=axis)


@register(ArgSortOp)
def argsort_op(g, node, x, axis):
    """ArgSortOp -> TopK(largest=0) indices, NaNs moved last."""
    return argsort(g, node, x)


@register(SortOp)
def sort_op(g, node, x, axis):
    """SortOp -> x gathered in its stable sorted order."""
    order = argsort(g, node, x)
    if node.inputs[1].data is None:
        x = g.Reshape(x, constant(g, [-1], "int64"))
    return g.GatherElements(x, order, axis=_axis(node, x))
