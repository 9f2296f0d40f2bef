"""Convolutions: Blockwise(Convolve1d/Convolve2d), and the channel convolution and pooling Ops
that pt_onnxscript.rewrites makes of the usual CNN idioms.

PyTensor's convolutions are true convolutions (the kernel flipped), as SciPy's. The general
translation adds up one shifted window of the input per kernel entry, exact in every dtype.
ChannelConv2d becomes one ONNX Conv in float32; in float64 (ONNX Runtime has no float64
Conv) the same shifted windows contracted over the channels with Einsum.
"""

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.tensor.signal.conv import Convolve1d, Convolve2d

from pt_onnxscript.ops.common import constant, pad_zeros, raise_if
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.rewrites import ChannelConv2d, Pool2d
from pt_onnxscript.runtime_gaps import has_kernel
from pt_onnxscript.translate import TranslationError
from pt_onnxscript.types import onnx_dtype


def _static_kernel(node, var, ndim: int) -> tuple[int, ...]:
    shape = var.type.shape[-ndim:]
    if None in shape:
        raise TranslationError(
            f"{node}: the kernel's shape {shape} must be static to export this convolution "
            "(for a shared kernel: pytensor.shared(value, shape=value.shape))"
        )
    return tuple(shape)


def _windows(g, x, kernel, full: bool):
    """(offset, window) per kernel entry: the input window that entry multiplies."""
    ndim = len(kernel)
    axes = constant(g, list(range(-ndim, 0)), "int64")
    if full:
        for axis, k in zip(range(-ndim, 0), kernel, strict=True):
            width = constant(g, [k - 1], "int64")
            x = pad_zeros(g, x, axis, before=width, after=width)
    for offset in np.ndindex(*kernel):
        # out[i] = sum_a k[a] x[i + K - 1 - a]: the window starts at K - 1 - a and ends at n - a.
        starts = [k - 1 - a for k, a in zip(kernel, offset, strict=True)]
        ends = g.Sub(g.Shape(x, start=-ndim), constant(g, list(offset), "int64"))
        yield offset, g.Slice(x, constant(g, starts, "int64"), ends, axes)


def _as(g, var, value, dtype: str):
    return value if var.type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))


@register_check(Convolve1d, Convolve2d)
def convolution_mode(node):
    if not isinstance(node.inputs[2], Constant):
        return "the convolution mode must be a constant ('full' or 'valid') at export"
    return None


@register(Convolve1d, Convolve2d)
@register_blockwise(Convolve1d, Convolve2d)
def convolve(g, node, x, k, full_mode):
    """Convolve1d/2d (batched by broadcasting) -> sum of kernel entry * shifted input window."""
    ndim = getattr(node.op, "core_op", node.op).ndim
    kernel = _static_kernel(node, node.inputs[1], ndim)
    dtype = node.outputs[0].type.dtype
    x, k = _as(g, node.inputs[0], x, dtype), _as(g, node.inputs[1], k, dtype)
    trailing = constant(g, list(range(-ndim, 0)), "int64")
    total = None
    for offset, window in _windows(g, x, kernel, bool(node.inputs[2].data)):
        entry = k
        for d, a in enumerate(offset):
            entry = g.Gather(entry, constant(g, a, "int64"), axis=-(ndim - d))
        term = g.Mul(window, g.Unsqueeze(entry, trailing))
        total = term if total is None else g.Add(total, term)
    return total


@register(ChannelConv2d)
def channel_conv2d(g, node, x, w):
    """ChannelConv2d -> Conv with the kernel flipped (float32); in float64, the shifted
    windows contracted with each kernel entry over the channels (Einsum)."""
    dtype = node.outputs[0].type.dtype
    x, w = _as(g, node.inputs[0], x, dtype), _as(g, node.inputs[1], w, dtype)
    full = node.op.full
    if has_kernel("Conv", dtype):
        flipped = g.Slice(
            w,
            constant(g, [-1, -1], "int64"),
            constant(g, [np.iinfo(np.int64).min] * 2, "int64"),
            constant(g, [2, 3], "int64"),
            constant(g, [-1, -1], "int64"),
        )
        if full:
            grow = g.Sub(g.Shape(w, start=2), constant(g, [1, 1], "int64"))
            pads = g.Concat(
                constant(g, [0, 0], "int64"), grow, constant(g, [0, 0], "int64"), grow, axis=0
            )
            x = g.Pad(x, pads)
        return g.Conv(x, flipped)
    kernel = _static_kernel(node, node.inputs[1], 2)
    total = None
    for (a, b), window in _windows(g, x, kernel, full):
        entry = g.Gather(
            g.Gather(w, constant(g, a, "int64"), axis=2), constant(g, b, "int64"), axis=2
        )
        term = g.Einsum(window, entry, equation="nchw,oc->nohw")
        total = term if total is None else g.Add(total, term)
    return total


@register(Pool2d)
def pool2d(g, node, x):
    """Pool2d -> MaxPool with a p x p kernel and stride p (raising, like the reshape it
    replaces, if the image is not rows x cols windows; nothing to check when its size is
    static)."""
    op = node.op
    p = op.size
    pooled = g.MaxPool(x, kernel_shape=[p, p], strides=[p, p])
    if tuple(node.inputs[0].type.shape[2:]) == (op.rows * p, op.cols * p):
        return pooled
    expected = constant(g, [op.rows * p, op.cols * p], "int64")
    mismatch = g.Not(g.Equal(g.Shape(x, start=2), expected))
    return raise_if(
        g,
        mismatch,
        pooled,
        ValueError,
        f"cannot pool the image into {op.rows} x {op.cols} windows of {p} x {p}",
    )
