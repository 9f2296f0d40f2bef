"""Elemwise and DimShuffle."""

from pytensor.tensor.elemwise import DimShuffle, Elemwise

from pt_onnxscript.ops.common import constant, failure_guard
from pt_onnxscript.registry import register
from pt_onnxscript.translate import scalar_node, translate_node


@register(Elemwise)
def elemwise(op, node, *inputs):
    """Elemwise(scalar_op) -> the scalar op's translation; ONNX broadcasts like NumPy, where
    PyTensor refuses to broadcast a dim of length 1 that was not declared broadcastable."""
    outputs = translate_node(op, scalar_node(node), inputs, scalar=True)
    failed = _runtime_broadcast(op, node, inputs, outputs[0])
    if failed:
        guard = failure_guard(op, failed, ValueError, RUNTIME_BROADCAST)
        outputs = [op.Expand(out, guard) for out in outputs]
    return outputs[0] if len(outputs) == 1 else outputs


RUNTIME_BROADCAST = (
    "Runtime broadcasting not allowed: an input has length 1 in a dimension it was not "
    "declared broadcastable in. If broadcasting was intended, use `specify_broadcastable` "
    "on the relevant input."
)


def _runtime_broadcast(op, node, inputs, output):
    """Flags, true where an input's dim of unknown size is 1 at run time while the output's
    is not: what PyTensor's Elemwise refuses (ONNX would broadcast)."""
    failed = []
    out_shape = None
    for i, (var, value) in enumerate(zip(node.inputs, inputs, strict=True)):
        dims = [
            d
            for d, size in enumerate(var.type.shape)
            if size is None
            and any(not other.type.broadcastable[d] for j, other in enumerate(node.inputs) if j != i)
        ]
        if not dims:
            continue
        if out_shape is None:
            out_shape = op.Shape(output)
        positions = constant(op, dims, "int64")
        one = constant(op, 1, "int64")
        ones = op.Equal(op.Gather(op.Shape(value), positions, axis=0), one)
        failed.append(op.And(ones, op.Not(op.Equal(op.Gather(out_shape, positions, axis=0), one))))
    return failed


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
