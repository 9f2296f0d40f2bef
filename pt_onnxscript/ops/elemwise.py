"""Elemwise and DimShuffle."""

from pytensor.scalar.basic import Composite
from pytensor.tensor.elemwise import DimShuffle, Elemwise

from pt_onnxscript.ops.common import check_runtime_broadcast
from pt_onnxscript.ops.scalar.basic import elemwise_composite
from pt_onnxscript.registry import register
from pt_onnxscript.translate import scalar_node, translate_node


@register(Elemwise)
def elemwise(g, node, *inputs):
    """Elemwise(scalar_op) -> the scalar op's translation; ONNX broadcasts like NumPy, where
    PyTensor refuses to broadcast a dim of length 1 that was not declared broadcastable."""
    inputs = check_runtime_broadcast(g, node.inputs, inputs, node.outputs[0].type.ndim)
    if isinstance(node.op.scalar_op, Composite):
        return elemwise_composite(g, node, inputs)
    return translate_node(g, scalar_node(node), inputs, scalar=True)


@register(DimShuffle)
def dimshuffle(g, node, x):
    """DimShuffle -> Squeeze(dropped dims), Transpose(kept dims), Unsqueeze(new dims)."""
    op = node.op
    if op.drop:
        x = g.Squeeze(x, g.Constant(value_ints=list(op.drop)))
    # op.shuffle numbers the kept dims as in the input; after Squeeze they count from 0.
    kept = sorted(op.shuffle)
    perm = [kept.index(dim) for dim in op.shuffle]
    if perm != sorted(perm):
        x = g.Transpose(x, perm=perm)
    if op.augment:
        x = g.Unsqueeze(x, g.Constant(value_ints=list(op.augment)))
    if not (op.drop or op.augment) and perm == sorted(perm):
        x = g.Identity(x)
    return x
