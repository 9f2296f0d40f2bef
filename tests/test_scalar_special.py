import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

from pt_onnxscript.ops.scalar.polygamma import polygamma
from pt_onnxscript.ops.scalar.special import (
    erfcinv,
    erfcx,
    erfinv,
    gamma,
    gammaln,
    log1mexp,
    psi,
    trigamma,
)
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

rng = np.random.default_rng(7)
EDGES = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 2.0, -1.0, -2.5, 1e-300, 1e300, 13.0, 12.999]
)


SWEEPS = {
    # (function, reference, domain sample, max relative error, max absolute error where SciPy
    #  itself is only absolutely accurate: gammaln near its zeros at 1 and 2)
    "gammaln": (
        gammaln,
        sp.gammaln,
        np.concatenate([rng.uniform(0, 15, 4000), 10 ** rng.uniform(-300, 300, 2000)]),
        1e-13,
        5e-16,
    ),
    "gammaln_negative": (
        gammaln,
        sp.gammaln,
        # down to the subnormals, where the reflection's x sin(pi x) underflows
        -np.concatenate([rng.uniform(0, 40, 2000), 10 ** rng.uniform(-323.5, 0, 1000)]),
        1e-12,
        1e-14,
    ),
    "psi": (
        psi,
        sp.psi,
        np.concatenate([rng.uniform(-10, 20, 4000), 10 ** rng.uniform(-300, 300, 2000)]),
        1e-13,
        1e-15,
    ),
    "erfcx": (
        erfcx,
        sp.erfcx,
        np.concatenate([rng.uniform(-26, 40, 4000), 10 ** rng.uniform(-300, 300, 2000)]),
        1e-13,
        0,
    ),
    "gamma": (
        gamma,
        sp.gamma,
        np.concatenate([rng.uniform(-40, 172, 4000), 10 ** rng.uniform(-300, 2.3, 2000)]),
        1e-13,
        0,
    ),
    "trigamma": (
        trigamma,
        lambda x: sp.polygamma(1, x),
        np.concatenate([rng.uniform(-20, 30, 4000), 10 ** rng.uniform(-300, 300, 2000)]),
        1e-13,
        0,
    ),
    "erfinv": (
        erfinv,
        sp.erfinv,
        np.concatenate([rng.uniform(-1, 1, 4000), 1 - 10 ** rng.uniform(-16, -1, 2000)]),
        1e-13,
        0,
    ),
    "erfcinv": (
        erfcinv,
        sp.erfcinv,
        # subnormals included, where erfc(x) underflows
        np.concatenate([rng.uniform(0, 2, 4000), 10 ** rng.uniform(-323.5, 0, 2000)]),
        1e-13,
        0,
    ),
}


@pytest.mark.parametrize("name", SWEEPS)
def test_float64_sweep_against_scipy(name):
    function, reference, x, rtol, atol = SWEEPS[name]
    x = np.concatenate([x, EDGES])
    got, expected = function(x), reference(x)
    err = relative_error(got, expected)
    bad = err > rtol
    assert not bad.any() or np.abs(got - expected)[bad].max() <= atol, (
        x[bad][:5],
        got[bad][:5],
        expected[bad][:5],
    )
    zero = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]), str(x[zero]))


def test_log1mexp_branches():
    x = -np.concatenate([10 ** rng.uniform(-300, 3, 2000), [0.0, np.inf, np.log(2)]])
    expected = np.where(x < np.log(0.5), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))
    got = log1mexp(x)
    assert relative_error(got, expected).max() < 1e-15
    # -0.0 where exp(x) underflows (x = -inf included), as log1p(-0.0)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_through_pytensor(dtype, opset):
    x = pt.vector("x", dtype=dtype)
    outs = [
        pt.gammaln(x),
        pt.psi(x),
        pt.erfcx(x),
        pt.log1mexp(-pt.abs(x) - 1e-3),
        pt.gamma(x),
        pt.tri_gamma(x),
        pt.erfinv(x / (pt.abs(x) + 1)),
        pt.erfcinv(2 * pt.abs(x) / (pt.abs(x) + 1)),
    ]
    if dtype == "int64":
        values = np.array([-3, 0, 1, 2, 7, 100])
    else:
        # tiny and subnormal negatives (gammaln), 1e3 (log1mexp's -0.0), erfcinv of 2e-310
        edges = [0.5, 1.0, 2.0, -1.5, 25.0, -1e-300, -1e-310, 1e-310, 1e3]
        values = np.concatenate([rng.uniform(-5, 30, 20), edges]).astype(dtype)
    compare_onnx_and_py(
        [x], outs, [values], opset=opset, rtol=1e-13 if dtype != "float32" else None
    )


