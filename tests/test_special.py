import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp
from pytensor.tensor.special import log_softmax, softmax

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
def test_softmax_extremes_and_empty(fn):
    x = pt.matrix("x")
    xv = np.array([[1e300, -1e300, 0.0], [-np.inf, 0.0, 1.0], [700.0, 710.0, -710.0]])
    compare_onnx_and_py(
        [x], fn(x, axis=-1), [xv], expected_ops=[fn.__name__.title().replace("_", "")]
    )
    compare_onnx_and_py([x], fn(x, axis=-1), [np.zeros((0, 3))])


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
