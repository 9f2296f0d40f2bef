import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# a across DiDonato and Morris' regions (a < 1 by b = q Gamma(a), a = 1, a > 1 by p and w;
# a >= 500), p across both halves and past 0.9 (where igami hands p to igamci as 1 - p).
A = np.array(
    [1e-300, 1e-10, 1e-3, 0.05, 0.1, 0.29, 0.3, 0.5, 0.9, 0.999, 1.0, 1.001, 1.5, 2.0, 3.0]
    + [5.0, 10.0, 30.0, 100.0, 499.0, 500.0, 501.0, 1e3, 1e4, 1e5, 1e10]
)
P = np.array(
    [1e-300, 1e-100, 1e-20, 1e-10, 1e-5, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.45, 0.5, 0.55, 0.7]
    + [0.89, 0.9, np.nextafter(0.9, 1.0), 0.95, 0.99, 0.999999, 1 - 1e-12, 1 - 2**-53]
)
# NaN, the domain's edges and outside it, a = 0 and a = inf.
EDGES = (
    np.array([0.0, 0.0, 0.0, -1.0, -1.0, np.inf, np.inf, np.inf, np.nan, 1.0, 1.0, 1.0, 2.0, 2.0]),
    np.array([0.0, 1.0, 0.5, 0.0, 0.5, 0.0, 1.0, 0.5, 0.5, np.nan, -0.5, 1.5, 1.0, 0.0]),
)


def _both(a, p):
    x = pt.dvector("a"), pt.dvector("p")
    model = export_onnx((list(x), [pt.gammaincinv(*x), pt.gammainccinv(*x)]))
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"a": a, "p": p})


def test_against_scipy_across_regions_and_edges():
    """Within SciPy's own rounding of x: the inverse's x carries log(x)'s rounding (the
    Halley steps work on P(a, x), whose exponent is a log x - x - lgamma(a))."""
    a, p = (v.ravel() for v in np.meshgrid(A, P))
    a, p = np.concatenate([a, EDGES[0]]), np.concatenate([p, EDGES[1]])
    got_p, got_q = _both(a, p)
    for got, expected in ((got_p, sp.gammaincinv(a, p)), (got_q, sp.gammainccinv(a, p))):
        assert np.array_equal(np.isnan(got), np.isnan(expected))
        exact = (got == expected) | np.isnan(expected)
        allowed = 1e-13 * np.fmax(1.0, np.abs(np.log(np.where(exact, 1.0, np.abs(expected)))))
        ratio = np.where(exact, 0.0, relative_error(got, expected) / allowed)
        assert ratio.max() <= 1, (a[ratio > 1][:5], p[ratio > 1][:5], got[ratio > 1][:5])
    # The inverses invert: P(a, gammaincinv(a, p)) = p where x is well conditioned.
    inside = (a >= 0.1) & (a <= 1e4) & (p > 1e-20) & (p < 1 - 1e-12)
    np.testing.assert_allclose(sp.gammainc(a[inside], got_p[inside]), p[inside], rtol=1e-11)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_through_pytensor_broadcast_and_empty(dtype, opset):
    a, p = pt.vector("a", dtype=dtype), pt.matrix("p", dtype=dtype)
    outs = [pt.gammaincinv(a, p), pt.gammainccinv(a, p)]
    a_value = np.array([0.5, 3.0, 700.0], dtype=dtype)
    p_value = np.array([[0.2, 0.95, 0.5], [1e-8, 0.0, 1.0]], dtype=dtype)
    rtol = 1e-12 if dtype == "float64" else None
    empty = np.zeros((0, 3), dtype=dtype)
    compare_onnx_and_py(
        [a, p], outs, [a_value, p_value], more_inputs=[[a_value, empty]], opset=opset, rtol=rtol
    )


def test_gradient_with_respect_to_p():
    a, p = pt.vector("a"), pt.vector("p")
    outs = pytensor.grad((pt.gammaincinv(a, p) + pt.gammainccinv(a, p)).sum(), p)
    compare_onnx_and_py(
        [a, p], outs, [np.array([0.5, 2.0, 9.0]), np.array([0.3, 0.6, 0.97])], rtol=1e-11
    )