def test_gradients_of_gammaln():
    x = pt.vector("x")
    from pytensor import grad

    out = [grad(pt.gammaln(x).sum(), x)]
    compare_onnx_and_py([x], out, [rng.uniform(0.1, 20, 10)], rtol=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 30, 170, 171, -1])
def test_polygamma_against_scipy(n):
    """Cephes' Hurwitz zeta as SciPy runs it (its early exits included): SciPy's bits for
    n >= 1, psi's accuracy for n = 0, SciPy's inf and NaN at the poles, past n! = inf, n < 0."""
    x = np.concatenate([rng.uniform(0, 20, 2000), 10 ** rng.uniform(-300, 300, 1000), EDGES])
    x = x[~(x < 0) | (x == np.floor(x))]  # negative non-integers raise (below)
    got, expected = polygamma(np.full_like(x, n), x), sp.polygamma(n, x)
    assert relative_error(got, expected).max() < (1e-15 if n else 1e-13)
    zero = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(expected[zero]))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_polygamma_through_pytensor(dtype):
    """A constant or a symbolic order, and the third derivative of gammaln (trigamma's
    gradient is polygamma(2, x))."""
    x = pt.vector("x", dtype=dtype)
    n = pt.bscalar("n")
    outs = [pt.polygamma(n, x), pt.polygamma(3, x), pytensor.grad(pt.tri_gamma(x).sum(), x)]
    if dtype == "int64":
        values = np.array([0, 1, 2, 7, 100, -3])
    else:
        values = np.concatenate([rng.uniform(0.01, 30, 20), [0.0, 1.0, 1e9, -4.0]]).astype(dtype)
    rtol = 1e-13 if dtype != "float32" else None
    more = [[values, np.array(k, "int8")] for k in (0, 1, 5)]
    compare_onnx_and_py([x, n], outs, [values, np.array(2, "int8")], more_inputs=more, rtol=rtol)


def test_polygamma_of_a_negative_non_integer_raises():
    x = pt.vector("x")
    n = pt.lscalar("n")
    fn = pytensor.function([x, n], pt.polygamma(n, x), mode="ONNX")
    with pytest.raises(ValueError, match="negative non-integer x"):
        fn(np.array([2.0, -1.5]), 2)
    # psi (n = 0) and the poles are computed
    np.testing.assert_allclose(fn(np.array([-1.5]), 0), sp.psi(-1.5), rtol=1e-15)
    assert fn(np.array([-2.0, 0.0]), 2).tolist() == [-np.inf, -np.inf]


def test_xlogx_and_xlogy0():
    xlogx = pytest.importorskip("pytensor.tensor.xlogx")
    if not hasattr(xlogx, "XlogX"):
        pytest.skip("PyTensor 3 builds xlogx from switch and log")
    x = pt.vector("x")
    y = pt.vector("y")
    values = [
        np.array([0.0, 0.5, 2.0, -1.0, np.nan, 0.0]),
        np.array([3.0, 0.0, 2.0, 1.0, 1.0, np.inf]),
    ]
    compare_onnx_and_py([x, y], [xlogx.xlogx(x), xlogx.xlogy0(x, y)], values)


def test_erfc_tail_and_erfcx_of_negatives_to_a_few_ulp_of_mpmath():
    """Against mpmath: SciPy's own erfc (x > 20) and erfcx (x < -20) are ~250 ulp off there."""
    import mpmath
    import pytensor
    import pytensor.tensor as pt

    mpmath.mp.dps = 40
    x = pt.dvector("x")
    fn = pytensor.function([x], [pt.erfc(x), pt.erfcx(x)], mode="ONNX")
    rng = np.random.default_rng(7)
    pos = np.concatenate([[25.25, 26.1, 20.0001], rng.uniform(1.25, 26.5, 100)])
    neg = np.concatenate([[-25.25, -26.1, -20.0001], -rng.uniform(0.5, 26, 100)])
    erfc = fn(pos)[0]
    erfcx = fn(neg)[1]
    exact_erfc = np.array([float(mpmath.erfc(mpmath.mpf(v))) for v in pos])
    exact_erfcx = np.array(
        [float(mpmath.exp(mpmath.mpf(v) ** 2) * mpmath.erfc(mpmath.mpf(v))) for v in neg]
    )
    ulp = np.finfo(float).eps
    assert np.max(np.abs(erfc / exact_erfc - 1)) < 4 * ulp
    assert np.max(np.abs(erfcx / exact_erfcx - 1)) < 4 * ulp


