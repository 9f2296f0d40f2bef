"""IfElse -> ONNX If, each branch's own computations inside its subgraph."""

from pytensor.ifelse import IfElse

from pt_onnxscript.ops.common import branch, constant
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
    dtypes = [onnx_dtype(var.type.dtype) for var in node.outputs]

    def in_output_dtypes(build):
        def trace(g):
            return [
                g.Identity(value) if value.dtype == dtype else g.Cast(value, to=dtype)
                for value, dtype in zip(build(g), dtypes, strict=True)
            ]

        return trace

    return g.If(
        condition,
        then_branch=branch(g, "then", in_output_dtypes(build_then), dtypes),
        else_branch=branch(g, "else", in_output_dtypes(build_else), dtypes),
        _outputs=len(dtypes),
    )
