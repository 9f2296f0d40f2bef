import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.tensor import fft
from pytensor.tensor.fft import irfft_op, rfft_op

from pt_onnxscript import export_onnx
from pt_onnxscript.errors import TranslationError
from pt_onnxscript.testing import compare_onnx_and_py

# ONNX Runtime's DFT is not NumPy's pocketfft: entries agree to a few ulp of the spectrum's
# largest magnitude (these spectra's are below 50), not of each small entry.
CLOSE = {"float64": {"rtol": 1e-12, "atol": 1e-13}, "float32": {"rtol": 1e-5, "atol": 1e-4}}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ndim", [2, 3, 4])
def test_rfft_and_irfft_of_symbolic_shapes(ndim, dtype, rng, opset):
    """Odd and even lengths (the inverse's conjugate symmetry differs), length 1, and the
    normalisations, one compilation for every shape."""
    x = pt.tensor("x", dtype=dtype, shape=(None,) * ndim)
    outs = [
        fft.rfft(x),
        fft.rfft(x, norm="ortho"),
        fft.irfft(fft.rfft(x), is_odd=True),
        fft.irfft(fft.rfft(x), norm="ortho", is_odd=False),
    ]
    # (an even inverse of a length-1 axis has 0 points, which NumPy refuses)
    shapes = [
        (2, 7, 5, 9)[:ndim],
        (3, 8, 4, 6)[:ndim],
        (1,) * (ndim - 1) + (2,),
        (2, 1, 1)[: ndim - 1] + (3,),
    ]
    cases = [[rng.normal(size=shape).astype(dtype)] for shape in shapes]
    compare_onnx_and_py([x], outs, cases[0], more_inputs=cases[1:], opset=opset, **CLOSE[dtype])


def test_lengths_cut_and_pad_like_numpy(rng):
    """`s` cuts or zero-pads each transformed axis, for the forward and the inverse."""
    x = pt.matrix("x")
    spectrum = pt.tensor3("spectrum")
    outs = [rfft_op(x, [5]), rfft_op(x, [12]), irfft_op(spectrum, [4]), irfft_op(spectrum, [13])]
    values = [rng.normal(size=(3, 8)), rng.normal(size=(3, 5, 2))]
    compare_onnx_and_py([x, spectrum], outs, values, **CLOSE["float64"])


def test_gradients(rng):
    x = pt.tensor3("x")
    w = pt.tensor4("w")
    outs = pytensor.grad((fft.rfft(x) * w).sum(), [x, w])
    values = [rng.normal(size=(2, 3, 7)), rng.normal(size=(2, 3, 4, 2))]
    compare_onnx_and_py([x, w], outs, values, **CLOSE["float64"])


def test_no_points_raise_like_numpy():
    """An even inverse of a one-entry half spectrum has 0 points: NumPy's ValueError."""
    spectrum = pt.tensor3("spectrum")
    fn = pytensor.function([spectrum], fft.irfft(spectrum), mode="ONNX")
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        fn(np.ones((2, 1, 2)))
    assert fn(np.ones((2, 2, 2))).shape == (2, 2)


def test_integer_input_is_refused():
    x = pt.lmatrix("x")
    with pytest.raises(TranslationError, match="cast it to float32 or float64"):
        export_onnx(([x], [rfft_op(x)]))


def test_numpy_agrees(rng):
    """The spectrum is NumPy's rfftn (PyTensor's layout: real and imaginary parts last)."""
    x = pt.tensor3("x")
    fn = pytensor.function([x], fft.rfft(x), mode="ONNX")
    value = rng.normal(size=(2, 6, 5))
    expected = np.fft.rfftn(value, axes=(1, 2))
    got = fn(value)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], expected, rtol=1e-12, atol=1e-13)
