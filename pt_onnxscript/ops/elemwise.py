"""Elemwise and DimShuffle."""

from pytensor.tensor.elemwise import DimShuffle, Elemwise

from pt_onnxscript.ops.common import check_runtime_broadcast
from pt_onnxscript.registry import register
from pt_onnxscript.translate import scalar_node, translate_node


@register(Elemwise)
def elemwise(op, node, *inputs):
    """Elemwise(scalar_op) -> the scalar op's translation; ONNX broadcasts like NumPy, where
    PyTensor refuses to broadcast a dim of length 1 that was not declared broadcastable."""
    inputs = check_runtime_broadcast(op, node.inputs, inputs, node.outputs[0].type.ndim)
    outputs = translate_node(op, scalar_node(node), inputs, scalar=True)
    return outputs[0] if len(outputs) == 1 else outputs


@register(DimShuffle)
def dimshuffle(op, node, x):
    """DimShuffle -> Squeeze(dropped dims), Transpose(kept dims), Unsqueeze(new dims)."""
    ds = node.op
    if ds.drop:
        x = op.Squeeze(x, op.Constant(value_ints=list(ds.drop)))
    # ds.shuffle numbers the kept dims as in the input; after Squeeze they count from 0.
    kept = sorted(ds.shuffle)
    perm = [kept.index(dim) for dim in ds.shuffle]
    if perm != sorted(perm):
        x = op.Transpose(x, perm=perm)
    if ds.augment:
        x = op.Unsqueeze(x, op.Constant(value_ints=list(ds.augment)))
    if not (ds.drop or ds.augment) and perm == sorted(perm):
        x = op.Identity(x)
    return x
