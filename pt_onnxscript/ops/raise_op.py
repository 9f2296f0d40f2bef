"""CheckAndRaise and Assert: the checks stay in the model.

ONNX has no operator that raises; `failure_guard` makes ONNX Runtime fail instead, with the
assert's message in the failing node's name, and mode "ONNX" raises the assert's own
exception. A condition that is constant and false fails at export (before anything is
built), as in PyTensor's JAX backend.
"""

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.raise_op import CheckAndRaise

from pt_onnxscript.ops.common import constant, raise_if
from pt_onnxscript.registry import register, register_check


def _always_fails(node) -> bool:
    return any(isinstance(c, Constant) and not np.all(c.data) for c in node.inputs[1:])


@register_check(CheckAndRaise)
def constant_false_condition(node):
    """A check that always fails is an error at export, with the check's own exception."""
    if _always_fails(node):
        raise node.op.exc_type(f"{node.op.msg} (the condition is constant and false: {node})")


@register(CheckAndRaise)
def check_and_raise(g, node, x, *conditions):
    """CheckAndRaise -> x, guarded to raise the op's exception where a condition is false."""
    failed = []
    for var, condition in zip(node.inputs[1:], conditions, strict=True):
        if isinstance(var, Constant):
            continue  # true: constant false conditions fail at export
        if var.type.dtype == "bool":
            failed.append(g.Not(condition))
        else:
            failed.append(g.Equal(condition, constant(g, 0, var.type.dtype)))
    if not failed:
        return g.Identity(x)
    return raise_if(g, failed, x, node.op.exc_type, node.op.msg)
