"""DeepCopyOp, ViewOp and the other TypeCastingOps, OpFromGraph."""

from pytensor.compile.builders import OpFromGraph
from pytensor.compile.ops import DeepCopyOp, TypeCastingOp

from pt_onnxscript.registry import register
from pt_onnxscript.translate import rewritten_copy, translate_inner_graph


@register(DeepCopyOp, TypeCastingOp)
def deep_copy_or_view(g, node, x):
    """DeepCopyOp, ViewOp -> Identity."""
    return g.Identity(x)


@register(OpFromGraph)
def op_from_graph(g, node, *inputs):
    """OpFromGraph -> a copy of its inner graph, given mode "ONNX"'s rewrites, inlined."""
    fgraph = rewritten_copy(node.op.fgraph)
    outputs = translate_inner_graph(g, fgraph.inputs, fgraph.outputs, fgraph.toposort(), inputs)
    return outputs
