"""Convolutions: Blockwise(Convolve1d/Convolve2d), and the channel convolution and pooling Ops
that pt_onnxscript.rewrites makes of the usual CNN idioms.

PyTensor's convolutions are true convolutions (the kernel flipped), as SciPy's. The general
translation adds up one shifted window of the input per kernel entry, exact in every dtype.
ChannelConv2d becomes one ONNX Conv in float32; in float64 (ONNX Runtime has no float64
Conv) the same shifted windows contracted over the channels with Einsum.
"""

import numpy as np
import onnx_ir as ir
import pytensor.scalar as ps
from pytensor.tensor.basic import NotScalarConstantError, get_underlying_scalar_constant_value
from pytensor.tensor.elemwise import CAReduce
from pytensor.tensor.signal.conv import Convolve1d, Convolve2d

from pt_onnxscript.ops.common import (
    INT64_MIN,
    branch,
    constant,
    known_size,
    pad_zeros,
    raise_if,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.rewrites import ChannelConv2d, Pool2d
from pt_onnxscript.runtime_gaps import has_kernel
from pt_onnxscript.translate import TranslationError
from pt_onnxscript.types import onnx_dtype

INT64, BOOL = ir.DataType.INT64, ir.DataType.BOOL


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


@register(Convolve1d, Convolve2d)
@register_blockwise(Convolve1d, Convolve2d)
def convolve(g, node, x, k, full_mode):
    """Convolve1d/2d (batched by broadcasting) -> sum of kernel entry * shifted input window.

    A mode computed in the graph (PyTensor's gradients choose it from the inputs' sizes)
    runs the convolution it names in an If; the convolutions of a batch share their mode
    (their outputs' shapes differ)."""
    ndim = getattr(node.op, "core_op", node.op).ndim
    kernel = _static_kernel(node, node.inputs[1], ndim)
    dtype = node.outputs[0].type.dtype
    x, k = _as(g, node.inputs[0], x, dtype), _as(g, node.inputs[1], k, dtype)
    full = _static_mode(node.inputs[2])
    if full is not None:
        return _convolve(g, x, k, kernel, True) if full else _valid(g, node, x, k, kernel)
    if node.inputs[2].type.ndim:  # Blockwise's batch of modes
        modes = g.Cast(full_mode, to=INT64)
        axes = constant(g, list(range(node.inputs[2].type.ndim)), "int64")
        some, every = g.ReduceMax(modes, axes, keepdims=0), g.ReduceMin(modes, axes, keepdims=0)
        message = "the convolutions of a batch are not all 'full' or all 'valid'"
        full_mode = g.Cast(
            raise_if(g, g.Not(g.Equal(some, every)), some, ValueError, message), to=BOOL
        )
    out = [onnx_dtype(dtype)]
    return g.If(
        full_mode,
        then_branch=branch(g, "full", lambda g: _convolve(g, x, k, kernel, True), out),
        else_branch=branch(g, "valid", lambda g: _valid(g, node, x, k, kernel), out),
    )


def _static_mode(var) -> bool | None:
    """Whether the convolution mode `var` is 'full', where the graph fixes it: a constant
    (behind casts, allocs, ...), or what PyTensor's gradients compute from static sizes (Any
    or All over an Alloc of a constant, along dims that are not empty)."""
    try:
        return bool(get_underlying_scalar_constant_value(var))
    except NotScalarConstantError:
        pass
    owner = var.owner
    if owner is None or not isinstance(owner.op, CAReduce):
        return None
    if not isinstance(owner.op.scalar_op, ps.AND | ps.OR):
        return None
    reduced = owner.inputs[0]
    axes = range(reduced.type.ndim) if owner.op.axis is None else owner.op.axis
    if any(reduced.type.shape[axis] in (None, 0) for axis in axes):
        return None
    try:
        return bool(get_underlying_scalar_constant_value(reduced))
    except NotScalarConstantError:
        return None


VALID_SIZES = "For 'valid' mode, one must be at least as large as the other in every dimension"


@register_check(Convolve1d, Convolve2d)
def valid_sizes(node):
    """A 'valid' convolution whose static sizes fit neither way is SciPy's error at export."""
    ndim = getattr(node.op, "core_op", node.op).ndim
    sizes = [var.type.shape[-ndim:] for var in node.inputs[:2]]
    if _static_mode(node.inputs[2]) is False and None not in sizes[0] + sizes[1]:
        pairs = list(zip(*sizes, strict=True))
        if not (all(n >= m for n, m in pairs) or all(n <= m for n, m in pairs)):
            raise ValueError(f"{VALID_SIZES}: {sizes[0]} and {sizes[1]} ({node})")


def _valid(g, node, x, k, kernel: tuple[int, ...]):
    """The 'valid' convolution, as SciPy's and NumPy's: the larger of the input and the kernel
    slides over the other, which must fit in it in every dim (a 'valid' convolution's
    gradient convolves with a kernel larger than its input)."""
    ndim = len(kernel)
    var = node.inputs[0]
    sizes = [known_size(var, x, d) for d in range(var.type.ndim - ndim, var.type.ndim)]
    if None not in sizes and all(n >= m for n, m in zip(sizes, kernel, strict=True)):
        return _convolve(g, x, k, kernel, False)
    if None not in sizes and all(n <= m for n, m in zip(sizes, kernel, strict=True)):
        return _convolve(g, k, x, tuple(sizes), False)  # the kernel slides under x
    # Sizes known when it runs: the kernel fits in x, or x in the kernel (then the 'full'
    # convolution's middle, as x has no static shape to slide under the kernel).
    n = g.Shape(x, start=-ndim)
    m = constant(g, list(kernel), "int64")
    axes = constant(g, [0], "int64")
    fits = g.Cast(g.ReduceMin(g.Cast(g.GreaterOrEqual(n, m), to=INT64), axes, keepdims=0), to=BOOL)
    inside = g.Cast(g.ReduceMin(g.Cast(g.LessOrEqual(n, m), to=INT64), axes, keepdims=0), to=BOOL)
    fits = raise_if(g, g.Not(g.Or(fits, inside)), fits, ValueError, VALID_SIZES)
    trailing = constant(g, list(range(-ndim, 0)), "int64")

    def middle(g):
        full = _convolve(g, x, k, kernel, True)
        return g.Slice(full, g.Sub(n, constant(g, [1] * ndim, "int64")), m, trailing)

    out = [onnx_dtype(node.outputs[0].type.dtype)]
    return g.If(
        fits,
        then_branch=branch(g, "slide", lambda g: _convolve(g, x, k, kernel, False), out),
        else_branch=branch(g, "middle", middle, out),
    )


def _convolve(g, x, k, kernel: tuple[int, ...], full: bool):
    """x convolved with `k`, whose last dims are `kernel` (static), 'full' or (`kernel`
    fitting in x) 'valid'."""
    ndim = len(kernel)
    trailing = constant(g, list(range(-ndim, 0)), "int64")
    total = None
    for offset, window in _windows(g, x, kernel, full):
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
            constant(g, [INT64_MIN] * 2, "int64"),
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
