"""IfElse -> ONNX If, each branch's own computations inside its subgraph."""

import onnx_ir as ir
from pytensor.ifelse import IfElse

from pt_onnxscript.ops.common import constant, subgraph_tag
from pt_onnxscript.registry import register
from pt_onnxscript.types import onnx_dtype


@register(IfElse)
def ifelse(g, node, condition, build_then, build_else):
    """IfElse -> If(condition != 0): only the taken branch runs, as in PyTensor.

    `build_then` and `build_else` (from the walker) build a branch's nodes into a graph
    and return its values.
    """
    if node.inputs[0].type.dtype != "bool":
        condition = g.Not(g.Equal(condition, constant(g, 0, node.inputs[0].type.dtype)))
    if node.inputs[0].type.ndim:
        condition = g.Reshape(condition, constant(g, [], "int64"))
    outputs = node.outputs

    def branch(build, name):
        tag = subgraph_tag(g, name)

        def trace(g):
            g.builder.push_module(tag)  # keeps value names apart from the outer graph's
            results = []
            for var, value in zip(outputs, build(g), strict=True):
                target = onnx_dtype(var.type.dtype)
                results.append(g.Identity(value) if value.dtype == target else g.Cast(value, to=target))
            return results

        declared = [ir.val(f"{tag}_{i}", onnx_dtype(var.type.dtype)) for i, var in enumerate(outputs)]
        return g.builder.subgraph(trace, inputs=[], outputs=declared, name=name)

    results = g.If(
        condition,
        then_branch=branch(build_then, "then"),
        else_branch=branch(build_else, "else"),
        _outputs=len(outputs),
    )
    return results
