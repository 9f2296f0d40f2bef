"""Scalar ops, used by Elemwise and Composite."""

from functools import reduce

import pytensor.scalar.basic as ps

from pt_onnxscript.registry import register_scalar
from pt_onnxscript.translate import translate_inner_graph
from pt_onnxscript.ops.common import cast_inputs_to_output, out_dtype


@register_scalar(ps.Add)
def add(op, node, *inputs):
    return reduce(op.Add, cast_inputs_to_output(op, node, inputs))


@register_scalar(ps.Mul)
def mul(op, node, *inputs):
    return reduce(op.Mul, cast_inputs_to_output(op, node, inputs))


@register_scalar(ps.Sub)
def sub(op, node, x, y):
    return op.Sub(*cast_inputs_to_output(op, node, [x, y]))


@register_scalar(ps.TrueDiv)
def true_div(op, node, x, y):
    return op.Div(*cast_inputs_to_output(op, node, [x, y]))


@register_scalar(ps.Neg)
def neg(op, node, x):
    return op.Neg(x)


@register_scalar(ps.Exp)
def exp(op, node, x):
    return op.Exp(cast_inputs_to_output(op, node, [x])[0])


@register_scalar(ps.Log)
def log(op, node, x):
    return op.Log(cast_inputs_to_output(op, node, [x])[0])


@register_scalar(ps.Maximum)
def maximum(op, node, x, y):
    return op.Max(*cast_inputs_to_output(op, node, [x, y]))


@register_scalar(ps.Cast)
def cast(op, node, x):
    return op.Cast(x, to=out_dtype(node))


@register_scalar(ps.Identity)
def identity(op, node, x):
    return op.Identity(x)


@register_scalar(ps.Composite)
def composite(op, node, *inputs):
    """Composite -> its inner scalar graph, walked with the same scalar translations."""
    c = node.op
    outputs = translate_inner_graph(
        op, c.fgraph.inputs, c.fgraph.outputs, c.fgraph.toposort(), inputs, scalar=True
    )
    return outputs[0] if len(outputs) == 1 else outputs