def _node_count(outputs, inputs):
    from pt_onnxscript import export_onnx

    return len(export_onnx((inputs, outputs)).graph.node)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_independent_calls_of_a_decomposed_function_run_as_one(shape, monkeypatch):
    """A PyMC logp calls gammaln on (nu + 1) / 2 and on nu / 2 (its gradient digamma on
    both), of shape (1,) once broadcast: such calls become one call on the vector of their
    arguments (fewer nodes), with the same values; float64 erf (a decomposition) too."""
    from pt_onnxscript.rewrites import StackScalarCalls

    nu = pt.tensor("nu", shape=shape)
    outputs = [
        pt.gammaln((nu + 1) / 2) - pt.gammaln(nu / 2),
        pt.psi((nu + 1) / 2) * pt.psi(nu / 2),
        pt.erf(nu) + pt.erf(2 * nu),
    ]
    for value in (0.3, 3.5, 40.0):
        compare_onnx_and_py([nu], outputs, [np.full(shape, value)], rtol=1e-13)
    stacked = _node_count(outputs, [nu])
    monkeypatch.setattr(StackScalarCalls, "apply", lambda self, fgraph: None)
    assert stacked < _node_count(outputs, [nu]) * 0.7


def test_calls_on_arrays_of_static_shapes_run_as_one(monkeypatch):
    """A beta-binomial's logp calls gammaln on three arrays of the observations' shape, its
    gradient digamma on the same three: calls on values of static shapes, different ones
    and broadcast arguments included, become one call on their arguments flattened and
    joined, with the same values to the last bit (fewer nodes); a call whose shape is not
    known at export stays apart."""
    from pytensor.graph.fg import FunctionGraph
    from pytensor.scalar.math import GammaLn
    from pytensor.tensor.elemwise import Elemwise

    from pt_onnxscript.rewrites import StackScalarCalls

    a = pt.tensor("a", shape=(1,))
    k = pt.tensor("k", shape=(7,))
    m = pt.tensor("m", shape=(2, 3))
    free = pt.dvector("free")
    outputs = [
        pt.gammaln(k + a) + pt.gammaln(20 - k + a) - pt.gammaln(a),
        pt.psi(k + a) * pt.psi(m.sum() + a),
        pt.gammaln(m) - pt.psi(m + a[0]),
        pt.gammaln(free) + pt.gammaln(free.sum()),
    ]
    values = [
        np.array([3.5]),
        np.array([0.0, 1.0, 2.0, 5.5, 9.0, 12.0, 19.0]),
        np.array([[0.25, 1.0, 3.0], [7.5, 13.5, 40.0]]),
        np.array([0.5, 2.5, 30.0]),
    ]
    more = [[np.array([0.2]), np.linspace(0, 19, 7), -np.array([[0.5, 1.5, 2.5]] * 2), values[3]]]
    compare_onnx_and_py([a, k, m, free], outputs, values, more_inputs=more, rtol=1e-14)
    graph = FunctionGraph([a, k, m, free], outputs, clone=True)
    StackScalarCalls().rewrite(graph)
    gammaln_calls = [
        node.outputs[0].type.shape
        for node in graph.apply_nodes
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, GammaLn)
    ]
    assert sorted(gammaln_calls, key=str) == [(22,), (None,)]  # 7 + 7 + 1 + 6 + 1 elements
    stacked = _node_count(outputs, [a, k, m, free])
    monkeypatch.setattr(StackScalarCalls, "apply", lambda self, fgraph: None)
    assert stacked < _node_count(outputs, [a, k, m, free]) * 0.6


def test_calls_that_read_each_other_are_not_stacked():
    """gammaln(gammaln(x)) stays two calls, and calls of two functions that feed each other
    across (gammaln -> digamma, digamma -> gammaln) are stacked only where that makes no
    cycle; the values are the same."""
    x, y = pt.dscalar("x"), pt.dscalar("y")
    a = pt.gammaln(x)
    c = pt.psi(y)
    outputs = [pt.gammaln(a + 3), pt.psi(a), pt.gammaln(c + 5), a * c]
    compare_onnx_and_py([x, y], outputs, [np.array(2.5), np.array(4.0)], rtol=1e-13)
