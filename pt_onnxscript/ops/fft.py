"""RFFTOp and IRFFTOp (``pytensor.tensor.fft.rfft``/``irfft``) -> ONNX's DFT, one axis at a
time, as NumPy's rfftn and irfftn run them.

The spectra are PyTensor's: a trailing axis of 2 holding the real and imaginary parts, as
ONNX's complex layout. rfftn is a one-sided DFT along the last of the transformed axes, then
full DFTs along the others; irfftn inverse DFTs along those, then the last axis' half spectrum
made whole by conjugate symmetry (ONNX's DFT has no one-sided inverse) and inverted, its real
part kept, unnormalised as PyTensor's (the inverses are forward DFTs of the conjugate). Each
axis is cut or zero-padded to its length in `s`, as NumPy's; a length below 1 raises NumPy's
ValueError. ONNX Runtime's DFT is not NumPy's pocketfft: values agree to a few ulp of the
spectrum's largest magnitude, not of each small entry.
"""

import onnx_ir as ir
from pytensor.tensor.fft import IRFFTOp, RFFTOp

from pt_onnxscript.errors import TranslationError
from pt_onnxscript.ops.common import constant, ints, pad_zeros, raise_if
from pt_onnxscript.opsets import at_least
from pt_onnxscript.registry import register


def _float_dtype(node) -> str:
    dtype = node.inputs[0].type.dtype
    if dtype not in ("float32", "float64"):
        raise TranslationError(
            f"{node.op}: a {dtype} input is not translated (PyTensor gives the spectrum the "
            "input's dtype, truncating it for integers); cast it to float32 or float64 first"
        )
    return dtype


def _lengths(g, node, s):
    """The transformed axes' lengths, one 1-element int64 value each (`s` must have a static
    length: it says how many trailing axes are transformed)."""
    count = node.inputs[1].type.shape[0]
    if count is None:
        raise TranslationError(
            f"{node.op}: the lengths `s` must have a static length (it decides which axes are "
            "transformed); give s as a list or a vector of known length"
        )
    s = g.Cast(s, to=ir.DataType.INT64)
    return [g.Slice(s, ints(g, [i]), ints(g, [i + 1])) for i in range(count)]


def _checked(g, lengths, value):
    """`value`, raising NumPy's ValueError where a length is below 1."""
    short = g.Less(g.Concat(*lengths, axis=0), ints(g, [1]))
    return raise_if(g, short, value, ValueError, "Invalid number of FFT data points specified")


def _dft(g, x, length, axis: int, **attributes):
    """ONNX's DFT of `x` (..., 2 or 1) along `axis` (of x, counting the trailing parts axis)."""
    length = g.Squeeze(length, ints(g, [0]))
    if at_least(g, 20):
        return g.DFT(x, length, ints(g, axis), **attributes)
    return g.DFT(x, length, axis=axis, **attributes)


@register(RFFTOp)
def rfft(g, node, a, s):
    """RFFTOp -> a one-sided DFT along the last transformed axis, full DFTs along the rest."""
    _float_dtype(node)
    lengths = _lengths(g, node, s)
    rank = node.inputs[0].type.ndim
    first = rank - len(lengths)
    x = g.Unsqueeze(a, ints(g, [-1]))  # real parts: (..., 1)
    x = _dft(g, x, lengths[-1], rank - 1, onesided=1)
    for axis in range(first, rank - 1):
        x = _dft(g, x, lengths[axis - first], axis)
    return _checked(g, lengths, x)


@register(IRFFTOp)
def irfft(g, node, a, s):
    """IRFFTOp -> forward DFTs of the conjugate (ONNX Runtime's float64 inverse DFT is off by
    ~1e-8 at lengths other than powers of 2; conj(fft(conj(x))) is n ifft(x)): along all but
    the last transformed axis, then the last axis' half spectrum (cut or padded to n // 2 + 1
    entries) completed by conjugate symmetry, its real part. Unnormalised, as PyTensor's."""
    dtype = _float_dtype(node)
    lengths = _lengths(g, node, s)
    rank = node.inputs[0].type.ndim - 1  # the output's rank
    first = rank - len(lengths)
    conjugate = constant(g, [1, -1], dtype)
    x = g.Mul(a, conjugate)
    for axis in range(first, rank - 1):
        x = _dft(g, x, lengths[axis - first], axis)
    n = lengths[-1]
    half = g.Add(g.Div(n, ints(g, [2])), ints(g, [1]))  # n // 2 + 1 (n >= 0)
    have = g.Shape(x, start=-2, end=-1)
    x = g.Slice(x, ints(g, [0]), g.Min(have, half), ints(g, [-2]))
    x = pad_zeros(g, x, -2, after=g.Max(g.Sub(half, have), ints(g, [0])))
    # entries n - k for k = n // 2 + 1 .. n - 1: k = (n + 1) // 2 - 1 down to 1, conjugated
    top = g.Sub(g.Div(g.Add(n, ints(g, [1])), ints(g, [2])), ints(g, [1]))
    mirrored = g.Mul(g.Slice(x, top, ints(g, [0]), ints(g, [-2]), ints(g, [-1])), conjugate)
    x = _dft(g, g.Concat(x, mirrored, axis=-2), n, rank - 1)
    real = g.Squeeze(g.Slice(x, ints(g, [0]), ints(g, [1]), ints(g, [-1])), ints(g, [-1]))
    return _checked(g, lengths, real)
