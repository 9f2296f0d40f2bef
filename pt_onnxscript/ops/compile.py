"""DeepCopyOp, ViewOp and the other TypeCastingOps, Print, OpFromGraph."""

import warnings

from pytensor.compile.builders import OpFromGraph
from pytensor.compile.ops import DeepCopyOp, TypeCastingOp
from pytensor.printing import Print

from pt_onnxscript.registry import register
from pt_onnxscript.translate import bind_sparse_constants, rewritten_copy, translate_inner_graph


@register(DeepCopyOp, TypeCastingOp)
def deep_copy_or_view(g, node, x):
    """DeepCopyOp, ViewOp -> Identity."""
    return g.Identity(x)


@register(Print)
def print_(g, node, x):
    """Print -> Identity: ONNX has no printing. Where the model's caller prints (mode "ONNX",
    `fgraph_to_model(..., prints=True)`) a Print of the main graph hands it the value as an
    extra output, to print after each run as PyTensor would; one inside a Loop or an If (a
    Scan's step, an IfElse branch), or in a model nobody prints, passes its value through
    unprinted, with a warning."""
    root = g.builder.root
    if g.builder is root and root.prints is not None:
        root.prints.append((node, x))
    else:
        where = "a Scan's step or an IfElse branch" if g.builder is not root else "an ONNX model"
        warnings.warn(
            f"Print({node.op.message!r}) does not print in {where}: its value passes through "
            'unprinted (mode "ONNX" prints those outside Scans and IfElse branches).',
            UserWarning,
            stacklevel=2,
        )
    return g.Identity(x)


@register(OpFromGraph)
def op_from_graph(g, node, *inputs):
    """OpFromGraph -> a copy of its inner graph, given mode "ONNX"'s rewrites, inlined."""
    fgraph = rewritten_copy(node.op.fgraph)
    bind_sparse_constants(g, fgraph.inputs, node.inputs)
    outputs = translate_inner_graph(g, fgraph.inputs, fgraph.outputs, fgraph.toposort(), inputs)
    return outputs
