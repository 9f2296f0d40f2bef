"""Softmax, LogSoftmax (and SoftmaxGrad in PyTensor 2.38)."""

import pytensor.tensor.special as pts
from pytensor.graph.traversal import io_toposort

from pt_onnxscript.ops.common import out_dtype
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.translate import translate_inner_graph


def axes_of(node):
    axis = node.op.axis
    ndim = node.inputs[0].type.ndim
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % ndim for a in axes)


@register_check(pts.Softmax, pts.LogSoftmax)
def _float_output(node):
    """PyTensor 2.38 types the softmax of integers as integers (its C backend raises "not a
    float", its Python one returns floats in their place)."""
    x, out = node.inputs[0].type.dtype, node.outputs[0].type.dtype
    if not out.startswith("float"):
        return f"{node.op} of {x} is typed {out} (PyTensor 2.38): cast x to a float dtype first"
    return None


def _of_integers(node) -> bool:
    return node.inputs[0].type.dtype != node.outputs[0].type.dtype


def _shifted(g, node, x, axes_value):
    """x - max(x) over the node's axes; of integers as PyTensor computes it: in their dtype
    (wrapping as NumPy's), then in the output's float dtype."""
    if not _of_integers(node):
        return g.Sub(x, g.ReduceMax(x, axes_value, keepdims=1))
    inner = node.inputs[0].type()
    shift = inner - inner.max(axis=node.op.axis, keepdims=True)
    [shifted] = translate_inner_graph(g, [inner], [shift], io_toposort([inner], [shift]), [x])
    return g.Cast(shifted, to=out_dtype(node))


@register(pts.Softmax)
def softmax(g, node, x):
    """Softmax -> Softmax(axis), or exp(x - max) / sum over several axes or of integers
    (ONNX's Softmax takes floats, and would shift their wrapped x - max again)."""
    axes = axes_of(node)
    if len(axes) == 1 and not _of_integers(node):
        return g.Softmax(x, axis=axes[0])
    axes_value = g.Constant(value_ints=axes)
    e = g.Exp(_shifted(g, node, x, axes_value))
    return g.Div(e, g.ReduceSum(e, axes_value, keepdims=1))


@register(pts.LogSoftmax)
def log_softmax(g, node, x):
    """LogSoftmax -> x - max - log(sum(exp(x - max))) over its axes, PyTensor's own form: NaN
    all along a slice that holds a NaN or +inf, as PyTensor's compiled modes give. ONNX's
    LogSoftmax is not used: ONNX Runtime's returns [45.05, 46.05, NaN] for [1, 2, NaN] and
    [-inf, -inf, NaN] for [1, 2, inf]. (Its ReduceMax passes over a NaN that is not first,
    but the NaN reaches every entry through the sum.)"""
    axes_value = g.Constant(value_ints=axes_of(node))
    shifted = _shifted(g, node, x, axes_value)
    return g.Sub(shifted, g.Log(g.ReduceSum(g.Exp(shifted), axes_value, keepdims=1)))


if hasattr(pts, "SoftmaxGrad"):

    @register(pts.SoftmaxGrad)
    def softmax_grad(g, node, dy, sm):
        """SoftmaxGrad -> (dy - sum(dy * sm)) * sm over the softmax axes."""
        axes_value = g.Constant(value_ints=axes_of(node))
        dy_sm = g.Mul(dy, sm)
        return g.Sub(dy_sm, g.Mul(g.ReduceSum(dy_sm, axes_value, keepdims=1), sm))
