"""ScalarLoop (the loops in the gradients of gammainc, gammaincc, betainc and hyp2f1) -> Loop.

Elemwise runs the scalar loop once per element, each for its own number of steps and until
its own condition holds. The Loop steps all elements together and freezes each one once it
is done, so each ends with the state its own loop would have; it stops when none is left.
"""

import onnx_ir as ir
from pytensor.scalar.loop import ScalarLoop

from pt_onnxscript.ops.common import constant, subgraph_tag, where
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.translate import translate_inner_graph
from pt_onnxscript.types import onnx_dtype


def _any(op, mask):
    """True if some element of bool `mask` is (False for an empty one)."""
    count = op.ReduceSum(op.Cast(mask, to=ir.DataType.INT64), keepdims=0)
    return op.Greater(count, constant(op, 0, "int64"))


@register_scalar(ScalarLoop)
def scalar_loop(op, node, n_steps, *inputs):
    """ScalarLoop -> Loop over the broadcast elements; a while loop reports per element whether
    its condition ended it (False when it ran out of steps, or had none)."""
    loop = node.op
    n_update = len(loop.outputs) - int(loop.is_while)
    # The broadcast shape of all inputs, which every output has.
    shape_of = op.Equal(n_steps, n_steps)
    for value in inputs:
        shape_of = op.And(shape_of, op.Equal(value, value))
    shape = op.Shape(shape_of)
    steps = op.Expand(op.Cast(n_steps, to=ir.DataType.INT64), shape)
    carried = [op.Expand(value, shape) for value in inputs[:n_update]]
    constants = list(inputs[n_update:])
    dtypes = [var.type.dtype for var in loop.inputs[:n_update]]
    done = op.Expand(constant(op, False, "bool"), shape)
    tag = subgraph_tag(op, "scalar_loop")

    def body(op, i, condition, *state):
        op.builder.push_module(tag)
        *values, done = state
        active = op.And(op.Less(i, steps), op.Not(done))
        results = translate_inner_graph(
            op, loop.fgraph.inputs, loop.fgraph.outputs, loop.fgraph.toposort(),
            [*values, *constants], scalar=True,
        )
        new_values = [
            where(op, active, new, old, dtype)
            for new, old, dtype in zip(results[:n_update], values, dtypes, strict=True)
        ]
        if loop.is_while:
            done = op.Or(done, op.And(active, op.Cast(results[-1], to=ir.DataType.BOOL)))
        still = op.And(op.Less(op.Add(i, constant(op, 1, "int64")), steps), op.Not(done))
        return [_any(op, still), *new_values, done]

    graph = op.builder.subgraph(
        body,
        inputs=[
            ir.val(f"{tag}_i", ir.DataType.INT64, []),
            ir.val(f"{tag}_condition", ir.DataType.BOOL, []),
            *[ir.val(f"{tag}_carried_{k}", onnx_dtype(d)) for k, d in enumerate(dtypes)],
            ir.val(f"{tag}_done", ir.DataType.BOOL),
        ],
        outputs=[
            ir.val(f"{tag}_condition_out", ir.DataType.BOOL, []),
            *[ir.val(f"{tag}_carried_{k}_out", onnx_dtype(d)) for k, d in enumerate(dtypes)],
            ir.val(f"{tag}_done_out", ir.DataType.BOOL),
        ],
        name="scalar_loop_body",
    )
    results = op.Loop(
        None, _any(op, op.Greater(steps, constant(op, 0, "int64"))), *carried, done,
        body=graph, _outputs=n_update + 1,
    )
    results = list(results) if isinstance(results, list | tuple) else [results]
    outputs = results[:n_update] + ([results[-1]] if loop.is_while else [])
    return outputs if len(outputs) > 1 else outputs[0]
