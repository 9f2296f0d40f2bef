import contextlib
import signal

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp
from pytensor.tensor.special import log_softmax, softmax

from pt_onnxscript.errors import UnsupportedOpError
from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("fn", [softmax, log_softmax])
@pytest.mark.parametrize(
    "axis", [-1, 0, None] + ([(0, 2)] if not pytensor.__version__.startswith("2.") else [])
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_forms(fn, axis, dtype, rng, opset):
    x = pt.tensor3("x", dtype=dtype)
    xv = rng.normal(size=(2, 3, 4)).astype(dtype)
    compare_onnx_and_py([x], fn(x, axis=axis), [xv], opset=opset)


@pytest.mark.parametrize("fn", [softmax, log_softmax])
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8"])
def test_softmax_of_integers(fn, dtype, rng):
    """Of integers (ONNX's Softmax takes floats: the model failed ONNX's check), x - max(x) in
    their dtype as PyTensor computes it (uint8 wrapping, as NumPy's), then in float."""
    x = pt.tensor3("x", dtype=dtype)
    xv = rng.integers(0 if dtype == "uint8" else -20, 20, size=(2, 3, 4)).astype(dtype)
    if fn(x).dtype == dtype:  # PyTensor 2.38: typed as x, which its C backend refuses
        with pytest.raises(UnsupportedOpError, match="cast x to a float dtype first"):
            pytensor.function([x], fn(x), mode="ONNX")
        return
    compare_onnx_and_py([x], [fn(x, axis=axis) for axis in [-1, None, (0, 2)]], [xv])


@pytest.mark.parametrize("fn", [softmax, log_softmax])
def test_softmax_extremes_and_empty(fn):
    x = pt.matrix("x")
    xv = np.array(
        [
            [1e300, -1e300, 0.0],
            [-np.inf, 0.0, 1.0],
            [700.0, 710.0, -710.0],
            [1.0, 2.0, np.nan],
            [np.nan, 1.0, 2.0],
            [-np.inf, -np.inf, -np.inf],
        ]
    )
    # Softmax is ONNX Runtime's kernel; LogSoftmax never is (it drops NaN: see below).
    ops = {"expected_ops": ["Softmax"]} if fn is softmax else {"forbidden_ops": ["LogSoftmax"]}
    compare_onnx_and_py([x], fn(x, axis=-1), [xv], **ops)
    compare_onnx_and_py([x], fn(x, axis=-1), [np.zeros((0, 3))])


@pytest.mark.parametrize("axis", [-1, None])
def test_log_softmax_is_nan_along_a_slice_with_nan_or_inf(axis):
    """x - max(x) - log(sum(exp(x - max(x)))): NaN all along a slice holding a NaN (wherever
    it is) or +inf, as PyTensor's compiled modes (C, Numba) and PyTensor 3's Python linker
    give (2.38's Python linker calls SciPy's log_softmax, which shifts an infinite maximum by 0
    instead: [-inf, -inf, nan] for [1, 2, inf]). ONNX Runtime's LogSoftmax kernel gave
    [45.05, 46.05, nan] for [1, 2, nan]."""
    x = pt.matrix("x")
    fn = pytensor.function([x], log_softmax(x, axis=axis), mode="ONNX")
    for row in ([1.0, 2.0, np.nan], [np.nan, 1.0, 2.0], [1.0, 2.0, np.inf], [np.inf, -np.inf, 0.0]):
        values = np.array([row, [0.5, 1.0, 1.5]]) if axis == -1 else np.array([row])
        result = fn(values)
        assert np.isnan(result[0]).all(), (row, result)
        if axis == -1:
            np.testing.assert_allclose(result[1], sp.log_softmax([0.5, 1.0, 1.5]), rtol=1e-15)


def test_softmax_gradient(rng):
    x = pt.matrix("x")
    w = pt.matrix("w")
    cost = (softmax(x, axis=-1) * w).sum() + (log_softmax(x, axis=0) * w).sum()
    compare_onnx_and_py(
        [x, w], pytensor.grad(cost, x), [rng.normal(size=(3, 4)), rng.normal(size=(3, 4))]
    )


EXTREMES = np.array(
    [
        [-1e300, -800.0, -745.0, -40.0, -1e-20, 0.0],
        [1e-20, 1.0, 40.0, 710.0, 800.0, 1e300],
        [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf],
        [np.inf, 0.0, -np.inf, 1.0, 2.0, 3.0],
    ]
)


def test_stable_functions_at_extremes():
    """log1mexp's two branches, softplus, and PyMC's logdiffexp."""
    x = pt.matrix("x")
    negative = -pt.abs(x)
    outputs = [
        pt.log1mexp(negative),
        pt.softplus(x),
        negative + pt.log1mexp(negative - negative[:, ::-1] - 1.0),
    ]
    compare_onnx_and_py([x], outputs, [EXTREMES])


def test_naive_forms_are_stabilized():
    """PyTensor's stabilizing rewrites survive into the model: the naive forms give the stable
    values at inputs where they would overflow or cancel."""
    x = pt.dvector("x")
    fn = pytensor.function(
        [x],
        [
            pt.log(1 - pt.exp(x)),
            pt.log1p(pt.exp(x)),
            pt.log(pt.sigmoid(x)),
            pt.log(pt.sum(pt.exp(x))),
        ],
        mode="ONNX",
    )
    values = np.array([-1e-20, -800.0, -40.0])
    log1mexp, softplus, log_sigmoid, _ = fn(values)
    with np.errstate(divide="ignore"):
        exact = np.where(values < np.log(0.5), np.log1p(-np.exp(values)), np.log(-np.expm1(values)))
    np.testing.assert_allclose(log1mexp, exact, rtol=1e-15)
    big = np.array([800.0, 710.0, -800.0])
    _, softplus, log_sigmoid, logsumexp = fn(big)
    np.testing.assert_allclose(softplus, np.logaddexp(0, big), rtol=1e-15)
    np.testing.assert_allclose(log_sigmoid, -np.logaddexp(0, -big), rtol=1e-15)
    np.testing.assert_allclose(logsumexp, np.logaddexp.reduce(big), rtol=1e-15)


def test_logsumexp_keeps_its_max_guard():
    """pt.logsumexp is log(sum(exp(x))) until PyTensor's rewrites subtract the max (guarded
    for infinite maxima); the model keeps that form."""
    x = pt.matrix("x")
    fn = pytensor.function([x], pt.logsumexp(x, axis=-1), mode="ONNX")
    np.testing.assert_allclose(fn(EXTREMES), sp.logsumexp(EXTREMES, axis=-1), rtol=1e-15)


def test_logsumexp_of_an_empty_slice_is_minus_inf():
    """log(sum(exp(x))) of nothing is -inf in every PyTensor backend; the max its stabilized
    form subtracts raised NumPy's "zero-size array" error here (a max of nothing raises
    alone, as in PyTensor's Python backend)."""
    x = pt.tensor3("x")
    outs = [pt.logsumexp(x, axis=0), pt.logsumexp(x, axis=(0, 2)), pt.logsumexp(x, keepdims=True)]
    values = np.linspace(-3, 3, 24).reshape(2, 3, 4)
    compare_onnx_and_py([x], outs, [np.zeros((0, 3, 4))], more_inputs=[[values]])
    fn = pytensor.function([x], x.max(axis=0), mode="ONNX")
    with pytest.raises(ValueError, match="zero-size array"):
        fn(np.zeros((0, 3, 4)))


class _Expired(BaseException):
    """Not an Exception: PyTensor's rewriters log those and go on."""


@contextlib.contextmanager
def _deadline(seconds: int):
    """A failure, not a test that never ends, for work that takes over `seconds`."""

    def expired(signum, frame):
        raise _Expired(f"not done in {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("dtype", ["int64", "uint8", "bool"])
def test_logsumexp_of_integers_compiles_and_is_stabilized(dtype):
    """logsumexp of integers (and bools), whose Exp computes in float64 or float32: of
    integers, compiling it never finished (the stabilizing rewrite matched its own result
    again without end, as isinf of an integer max folds to False; PyTensor's own modes hang
    there too)."""
    x = pt.matrix("x", dtype=dtype)
    outs = [pt.logsumexp(x, axis=-1), pt.logsumexp(x, keepdims=True)]
    values = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    with _deadline(60):
        fn, _ = compare_onnx_and_py([x], outs, [values], more_inputs=[[np.zeros((0, 4), dtype)]])
    if dtype == "int64":  # stabilized: exp(1000) alone is inf
        big = np.array([[1000, 999, -5]])
        np.testing.assert_allclose(fn(big)[0], sp.logsumexp(big, axis=-1), rtol=1e-15)
