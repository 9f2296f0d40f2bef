import mpmath
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript.testing import compare_onnx_and_py, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

rng = np.random.default_rng(5)
a_, b_, x_ = pt.dvector("a"), pt.dvector("b"), pt.dvector("x")
BETAINC = pytensor.function([a_, b_, x_], pt.betainc(a_, b_, x_), mode="ONNX")


def log_uniform(low, high, n):
    return np.exp(rng.uniform(np.log(low), np.log(high), n))


@pytest.mark.parametrize(
    "low, high, tolerance",
    [(1e-2, 10, 2e-14), (1e-2, 100, 1e-13), (1, 1000, 1e-12)],
    ids=["a, b in [0.01, 10]", "a, b in [0.01, 100]", "a, b in [1, 1000]"],
)
def test_float64_sweep_against_scipy(low, high, tolerance):
    n = 5000
    a, b, x = log_uniform(low, high, n), log_uniform(low, high, n), rng.uniform(0, 1, n)
    expected = sp.betainc(a, b, x)
    keep = expected > 1e-200  # below, SciPy loses digits (see the next test) and then flushes to 0
    assert relative_error(BETAINC(a, b, x), expected)[keep].max() < tolerance


def test_against_mpmath_where_scipy_is_off():
    rows = [
        (0.5, 0.5, 1 - 2**-53),
        (1e-300, 1e-300, 0.3),
        (1e-20, 1e-300, 0.5),
        (361.3, 26.5, 0.1258),
        (0.5, 1e-300, 1e-20),
        (90.77, 93.79, 0.3174),
        (585.7, 30.82, 0.2791),
        (455.3, 39.40, 0.1953),
    ]
    a, b, x = (np.array(column) for column in zip(*rows))
    mpmath.mp.dps = 50
    exact = np.array([float(mpmath.betainc(p, q, 0, r, regularized=True)) for p, q, r in rows])
    # A tiny result is exp of a quantity of size |log result|, which carries its rounding.
    allowed = 1e-15 * np.maximum(10, np.abs(np.log(exact)))
    assert (relative_error(BETAINC(a, b, x), exact) < allowed).all()


@pytest.mark.parametrize(
    "small_low, large_low, large_high",
    [(1e-3, 15, 1e5), (1e-300, 1, 15), (1e-300, 1e-3, 1)],
    ids=["a >= 15: BGRAT", "1 < a < 15: a step, then BGRAT", "a <= 1: a step, then BGRAT"],
)
def test_one_parameter_below_one_near_one_on_the_others_side(small_low, large_low, large_high):
    """Boost's domains of BGRAT (b < 1 < a, x near 1, or b < min(0.2, a) <= 1 with y^b > 0.9;
    and mirrored), where Cephes' continued fraction converges slowly: its 300 steps
    (PyTensor's C backend) give 0.00849 for the first mpmath row, 3.6% low, and were up to
    37% off for b = 1e-300."""
    n = 3000
    small, large = log_uniform(small_low, 1, n), log_uniform(large_low, large_high, n)
    small = np.minimum(small, np.where(large <= 1, 0.2 * large, 1.0) * 0.999)
    y = log_uniform(1e-12, 0.3, n)
    a, b, x = (
        np.concatenate([large, small]),
        np.concatenate([small, large]),
        np.concatenate([1 - y, y]),
    )
    expected = sp.betainc(a, b, x)
    assert relative_error(BETAINC(a, b, x), expected).max() < 1e-12


def test_where_cephes_converges_slowly_against_mpmath():
    rows = [
        (17690.0, 0.001596, 0.999999874889846),
        (0.006132, 7191.0, 9.000080361e-07),
        (2.0, 1e-300, 1 - 2**-52),
        (1e-10, 0.6979, 3.7e-10),
    ]
    mpmath.mp.dps = 50
    exact = np.array([float(mpmath.betainc(p, q, 0, r, regularized=True)) for p, q, r in rows])
    a, b, x = (np.array(column) for column in zip(*rows))
    assert relative_error(BETAINC(a, b, x), exact).max() < 1e-13


def test_large_parameters_near_the_mean():
    """Cephes' 300 steps of continued fraction do not converge there when a + b passes ~1e5
    (PyTensor's C backend: 1e-7 off for a, b in [1e5, 1e6], 1e-2 in [1e6, 1e7]); the steps
    now run until converged. The error left grows with a + b (about 1e-16 (a + b))."""
    for low, high, tolerance in [(1e5, 1e6, 2e-10), (1e6, 1e7, 3e-9)]:
        a, b = log_uniform(low, high, 300), log_uniform(low, high, 300)
        x = sp.betaincinv(a, b, rng.uniform(0.01, 0.99, 300))
        expected = sp.betainc(a, b, x)
        error = np.abs(BETAINC(a, b, x) - expected) / np.minimum(expected, 1 - expected)
        assert error.max() < tolerance


def test_edges_like_scipy():
    values = np.array([0.0, 1e-300, 0.5, 1.0, 2.0, 1e5, np.inf, np.nan, -1.0])
    xs = np.array([0.0, 1e-300, 1e-20, 0.3, 0.5, 0.95, 1 - 2**-52, 1.0, 1.5, -0.1, np.nan])
    a, b, x = (v.ravel() for v in np.meshgrid(values, values, xs, indexing="ij"))
    expected = sp.betainc(a, b, x)
    # SciPy is off for a = b = 0.5 next to 1 (see above) and flushes 2e-310 to 0.
    trusted = ~((a == 0.5) & (b == 0.5) & (x == 1 - 2**-52))
    trusted &= ~((a == 0.5) & (b == 1e-300) & (x == 1e-20))
    assert relative_error(BETAINC(a, b, x), expected)[trusted].max() < 1e-13


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_through_pytensor(dtype, opset):
    a, b = pt.vector("a", dtype=dtype), pt.vector("b", dtype=dtype)
    x = pt.vector("x", dtype="float64" if dtype == "int64" else dtype)
    values = [
        np.array([0.5, 2.0, 30.0, 1.0]),
        np.array([3.0, 0.7, 25.0, 1.0]),
        np.array([0.2, 0.9, 0.6, 0.0]),
    ]
    values[:2] = [np.round(v).clip(1) if dtype == "int64" else v for v in values[:2]]
    compare_onnx_and_py(
        [a, b, x],
        pt.betainc(a, b, x),
        [v.astype(var.dtype) for v, var in zip(values, (a, b, x), strict=True)],
        opset=opset,
    )


def test_broadcast_and_empty():
    a, b, x = pt.matrix("a", shape=(None, 1)), pt.dscalar("b"), pt.dvector("x")
    out = pt.betainc(a, b, x)
    compare_onnx_and_py(
        [a, b, x],
        out,
        [np.array([[0.5], [4.0]]), np.array(2.0), np.array([0.1, 0.5, 0.99])],
        more_inputs=[[np.zeros((0, 1)), np.array(2.0), np.array([0.5])]],
    )


def test_gradients():
    """PyTensor's gradients in a and b are ScalarLoops (Boik and Robison-Cox's series)."""
    a, b, x = pt.dvector("a"), pt.dvector("b"), pt.dvector("x")
    out = pt.betainc(a, b, x).sum()
    compare_onnx_and_py(
        [a, b, x],
        pytensor.grad(out, [a, b, x]),
        [np.array([0.5, 2.0, 8.0]), np.array([3.0, 0.7, 5.0]), np.array([0.2, 0.9, 0.6])],
        rtol=1e-10,
    )
