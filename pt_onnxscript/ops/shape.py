"""Shape, Shape_i, Reshape, SpecifyShape."""

import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.basic import MakeVector
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.type_other import NoneTypeT

from pt_onnxscript.ops.common import constant, raise_if
from pt_onnxscript.registry import register, register_check


@register(Shape)
def shape(g, node, x):
    """Shape -> Shape (int64 vector)."""
    return g.Shape(x)


@register(Shape_i)
def shape_i(g, node, x):
    """Shape_i{i} -> Shape(start=i, end=i+1), squeezed to a scalar."""
    i = node.op.i
    return g.Squeeze(g.Shape(x, start=i, end=i + 1), g.Constant(value_ints=[0]))


@register_check(Reshape)
def _check_reshape(node):
    """A shape known to hold both 0 and -1: NumPy refuses it for every array (the -1 is
    undetermined, or the sizes do not fit), and ONNX's Reshape with allowzero too (its model
    fails ONNX's check)."""
    sizes = _constant_sizes(node.inputs[1])
    if sizes is not None and 0 in sizes and -1 in sizes:
        return (
            f"reshape to {tuple(sizes)}: a shape with both 0 and -1, which NumPy refuses "
            "for every array (PyTensor's Python backend raises); give the size for -1"
        )
    return None


def _constant_sizes(shape) -> list[int] | None:
    """The sizes of a Reshape's shape that are constants (None where none is)."""
    if isinstance(shape, Constant):
        return [int(v) for v in shape.data.reshape(-1)]
    if shape.owner is not None and isinstance(shape.owner.op, MakeVector):
        return [int(v.data) for v in shape.owner.inputs if isinstance(v, Constant)]
    return None


@register(Reshape)
def reshape(g, node, x, shp):
    """Reshape -> Reshape(allowzero=1): a 0 in PyTensor's shape is a size, as in NumPy;
    ``x.reshape((x.shape[0], -1))`` -> Flatten(axis=1)."""
    if _flattens_after_first_dim(node):
        return g.Flatten(x, axis=1)
    return g.Reshape(x, g.Cast(shp, to=ir.DataType.INT64), allowzero=1)


def _flattens_after_first_dim(node) -> bool:
    x, shape = node.inputs
    if x.type.ndim < 2 or shape.owner is None or not isinstance(shape.owner.op, MakeVector):
        return False
    first, *rest = shape.owner.inputs
    return (
        len(rest) == 1
        and isinstance(rest[0], Constant)
        and rest[0].data == -1
        and first.owner is not None
        and isinstance(first.owner.op, Shape_i)
        and first.owner.op.i == 0
        and first.owner.inputs[0] is x
    )


@register(SpecifyShape)
def specify_shape(g, node, x, *shape):
    """SpecifyShape -> x, guarded to raise PyTensor's AssertionError where a dim whose size
    is not static differs from the one specified."""
    failed = []
    for i, (var, size) in enumerate(zip(node.inputs[1:], shape, strict=True)):
        if isinstance(var.type, NoneTypeT) or node.inputs[0].type.shape[i] is not None:
            continue  # not specified, or already checked by PyTensor's types
        actual = g.Shape(x, start=i, end=i + 1)
        failed.append(
            g.Not(
                g.Equal(
                    actual, g.Reshape(g.Cast(size, to=ir.DataType.INT64), constant(g, [1], "int64"))
                )
            )
        )
    if not failed:
        return g.Identity(x)
    expected = tuple(_written(var) for var in node.inputs[1:])
    message = f"SpecifyShape: got a shape other than the one specified, {expected}"
    return raise_if(g, failed, x, AssertionError, message.replace("'", ""))


def _written(var):
    """A specified size as the message shows it: its value, None or the variable's name."""
    if isinstance(var, Constant):
        return None if var.data is None else int(var.data)
    return var.name or "?"
