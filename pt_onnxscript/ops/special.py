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
def softmax(op, node, x):
    """Softmax -> Softmax(axis), or exp(x - max) / sum over several axes."""
    axes = axes_of(node)
    if len(axes) == 1:
        return op.Softmax(x, axis=axes[0])
    axes_value = op.Constant(value_ints=axes)
    e = op.Exp(op.Sub(x, op.ReduceMax(x, axes_value, keepdims=1)))
    return op.Div(e, op.ReduceSum(e, axes_value, keepdims=1))


@register(pts.LogSoftmax)
def log_softmax(op, node, x):
    """LogSoftmax -> LogSoftmax(axis), or x - max - log(sum(exp(x - max))) over several axes."""
    axes = axes_of(node)
    if len(axes) == 1:
        return op.LogSoftmax(x, axis=axes[0])
    axes_value = op.Constant(value_ints=axes)
    shifted = op.Sub(x, op.ReduceMax(x, axes_value, keepdims=1))
    return op.Sub(shifted, op.Log(op.ReduceSum(op.Exp(shifted), axes_value, keepdims=1)))


if hasattr(pts, "SoftmaxGrad"):

    @register(pts.SoftmaxGrad)
    def softmax_grad(op, node, dy, sm):
        """SoftmaxGrad -> (dy - sum(dy * sm)) * sm over the softmax axes."""
        axes_value = op.Constant(value_ints=axes_of(node))
        dy_sm = op.Mul(dy, sm)
        return op.Sub(dy_sm, op.Mul(op.ReduceSum(dy_sm, axes_value, keepdims=1), sm))
