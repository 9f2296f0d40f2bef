"""Blockwise: a core op over leading batch dims."""

import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.tensor.basic import constant as pt_constant
from pytensor.tensor.blockwise import Blockwise

from pt_onnxscript.ops.common import broadcast_shape, check_runtime_broadcast, constant, loop
from pt_onnxscript.registry import blockwise_translation_for, register
from pt_onnxscript.translate import translate_node
from pt_onnxscript.types import onnx_dtype


@register(Blockwise)
def blockwise(g, node, *inputs):
    """Blockwise(core) -> the core op's batch-aware translation, else a Loop over the batch."""
    inputs = check_runtime_broadcast(g, node.inputs, inputs, node.op.batch_ndim(node))
    translation = blockwise_translation_for(node.op.core_op)
    if translation is not None:
        return translation(g, node, *inputs)
    return loop_over_batch(g, node, inputs)


def flatten_batch(g, inputs, batch_ndims, ranks):
    """The broadcast of the batch shapes of `inputs` (the first `batch_ndims[i]` of the
    `ranks[i]` dims of each), and each input expanded to it and flattened to one batch axis
    before its core dims: (batch size, *core dims)."""
    batch_shape = broadcast_shape(
        g, [g.Shape(x, start=0, end=n) for x, n in zip(inputs, batch_ndims, strict=True)]
    )
    size = g.ReduceProd(batch_shape, keepdims=1)
    flat = []
    for x, batch_ndim, rank in zip(inputs, batch_ndims, ranks, strict=True):
        ones = constant(g, [1] * (rank - batch_ndim), "int64")
        expanded = g.Expand(x, g.Concat(batch_shape, ones, axis=0))
        core_shape = g.Shape(x, start=batch_ndim)
        flat.append(g.Reshape(expanded, g.Concat(size, core_shape, axis=0), allowzero=1))
    return batch_shape, flat


def _core_node(node, batch_ndim: int):
    """The core op applied to dummy core inputs, except that a constant the same for the
    whole batch (its batch dims of length 1) stays that constant, which translations read
    (a sort's axis: the gradient of inv sorts LU pivots by a Blockwise ArgSort whose axis is
    the constant [[-1]])."""
    core_node = node.op._create_dummy_core_node(node.inputs)
    inputs = [
        pt_constant(var.data.reshape(var.data.shape[batch_ndim:]), dtype=var.type.dtype)
        if isinstance(var, Constant) and all(var.type.broadcastable[:batch_ndim])
        else dummy
        for var, dummy in zip(node.inputs, core_node.inputs, strict=True)
    ]
    if all(a is b for a, b in zip(inputs, core_node.inputs, strict=True)):
        return core_node
    return node.op.core_op.make_node(*inputs)


def loop_over_batch(g, node, inputs, core=None):
    """Run the core op's translation once per batch element, in an ONNX Loop; or, if given,
    ``core(g, *core_inputs)`` (the list of the core outputs) in its place."""
    batch_ndim = node.op.batch_ndim(node)
    core_node = _core_node(node, batch_ndim)
    ranks = [var.type.ndim for var in node.inputs]
    batch_shape, flat = flatten_batch(g, inputs, [batch_ndim] * len(ranks), ranks)

    def step(g, iteration):
        values = [g.Gather(x, iteration, axis=0) for x in flat]
        return translate_node(g, core_node, values) if core is None else core(g, *values)

    count = g.Squeeze(g.Shape(flat[0], start=0, end=1), constant(g, [0], "int64"))
    dtypes = [onnx_dtype(var.type.dtype) for var in core_node.outputs]
    stacked = loop(g, count, [], step, "blockwise", stacked=dtypes)
    results = []
    for var, sig, value in zip(core_node.outputs, node.op.outputs_sig, stacked, strict=True):
        core_shape = (
            g.Concat(
                *(
                    _core_dim(g, node, inputs, batch_ndim, var, value, axis, name)
                    for axis, name in enumerate(sig)
                ),
                constant(g, [], "int64"),
                axis=0,
            )
            if sig
            else constant(g, [], "int64")
        )
        results.append(g.Reshape(value, g.Concat(batch_shape, core_shape, axis=0), allowzero=1))
    return results


def _core_dim(g, node, inputs, batch_ndim, var, value, axis, name):
    """Dim `axis` of a core output: static, or the input dim of the same signature name."""
    if var.type.shape[axis] is not None:
        return constant(g, [var.type.shape[axis]], "int64")
    for x, sig in zip(inputs, node.op.inputs_sig, strict=True):
        if name in sig:
            at = batch_ndim + sig.index(name)
            return g.Shape(x, start=at, end=at + 1)
    # Only the loop's results know this dim; an empty batch has none, so raise instead.
    empty = g.Cast(
        g.Equal(g.ReduceProd(g.Shape(value, start=0, end=1), keepdims=0), constant(g, 0, "int64")),
        to=ir.DataType.INT64,
    )
    guard = g.Gather(constant(g, [0], "int64"), g.Reshape(empty, constant(g, [1], "int64")), axis=0)
    return g.Add(g.Shape(value, start=axis + 1, end=axis + 2), guard)
