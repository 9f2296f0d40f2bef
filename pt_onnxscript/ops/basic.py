"""Alloc, AllocEmpty, MakeVector, ScalarFromTensor, TensorFromScalar."""

import numpy as np
import onnx_ir as ir
from pytensor.tensor.basic import Alloc, AllocEmpty, MakeVector, ScalarFromTensor, TensorFromScalar

from pt_onnxscript.ops.common import out_dtype
from pt_onnxscript.registry import register
from pt_onnxscript.types import as_ir_tensor


def shape_vector(op, dims):
    """An int64 vector from scalar dims."""
    if not dims:
        return op.Constant(value_ints=[])
    zero = op.Constant(value_ints=[0])
    return op.Concat(*[op.Unsqueeze(op.Cast(d, to=ir.DataType.INT64), zero) for d in dims], axis=0)


@register(Alloc)
def alloc(op, node, value, *shape):
    """Alloc -> Expand of the value to the given shape."""
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
