"""Shape, Shape_i, Reshape, SpecifyShape."""

import onnx_ir as ir
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape

from pt_onnxscript.registry import register


@register(Shape)
def shape(op, node, x):
    """Shape -> Shape (int64 vector)."""
    return op.Shape(x)


@register(Shape_i)
def shape_i(op, node, x):
    """Shape_i{i} -> Shape(start=i, end=i+1), squeezed to a scalar."""
    i = node.op.i
    return op.Squeeze(op.Shape(x, start=i, end=i + 1), op.Constant(value_ints=[0]))


@register(Reshape)
def reshape(op, node, x, shp):
    """Reshape -> Reshape(allowzero=1): a 0 in PyTensor's shape is a size, as in NumPy."""
    return op.Reshape(x, op.Cast(shp, to=ir.DataType.INT64), allowzero=1)


@register(SpecifyShape)
def specify_shape(op, node, x, *shape):
    """SpecifyShape -> Identity: ONNX cannot raise, so the shape check is dropped."""
    return op.Identity(x)
