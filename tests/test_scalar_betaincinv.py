import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# a and b below, at and above 1 up to 1e5; p in both tails, to 1e-100 and 1 - 2^-53.
AB = np.array([1e-3, 0.05, 0.3, 0.9, 1.0, 1.5, 3.0, 10.0, 50.0, 300.0, 5000.0, 1e5])
P = np.array([1e-100, 1e-20, 1e-8, 1e-3, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999, 1 - 1e-10, 1 - 2**-53])
# NaN, the domain's edges and outside it, a or b = 0 or inf.
EDGES = (
    np.array([0.0, 1.0, 0.0, -1.0, 1.0, np.inf, 1.0, np.inf, np.inf, 1.0, np.nan, 2.0, 2.0, 2.0]),
    np.array([1.0, 0.0, 0.0, 1.0, -1.0, 1.0, np.inf, np.inf, 1.0, np.inf, 1.0, 3.0, 3.0, 3.0]),
    np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 1.0, 0.5, np.nan, -0.5, 1.5]),
)
INVERSE = None


def _inverse(a, b, p):
    global INVERSE
    if INVERSE is None:
        import onnxruntime as ort

        x = pt.dvector("a"), pt.dvector("b"), pt.dvector("p")
        model = export_onnx((list(x), [pt.betaincinv(*x)]))
        INVERSE = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    return INVERSE.run(None, {"a": a, "b": b, "p": p})[0]


def _sensitivity(a, b, x, p):
    """d log(tail) / d log(x) at the root x: how much the tail (the smaller of p and 1 - p)
    changes, relatively, for a relative change of x."""
    log_density = sp.xlogy(a - 1, x) + sp.xlog1py(b - 1, -x) - sp.betaln(a, b)
    return x * np.exp(log_density) / np.minimum(p, 1 - p)


def test_against_scipy_across_regions():
    """Within 2e-12 relative, divided by the tail's sensitivity to x where it is below 1, for
    a, b <= 300 (2e-11 beyond): the root of our betainc, whose error is that much (a tail
    near 1e-3 as one minus the other, incbet's continued fraction for b = 1e5 near the mean).
    For an x that underflows SciPy returns the smallest normal float, where the answer is 0
    (or a subnormal float)."""
    a, b, p = (v.ravel() for v in np.meshgrid(AB, AB, P, indexing="ij"))
    got, expected = _inverse(a, b, p), sp.betaincinv(a, b, p)
    assert not np.isnan(got).any()
    smallest = np.finfo(np.float64).tiny
    ordinary = expected > smallest
    allowed = np.fmax(1.0, 1.0 / _sensitivity(a, b, expected, p))
    ratio = relative_error(got, expected) / allowed
    moderate = ordinary & (a <= 300) & (b <= 300)
    assert ratio[moderate].max() < 2e-12
    assert ratio[ordinary].max() < 2e-11
    underflow = ~ordinary
    assert underflow.any() and (got[underflow] < smallest).all()
    # the root is below the smallest normal float: I_x(a, b) there is already above p
    assert (sp.betainc(a[underflow], b[underflow], smallest) > p[underflow]).all()


def test_where_scipy_is_off():
    """SciPy's x for I_x(1.485, 0.2046) = 3.066e-26 gives I = 1.408e-26; Boost fails (NaN)
    for some tiny p. Ours gives back p."""
    a = np.array([1.4852591553302068, 3.3343964716417545, 7.516082505159479])
    b = np.array([0.2045502367509625, 859.5203821618563, 1.541645663044307])
    p = np.array([3.066005633000694e-26, 3.0066768082265676e-244, 7.4088017323486785e-239])
    got = _inverse(a, b, p)
    np.testing.assert_allclose(sp.betainc(a, b, got), p, rtol=1e-13)


def test_edges_like_scipy():
    a, b, p = EDGES
    got, expected = _inverse(a, b, p), sp.betaincinv(a, b, p)
    np.testing.assert_array_equal(got, expected)


def test_inverts_incomplete_beta():
    """I_x(a, b) at the inverse is p, for a, b >= 0.5 (below, x can be closer to 0 or 1 than
    its float rounds to)."""
    rng = np.random.default_rng(3)
    a, b = np.exp(rng.uniform(np.log(0.5), np.log(1e4), (2, 4000)))
    p = rng.uniform(size=4000)
    x = _inverse(a, b, p)
    np.testing.assert_allclose(sp.betainc(a, b, x), p, rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_through_pytensor_broadcast_and_empty(dtype, opset):
    a, b, p = pt.vector("a", dtype=dtype), pt.vector("b", dtype=dtype), pt.matrix("p", dtype=dtype)
    out = pt.betaincinv(a, b, p)
    a_value = np.array([0.5, 3.0, 70.0], dtype=dtype)
    b_value = np.array([2.0, 0.2, 90.0], dtype=dtype)
    p_value = np.array([[0.2, 0.95, 0.5], [1e-8, 0.0, 1.0]], dtype=dtype)
    rtol = 1e-12 if dtype == "float64" else None
    empty = np.zeros((0, 3), dtype=dtype)
    compare_onnx_and_py(
        [a, b, p],
        [out],
        [a_value, b_value, p_value],
        more_inputs=[[a_value, b_value, empty]],
        opset=opset,
        rtol=rtol,
    )


def test_gradient_with_respect_to_p():
    a, b, p = pt.vector("a"), pt.vector("b"), pt.vector("p")
    out = pytensor.grad(pt.betaincinv(a, b, p).sum(), p)
    values = [np.array([0.5, 2.0, 9.0]), np.array([3.0, 0.7, 4.0]), np.array([0.3, 0.6, 0.97])]
    compare_onnx_and_py([a, b, p], [out], values, rtol=1e-11)
