import mpmath
import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.scalar.math as psm
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript import UnsupportedOpError
from pt_onnxscript.ops.scalar.bessel import i0, i0e, i1, i1e, i2, i2e, j0, j1
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

rng = np.random.default_rng(7)
POINTS = np.concatenate(
    [
        rng.uniform(-30, 30, 4000),
        np.exp(rng.uniform(-20, np.log(713), 4000)) * rng.choice([-1, 1], 4000),
        [0.0, -0.0, 2.0, -2.0, 8.0, -8.0, 709.7, 709.8, 713.9, 714.0, np.inf, -np.inf, np.nan],
    ]
)


def compiled(function):
    session = ort.InferenceSession(function.to_model_proto().SerializeToString())
    return lambda x: session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize(
    "function, reference",
    [(i0, sp.i0), (i0e, sp.i0e), (i1, sp.i1), (i1e, sp.i1e)],
    ids=["i0", "i0e", "i1", "i1e"],
)
def test_cephes_functions_against_scipy(function, reference):
    assert relative_error(compiled(function)(POINTS), reference(POINTS)).max() < 1e-15


@pytest.mark.parametrize(
    "function, reference, order", [(j0, sp.j0, 0), (j1, sp.j1, 1)], ids=["j0", "j1"]
)
def test_j0_and_j1_against_scipy(function, reference, order):
    """Cephes' j0/j1 with fdlibm's sin and cos: a few ulp of SciPy; at their zeros, where SciPy
    itself is only absolutely accurate (~1e-16), within 1e-17 of it."""
    zeros = sp.jn_zeros(order, 200)
    x = np.concatenate(
        [
            POINTS,
            rng.uniform(-1000, 1000, 4000),
            10 ** rng.uniform(-320, 8, 2000) * rng.choice([-1, 1], 2000),
            np.nextafter(zeros, np.inf),
            np.nextafter(zeros, -np.inf),
            [5.0, -5.0, 1e-5, -1e-5, 1e300],
        ]
    )
    got, expected = compiled(function)(x), reference(x)
    err = relative_error(got, expected)
    assert np.all((err < 1e-14) | (np.abs(got - expected) < 1e-17)), x[err >= 1e-14][:5]
    zero = expected == 0  # j1(-0.0) is -0.0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]))


@pytest.mark.parametrize("scaled", [False, True], ids=["i2", "i2e"])
def test_order_two_against_mpmath(scaled):
    """Against mpmath: SciPy's Amos-based iv/ive are off by up to 9e-15 here."""
    x = np.concatenate([POINTS[::20], [1e-300, 1e-8, 1.999, 2.001]])
    got = compiled(i2e if scaled else i2)(x)
    mpmath.mp.dps = 40

    def exact(v):
        if not np.isfinite(v):
            return np.nan  # SciPy's ive(2, +-inf) and iv(2, +-inf)
        value = mpmath.besseli(2, v) * (mpmath.exp(-abs(mpmath.mpf(v))) if scaled else 1)
        return float(value) if value < np.finfo(float).max else np.inf

    expected = np.array([exact(v) for v in x])
    assert relative_error(got, expected).max() < 2e-15


X = np.array([-30.0, -8.0, -2.5, -1.0, -1e-9, 0.0, 1e-9, 0.5, 1.9, 2.1, 7.9, 8.1, 100.0, 700.0])


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_through_pytensor(dtype, opset):
    x = pt.vector("x", dtype=dtype)
    values = (X if dtype != "int64" else np.round(X)).astype(dtype)
    orders = [pt.ive(v, x) for v in (0, 1, 2)]
    compare_onnx_and_py([x], [pt.i0(x), pt.i1(x), *orders], [values], opset=opset)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_j0_and_j1_through_pytensor(dtype):
    """And jv of orders 0, 1, 2, j0's gradient (-j1) and j1's ((j0 - jv(2, x)) / 2)."""
    x = pt.vector("x", dtype=dtype)
    values = (X if dtype != "int64" else np.round(X)).astype(dtype)
    outs = [pt.j0(x), pt.j1(x), *(pt.jv(v, x) for v in (0, 1, 2))]
    if dtype != "int64":
        outs += [pytensor.grad(pt.j0(x).sum(), x), pytensor.grad(pt.j1(x).sum(), x)]
    # SciPy's jv is AMOS, its j0 and j1 Cephes (ours): they differ by a few ulp.
    compare_onnx_and_py([x], outs, [values], rtol=1e-14 if dtype == "float64" else None)


def test_order_two_of_the_first_kind_against_mpmath():
    """J_2: its series below |x| = 4 is relatively accurate (SciPy's AMOS too); above, 2 j1 /
    x - j0, like SciPy, only absolutely near J_2's zeros (within 5e-16 of mpmath here, SciPy
    4.3e-16)."""
    from pt_onnxscript.ops.scalar.bessel import j2

    small = np.concatenate([10 ** rng.uniform(-300, np.log10(4), 300), [3.9999999, 1e-5]])
    large = np.concatenate([rng.uniform(4, 60, 300), np.nextafter(sp.jn_zeros(2, 10), 0)])
    x = np.concatenate([small, -small, large, -large, [0.0, -0.0, np.inf, -np.inf, np.nan]])
    got = compiled(j2)(x)
    mpmath.mp.dps = 40
    exact = np.array([float(mpmath.besselj(2, v)) if np.isfinite(v) else np.nan for v in x])
    near, finite = np.abs(x) < 4, np.isfinite(x)
    assert relative_error(got[near], exact[near]).max() < 1e-15
    assert np.abs(got - exact)[finite & ~near].max() < 5e-16
    assert np.isnan(got[~finite]).all() and np.isnan(sp.jv(2, x[~finite])).all()  # as SciPy


def test_edges_broadcast_and_empty():
    x = pt.matrix("x", shape=(None, 1))
    y = pt.vector("y")
    edges = np.array([[0.0], [-0.0], [np.inf], [-np.inf], [np.nan]])
    compare_onnx_and_py(
        [x, y], [pt.i0(x) * pt.i1(y), pt.ive(2, x + y)], [edges, np.array([1.0, -3.0])]
    )
    compare_onnx_and_py([x, y], [pt.i0(x + y), pt.i1(x)], [np.zeros((0, 1)), np.zeros(3)])


def test_gradients():
    """d i0 = i1; d i1 = (i0 + i2) / 2, through iv/ive of order 2."""
    x = pt.vector("x")
    cost = (pt.i0(x) + pt.i1(x) * pt.sin(x)).sum()
    gradients = [pytensor.grad(cost, x), pytensor.grad(pt.ive(1, x).sum(), x)]
    compare_onnx_and_py([x], gradients, [X])


def test_order_that_is_not_a_constant_0_1_or_2_is_refused():
    v, x = pt.vector("v"), pt.vector("x")
    for order in (v, pt.constant(3.0)):
        for bessel in (pt.ive, pt.jv):
            # UnsupportedOpError, as for other Ops: not wrapped in a TranslationError.
            with pytest.raises(UnsupportedOpError, match="constant order v of 0, 1 or 2"):
                pytensor.function([v, x], bessel(order, x), mode="ONNX", on_unused_input="ignore")


@pytest.mark.skipif(not hasattr(psm, "Iv"), reason="PyTensor 3.0 has no Iv op")
def test_iv_of_pytensor_2_38():
    x = pt.vector("x")
    compare_onnx_and_py([x], [pt.iv(v, x) for v in (0, 1, 2)], [X])
