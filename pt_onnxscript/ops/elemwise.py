"""Elemwise and DimShuffle."""

from pytensor.tensor.elemwise import DimShuffle, Elemwise

from pt_onnxscript.registry import register
from pt_onnxscript.translate import scalar_node, translate_node


@register(Elemwise)
def elemwise(op, node, *inputs):
    """Elemwise(scalar_op) -> the scalar op's translation; ONNX broadcasts like NumPy."""
    outputs = translate_node(op, scalar_node(node), inputs, scalar=True)
    return outputs[0] if len(outputs) == 1 else outputs


@register(DimShuffle)
def dimshuffle(op, node, x):
    """DimShuffle -> Squeeze(drop) + Transpose(shuffle) + Unsqueeze(augment)."""
    ds = node.op
    if ds.drop:
        x = op.Squeeze(x, op.Constant(value_ints=list(ds.drop)))
    if list(ds.shuffle) != sorted(ds.shuffle):
        x = op.Transpose(x, perm=list(ds.shuffle))
    if ds.augment:
        x = op.Unsqueeze(x, op.Constant(value_ints=list(ds.augment)))
    if not (ds.drop or ds.augment) and list(ds.shuffle) == sorted(ds.shuffle):
        x = op.Identity(x)
    return x
