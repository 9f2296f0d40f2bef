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

from pt_onnxscript.ops.basic import shape_vector
from pt_onnxscript.ops.common import (
    INT64_MIN,
    branch,
    broadcast_shape,
    constant,
    ints,
    known_size,
    loop,
    pad_zeros,
    raise_if,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.rewrites import ChannelConv2d, Pool2d
from pt_onnxscript.runtime_gaps import has_kernel
from pt_onnxscript.translate import TranslationError
from pt_onnxscript.types import onnx_dtype

INT64, BOOL = ir.DataType.INT64, ir.DataType.BOOL


def _static_kernel(node, var, value, ndim: int) -> tuple[int, ...]:
    """The last `ndim` sizes of kernel `var`, known at export (its type's, or those of its ONNX
    `value`: a baked weight's), or a TranslationError saying how to fix them."""
    shape = _sizes(var, value, ndim)
    if None in shape:
        raise TranslationError(
            f"{node}: the kernel's shape {shape} must be static to export this convolution "
            "(for a shared kernel: pytensor.shared(value, shape=value.shape))"
        )
    return tuple(shape)


def _sizes(var, value, ndim: int) -> tuple[int | None, ...]:
    """The sizes of the last `ndim` dims of `var` that are known at export."""
    return tuple(known_size(var, value, d) for d in range(var.type.ndim - ndim, var.type.ndim))


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


EMPTY_1D = "convolve1d of an empty input (NumPy's convolve: 'a cannot be empty')"


@register(Convolve1d, Convolve2d)
@register_blockwise(Convolve1d, Convolve2d)
def convolve(g, node, x, k, full_mode):
    """Convolve1d/2d (batched by broadcasting) -> sum of kernel entry * shifted input window,
    unrolled for a kernel of static size, one Loop step per entry otherwise (a convolution
    commutes: an input of static size serves as the kernel).

    A mode computed in the graph (PyTensor's gradients choose it from the inputs' sizes)
    runs the convolution it names in an If; the convolutions of a batch share their mode
    (their outputs' shapes differ)."""
    dtype = node.outputs[0].type.dtype
    if dtype == "bool":  # ONNX's Mul and Add take no bools: NumPy's OR of ANDs, from counts
        return g.Cast(_convolution(g, node, x, k, full_mode, "int64"), to=BOOL)
    return _convolution(g, node, x, k, full_mode, dtype)


def _convolution(g, node, x, k, full_mode, dtype: str):
    ndim = getattr(node.op, "core_op", node.op).ndim
    rank = node.outputs[0].type.ndim
    x, k = _as(g, node.inputs[0], x, dtype), _as(g, node.inputs[1], k, dtype)
    x_sizes, k_sizes = _sizes(node.inputs[0], x, ndim), _sizes(node.inputs[1], k, ndim)
    if ndim == 1:  # NumPy's convolve (and PyTensor's C code) refuse an empty input
        flags = [
            g.Equal(g.Shape(value, start=-1), ints(g, [0]))
            for value, sizes in ((x, x_sizes), (k, k_sizes))
            if sizes[0] is None
        ]
        if flags:
            x = raise_if(g, flags, x, ValueError, EMPTY_1D)
    if None in k_sizes and None not in x_sizes:
        x, k, x_sizes, k_sizes = k, x, k_sizes, x_sizes
    full = _static_mode(node.inputs[2])
    if full is not None:
        return (
            _full(g, x, k, k_sizes, rank)
            if full
            else _valid(g, x, k, x_sizes, k_sizes, dtype, rank)
        )
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
        then_branch=branch(g, "full", lambda g: _full(g, x, k, k_sizes, rank), out),
        else_branch=branch(
            g, "valid", lambda g: _valid(g, x, k, x_sizes, k_sizes, dtype, rank), out
        ),
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
def static_sizes(node):
    """SciPy's and NumPy's errors at export where static sizes decide them: a 'valid'
    convolution whose sizes fit neither way, an empty input to convolve1d."""
    ndim = getattr(node.op, "core_op", node.op).ndim
    sizes = [var.type.shape[-ndim:] for var in node.inputs[:2]]
    if ndim == 1 and 0 in sizes[0] + sizes[1]:
        raise ValueError(f"{EMPTY_1D} ({node})")
    if _static_mode(node.inputs[2]) is False and None not in sizes[0] + sizes[1]:
        pairs = list(zip(*sizes, strict=True))
        if not (all(n >= m for n, m in pairs) or all(n <= m for n, m in pairs)):
            raise ValueError(f"{VALID_SIZES}: {sizes[0]} and {sizes[1]} ({node})")


def _full(g, x, k, kernel: tuple[int | None, ...], rank: int):
    """The 'full' convolution of x with `k`, whose sizes are `kernel` (None: not static)."""
    if None in kernel or 0 in kernel:
        return _convolve_loop(g, x, k, len(kernel), True, rank)
    return _convolve(g, x, k, kernel, True)


def _slide(g, x, k, kernel: tuple[int | None, ...], rank: int):
    """The 'valid' convolution of x with `k` (sizes `kernel`), k fitting in x."""
    if None in kernel or 0 in kernel:
        return _convolve_loop(g, x, k, len(kernel), False, rank)
    return _convolve(g, x, k, kernel, False)


def _valid(g, x, k, x_sizes, k_sizes, dtype: str, rank: int):
    """The 'valid' convolution, as SciPy's and NumPy's: the larger of the input and the kernel
    slides over the other, which must fit in it in every dim (a 'valid' convolution's
    gradient convolves with a kernel larger than its input)."""
    ndim = len(k_sizes)
    if None not in x_sizes + k_sizes:
        pairs = list(zip(x_sizes, k_sizes, strict=True))
        if all(n >= m for n, m in pairs):
            return _slide(g, x, k, k_sizes, rank)
        if all(n <= m for n, m in pairs):
            return _slide(g, k, x, x_sizes, rank)  # the kernel slides under x
    # Sizes known when it runs: the kernel fits in x, or x in the kernel.
    n = g.Shape(x, start=-ndim)
    m = g.Shape(k, start=-ndim)
    axes = constant(g, [0], "int64")
    fits = g.Cast(g.ReduceMin(g.Cast(g.GreaterOrEqual(n, m), to=INT64), axes, keepdims=0), to=BOOL)
    inside = g.Cast(g.ReduceMin(g.Cast(g.LessOrEqual(n, m), to=INT64), axes, keepdims=0), to=BOOL)
    fits = raise_if(g, g.Not(g.Or(fits, inside)), fits, ValueError, VALID_SIZES)

    out = [onnx_dtype(dtype)]

    def under(g):
        if None not in x_sizes or None in k_sizes or 0 in k_sizes:
            return _slide(g, k, x, x_sizes, rank)

        def middle(g):  # x has no static size to unroll: the middle of the 'full' convolution
            full = _convolve(g, x, k, k_sizes, True)
            ones = constant(g, [1] * ndim, "int64")
            return g.Slice(full, g.Sub(n, ones), m, constant(g, list(range(-ndim, 0)), "int64"))

        if ndim == 1:  # convolve1d refused an empty x
            return middle(g)
        # An empty x has no middle: SciPy's m - n + 1 zeros.
        nonempty = g.Cast(g.ReduceMin(n, keepdims=0), to=BOOL)
        size = g.Add(g.Sub(m, n), constant(g, [1] * ndim, "int64"))
        return g.If(
            nonempty,
            then_branch=branch(g, "middle", middle, out),
            else_branch=branch(g, "empty", lambda g: _zeros(g, x, k, size, ndim), out),
        )

    return g.If(
        fits,
        then_branch=branch(g, "slide", lambda g: _slide(g, x, k, k_sizes, rank), out),
        else_branch=branch(g, "under", under, out),
    )


def _convolve(g, x, k, kernel: tuple[int, ...], full: bool):
    """x convolved with `k`, whose last dims are `kernel` (static, not empty), 'full' or
    (`kernel` fitting in x) 'valid'."""
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


def _zeros(g, x, k, size, ndim: int):
    """Zeros of x's dtype: x's and k's batch dims broadcast, then the `ndim` sizes `size`."""
    batch = broadcast_shape(g, [g.Shape(x, end=-ndim), g.Shape(k, end=-ndim)])
    return g.Expand(g.CastLike(constant(g, 0, "int8"), x), g.Concat(batch, size, axis=0))


def _unravel(g, flat, sizes, ndim: int):
    """The index (0-d int64 per dim) of entry `flat` of an array of `ndim` dims `sizes`,
    the last dim fastest."""
    index = []
    for d in reversed(range(ndim)):
        size = g.Gather(sizes, ints(g, d))
        index.insert(0, g.Mod(flat, size))
        flat = g.Div(flat, size)
    return index


def _convolve_loop(g, x, k, ndim: int, full: bool, rank: int):
    """`_convolve` for a kernel `k` of sizes known only when it runs (or empty): one Loop
    step per kernel entry, in `_convolve`'s order, adding the entry times its window of x to
    zeros of the output's shape (an empty kernel leaves them); for a 'valid' convolution with
    fewer outputs than kernel entries (a gradient's), one step per output (`_by_output`)."""
    axes = constant(g, list(range(-ndim, 0)), "int64")
    one = constant(g, [1] * ndim, "int64")
    m = g.Shape(k, start=-ndim)
    n = g.Shape(x, start=-ndim)
    size = g.Add(g.Sub(n, m), one)  # 'valid'
    if full:
        size = g.Sub(g.Add(n, m), one)
        size = raise_if(
            g,
            g.Less(size, constant(g, [0] * ndim, "int64")),
            size,
            ValueError,
            "a 'full' convolution of an empty input with an empty kernel",
        )
        for d, axis in enumerate(range(-ndim, 0)):
            width = g.Sub(g.Slice(m, ints(g, [d]), ints(g, [d + 1])), ints(g, [1]))
            width = g.Max(width, ints(g, [0]))  # an empty kernel: no step reads x
            x = pad_zeros(g, x, axis, before=width, after=width)

    def by_entry(g):
        padded = g.Shape(x, start=-ndim)
        last = g.Sub(m, one)

        def step(g, entry, total):
            offset = _unravel(g, entry, m, ndim)
            value = k
            for d, a in enumerate(offset):
                value = g.Gather(value, a, axis=-(ndim - d))
            offset = shape_vector(g, offset)
            window = g.Slice(x, g.Sub(last, offset), g.Sub(padded, offset), axes)
            return [g.Add(total, g.Mul(window, g.Unsqueeze(value, axes)))]

        count = g.ReduceProd(m, keepdims=0)
        return loop(g, count, [_zeros(g, x, k, size, ndim)], step, "convolve")[0]

    if full:
        return by_entry(g)
    outputs = g.ReduceProd(size, keepdims=0)
    fewer = g.Less(outputs, g.ReduceProd(m, keepdims=0))
    out = [x.dtype]
    return g.If(
        fewer,
        then_branch=branch(g, "by_output", lambda g: _by_output(g, x, k, ndim, size, rank), out),
        else_branch=branch(g, "by_entry", by_entry, out),
    )


def _by_output(g, x, k, ndim: int, size, rank: int):
    """The 'valid' convolution of x with `k` (fitting in it; `size` its output's last dims),
    one Loop step per output entry: the sum of its window of x times the flipped kernel."""
    axes = constant(g, list(range(-ndim, 0)), "int64")
    flipped = g.Slice(
        k,
        constant(g, [-1] * ndim, "int64"),
        constant(g, [INT64_MIN] * ndim, "int64"),
        axes,
        constant(g, [-1] * ndim, "int64"),
    )
    m = g.Shape(k, start=-ndim)

    def step(g, entry):
        start = shape_vector(g, _unravel(g, entry, size, ndim))
        window = g.Slice(x, start, g.Add(start, m), axes)
        return [g.ReduceSum(g.Mul(window, flipped), axes, keepdims=0)]

    [stacked] = loop(g, g.ReduceProd(size, keepdims=0), [], step, "correlate", stacked=[x.dtype])
    # (outputs, batch...) -> (batch..., outputs) -> (batch..., size)
    batch = rank - ndim
    moved = g.Transpose(stacked, perm=[*range(1, batch + 1), 0])
    return g.Reshape(moved, g.Concat(g.Shape(moved, end=-1), size, axis=0))


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
    kernel = _static_kernel(node, node.inputs[1], w, 2)
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
