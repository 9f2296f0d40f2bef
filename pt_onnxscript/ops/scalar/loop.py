"""ScalarLoop (the loops in the gradients of gammainc, gammaincc, betainc and hyp2f1) -> Loop.

Elemwise runs the scalar loop once per element, each for its own number of steps and until
its own condition holds. The Loop steps all elements together and freezes each one once it
is done, so each ends with the state its own loop would have; it stops when none is left.
"""

import onnx_ir as ir
from pytensor.scalar.loop import ScalarLoop

from pt_onnxscript.ops.common import constant, loop, where
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.translate import translate_inner_graph


def _any(g, mask):
    """True if some element of bool `mask` is (False for an empty one)."""
    count = g.ReduceSum(g.Cast(mask, to=ir.DataType.INT64), keepdims=0)
    return g.Greater(count, constant(g, 0, "int64"))


@register_scalar(ScalarLoop)
def scalar_loop(g, node, n_steps, *inputs):
    """ScalarLoop -> Loop over the broadcast elements; a while loop reports per element whether
    its condition ended it (False when it ran out of steps, or had none)."""
    op = node.op
    n_update = len(op.outputs) - int(op.is_while)
    # The broadcast shape of all inputs, which every output has.
    shape_of = g.Equal(n_steps, n_steps)
    for value in inputs:
        shape_of = g.And(shape_of, g.Equal(value, value))
    shape = g.Shape(shape_of)
    steps = g.Expand(g.Cast(n_steps, to=ir.DataType.INT64), shape)
    carried = [g.Expand(value, shape) for value in inputs[:n_update]]
    constants = list(inputs[n_update:])
    dtypes = [var.type.dtype for var in op.inputs[:n_update]]
    done = g.Expand(constant(g, False, "bool"), shape)

    def step(g, i, *state):
        *values, done = state
        active = g.And(g.Less(i, steps), g.Not(done))
        results = translate_inner_graph(
            g,
            op.fgraph.inputs,
            op.fgraph.outputs,
            op.fgraph.toposort(),
            [*values, *constants],
            scalar=True,
        )
        new_values = [
            where(g, active, new, old, dtype)
            for new, old, dtype in zip(results[:n_update], values, dtypes, strict=True)
        ]
        if op.is_while:
            done = g.Or(done, g.And(active, g.Cast(results[-1], to=ir.DataType.BOOL)))
        still = g.And(g.Less(g.Add(i, constant(g, 1, "int64")), steps), g.Not(done))
        return [_any(g, still), *new_values, done]

    started = _any(g, g.Greater(steps, constant(g, 0, "int64")))
    results = loop(g, None, [*carried, done], step, "scalar_loop", condition=started)
    outputs = results[:n_update] + ([results[-1]] if op.is_while else [])
    return outputs
