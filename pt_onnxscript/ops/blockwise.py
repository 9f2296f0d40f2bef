"""Blockwise: a core op over leading batch dims."""

import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors, io_toposort
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.exceptions import ShapeError

from pt_onnxscript.ops.common import (
    broadcast_shape,
    check_runtime_broadcast,
    constant,
    loop,
    raise_if,
)
from pt_onnxscript.registry import blockwise_translation_for, register
from pt_onnxscript.translate import (
    blockwise_core_node,
    translate_graph,
    translate_node,
    value_of,
)
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


def loop_over_batch(g, node, inputs, core=None):
    """Run the core op's translation once per batch element, in an ONNX Loop; or, if given,
    ``core(g, *core_inputs)`` (the list of the core outputs) in its place."""
    batch_ndim = node.op.batch_ndim(node)
    core_node = blockwise_core_node(node)
    ranks = [var.type.ndim for var in node.inputs]
    batch_shape, flat = flatten_batch(g, inputs, [batch_ndim] * len(ranks), ranks)

    def step(g, iteration):
        values = [g.Gather(x, iteration, axis=0) for x in flat]
        return translate_node(g, core_node, values) if core is None else core(g, *values)

    count = g.Squeeze(g.Shape(flat[0], start=0, end=1), constant(g, [0], "int64"))
    dtypes = [onnx_dtype(var.type.dtype) for var in core_node.outputs]
    stacked = loop(g, count, [], step, "blockwise", stacked=dtypes)
    inferred = _InferredShapes(g, node, inputs)
    results = []
    for o, (var, value) in enumerate(zip(core_node.outputs, stacked, strict=True)):
        core_shape = (
            g.Concat(
                *(_core_dim(g, node, inferred, o, var, value, a) for a in range(var.type.ndim)),
                axis=0,
            )
            if var.type.ndim
            else constant(g, [], "int64")
        )
        results.append(g.Reshape(value, g.Concat(batch_shape, core_shape, axis=0), allowzero=1))
    return results


class _InferredShapes:
    """The outputs' dims as PyTensor's Blockwise.infer_shape gives them from the inputs'
    shapes (an input dim of the same signature name, or the core op's infer_shape), where it
    needs neither the outputs nor a core input's values."""

    def __init__(self, g, node, inputs):
        self.g, self.node = g, node
        self.dims = [
            tuple(pt.scalar(dtype="int64") for _ in range(x.type.ndim)) for x in node.inputs
        ]
        self.at = {
            dim: (value, axis)
            for value, dims in zip(inputs, self.dims, strict=True)
            for axis, dim in enumerate(dims)
        }
        self.known = [*self.at, *node.inputs]
        self.values = dict(zip(node.inputs, inputs, strict=True))
        self.shapes = None

    def __call__(self, o: int, axis: int):
        """Dim `axis` of output `o` as a 1-d int64 value, or None."""
        if self.shapes is None:
            try:
                self.shapes = self.node.op.infer_shape(None, self.node, self.dims)
            except (ShapeError, NotImplementedError):
                self.shapes = [[None] * var.type.ndim for var in self.node.outputs]
        dim = self.shapes[o][axis]
        if dim is None:
            return None
        if dim in self.at:
            value, at = self.at[dim]
            return self.g.Shape(value, start=at, end=at + 1)
        dim = pt.cast(dim, "int64")
        reads = list(ancestors([dim], blockers=self.known))
        if any(var in self.node.outputs for var in reads) or not all(
            isinstance(var, Constant)
            for var in reads
            if var.owner is None and var not in self.known
        ):
            return None
        for var in reads:
            if var in self.at and var not in self.values:
                value, at = self.at[var]
                self.values[var] = self.g.Squeeze(self.g.Shape(value, start=at, end=at + 1))
        translate_graph(self.g, io_toposort(self.known, [dim]), self.values)
        return self.g.Reshape(value_of(self.g, self.values, dim), constant(self.g, [1], "int64"))


def _core_dim(g, node, inferred, o, var, value, axis):
    """Dim `axis` of core output `o`: static, inferred from the inputs, or the loop's
    results' (which an empty batch has not: it raises then, as PyTensor's Blockwise)."""
    if var.type.shape[axis] is not None:
        return constant(g, [var.type.shape[axis]], "int64")
    dim = inferred(o, node.op.batch_ndim(node) + axis)
    if dim is not None:
        return dim
    empty = g.Equal(g.Shape(value, start=0, end=1), constant(g, [0], "int64"))
    message = (
        f"{node.op} of an empty batch: its output's core dim {axis} is known only by running "
        "the core op (PyTensor: 'vectorize with zero size not implemented')"
    )
    return raise_if(
        g, empty, g.Shape(value, start=axis + 1, end=axis + 2), NotImplementedError, message
    )
