"""kve (PyTensor's Kve) and kv, against SciPy (AMOS) and PyTensor's Python linker."""

import mpmath
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp
from pytensor.tensor.math import kv, kve

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

rng = np.random.default_rng(11)


def _orders_and_arguments(count, low, high):
    """Orders: uniform in [-3, 3], log-uniform to 500, integers and half-integers; x
    log-uniform in [low, high]."""
    orders = np.concatenate(
        [
            rng.uniform(-3, 3, count),
            np.exp(rng.uniform(np.log(1e-12), np.log(500), count)),
            rng.integers(-4, 5, count) + 0.0,
            rng.integers(0, 6, count) + 0.5,
        ]
    )
    return orders, np.exp(rng.uniform(np.log(low), np.log(high), orders.size))


@pytest.fixture(scope="module")
def kve_float64():
    v, x = pt.dvector("v"), pt.dvector("x")
    return pytensor.function([v, x], kve(v, x), mode="ONNX")


@pytest.mark.parametrize(
    "low, high",
    [(1e-300, 1e-16), (1e-16, 1e-6), (1e-6, 1.0), (1.0, 1e3), (1e3, 1e9)],
    ids=["tiny", "small", "below-1", "above-1", "large"],
)
def test_against_scipy(kve_float64, low, high):
    """Within 1e-12 relative of SciPy wherever SciPy's value is finite and normal, on each
    side of the quadrature's and the small-x form's boundaries."""
    v, x = _orders_and_arguments(2500, low, high)
    expected = sp.kve(v, x)
    got = kve_float64(v, x)
    finite = np.isfinite(expected) & (expected > 1e-290)
    assert finite.mean() > 0.5
    assert relative_error(got[finite], expected[finite]).max() < 1e-12
    # Where SciPy overflows, the value is inf or above 1e300 (AMOS stops short of float64's
    # largest value); a finite one is the value itself (mpmath).
    overflow = np.isinf(expected)
    assert (got[overflow] > 1e300).all()
    for order, argument, value in list(zip(v[overflow], x[overflow], got[overflow]))[:10]:
        if np.isfinite(value):
            exact = mpmath.besselk(abs(order), argument) * mpmath.exp(argument)
            assert abs(value / float(exact) - 1) < 1e-12


def test_edges(kve_float64):
    """SciPy's values where it has them; where AMOS refuses (NaN for x above ~1.07e9, an
    infinite x or an infinite order) or calls a finite value overflow, the function's own:
    sqrt(pi / (2 x)) for huge x, 0 at x = inf, inf for an infinite order."""
    v = np.array([0.0, 2.5, 1.0, -2.5, np.nan, 1.0, 0.0, 0.3, 3.0, 1.0, 0.0, np.inf, -np.inf])
    x = np.array([0.0, 0.0, -1.0, 3.0, 1.0, np.nan, 5e-324, 1e-320, 5e-324, np.inf, 1e12, 1.0, 1.0])
    got = kve_float64(v, x)
    k0_tiny = np.log(2) - np.log(5e-324) - np.euler_gamma  # K_0(x) = -log(x / 2) - gamma + O(x^2)
    k03_tiny = sp.gamma(0.3) / 2 * np.exp(0.3 * (np.log(2) - np.log(1e-320)))  # + O(x^0.6) relative
    expected = [np.inf, np.inf, np.nan, sp.kve(-2.5, 3.0), np.nan, np.nan, k0_tiny, k03_tiny]
    expected += [np.inf, 0.0, np.sqrt(np.pi / 2e12) * (1 - 1 / 8e12), np.inf, np.inf]
    np.testing.assert_allclose(got, expected, rtol=1e-13)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_through_pytensor_with_gradient_and_kv(dtype):
    """kve and kv = kve exp(-x) against PyTensor's Python linker (SciPy), broadcast against a
    scalar order, empty, with kve's gradient in x (its own Kve of order v - 1)."""
    v = pt.scalar("v", dtype=dtype)
    x = pt.vector("x", dtype=dtype)
    outs = [kve(v, x), kv(v, x), pt.grad(kve(v, x).sum(), x)]
    tol = 1e-12 if dtype == "float64" else 1e-6
    cases = [
        [np.array(1.7, dtype), np.array([0.01, 0.5, 2.0, 30.0], dtype)],
        [np.array(-0.25, dtype), np.array([1e-5, 1.0, 400.0], dtype)],
        [np.array(3.0, dtype), np.array([], dtype)],
    ]
    compare_onnx_and_py([v, x], outs, cases[0], more_inputs=cases[1:], rtol=tol, atol=0)


def test_one_graph_with_no_loop():
    v, x = pt.dvector("v"), pt.dvector("x")
    model = export_onnx(([v, x], [kve(v, x)]))
    assert {"Loop", "Scan", "If"}.isdisjoint(node.op_type for node in model.graph.node)
