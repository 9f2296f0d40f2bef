"""Softmax, LogSoftmax (and SoftmaxGrad in PyTensor 2.38)."""

import pytensor.tensor.special as pts

from pt_onnxscript.registry import register


def axes_of(node):
    axis = node.op.axis
    ndim = node.inputs[0].type.ndim
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a % ndim for a in axes)


@register(pts.Softmax)
def softmax(g, node, x):
    """Softmax -> Softmax(axis), or exp(x - max) / sum over several axes."""
    axes = axes_of(node)
    if len(axes) == 1:
        return g.Softmax(x, axis=axes[0])
    axes_value = g.Constant(value_ints=axes)
    e = g.Exp(g.Sub(x, g.ReduceMax(x, axes_value, keepdims=1)))
    return g.Div(e, g.ReduceSum(e, axes_value, keepdims=1))


@register(pts.LogSoftmax)
def log_softmax(g, node, x):
    """LogSoftmax -> x - max - log(sum(exp(x - max))) over its axes, PyTensor's own form: NaN
    all along a slice that holds a NaN or +inf, as PyTensor's compiled modes give. ONNX's
    LogSoftmax is not used: ONNX Runtime's returns [45.05, 46.05, NaN] for [1, 2, NaN] and
    [-inf, -inf, NaN] for [1, 2, inf]. (Its ReduceMax passes over a NaN that is not first,
    but the NaN reaches every entry through the sum.)"""
    axes_value = g.Constant(value_ints=axes_of(node))
    shifted = g.Sub(x, g.ReduceMax(x, axes_value, keepdims=1))
    return g.Sub(shifted, g.Log(g.ReduceSum(g.Exp(shifted), axes_value, keepdims=1)))


if hasattr(pts, "SoftmaxGrad"):

    @register(pts.SoftmaxGrad)
    def softmax_grad(g, node, dy, sm):
        """SoftmaxGrad -> (dy - sum(dy * sm)) * sm over the softmax axes."""
        axes_value = g.Constant(value_ints=axes_of(node))
        dy_sm = g.Mul(dy, sm)
        return g.Sub(dy_sm, g.Mul(g.ReduceSum(dy_sm, axes_value, keepdims=1), sm))
