"""CheckAndRaise and Assert.

ONNX has no operator that raises, so export drops the check and passes the value through
(as PyTensor's JAX backend does). Results are unchanged whenever the condition holds; the
assert's message is kept in the doc_string of the emitted node.
"""

from pytensor.raise_op import CheckAndRaise

from pt_onnxscript.registry import register


@register(CheckAndRaise)
def check_and_raise(op, node, x, *conditions):
    """CheckAndRaise -> Identity(x), the message recorded in the node's doc_string."""
    out = op.Identity(x)
    out.producer().doc_string = f"dropped check: {node.op.msg}"
    return out
