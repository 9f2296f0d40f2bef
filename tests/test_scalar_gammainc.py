import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript.ops.scalar.gammainc import gammainc, gammaincc, log1pmx, p_or_q
from pt_onnxscript.testing import compare_onnx_and_py, executed_nodes, relative_error

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

rng = np.random.default_rng(11)


def compiled(function):
    """`function` as one ONNX Runtime session (eager mode runs its loops op by op: slow)."""
    session = ort.InferenceSession(function.to_model_proto().SerializeToString())
    names = [i.name for i in session.get_inputs()]
    return lambda *arrays: session.run(None, dict(zip(names, arrays, strict=True)))[0]


def sample(n, a_low, a_high, spread):
    a = 10 ** rng.uniform(np.log10(a_low), np.log10(a_high), n)
    return a, a * 10 ** rng.uniform(-spread, spread, n)


REGIONS = {
    "small a": sample(3000, 1e-3, 1, 3),
    "moderate a": sample(3000, 1, 20, 1.5),
    "Temme": sample(3000, 20, 200, 0.15),
    "large a": sample(3000, 200, 1e4, 0.3),
    "tails": sample(3000, 1e-2, 1e3, 2),
}


def mismatch(got, expected):
    """Relative error over what SciPy's own rounding allows: exp(t) carries t's rounding, and
    t = a log x - x - lgamma(a) is about log(result) in size."""
    allowed = 1e-13 * np.fmax(1.0, np.abs(np.log(np.abs(expected))))
    return np.where(expected < 1e-300, 0.0, relative_error(got, expected) / allowed)


@pytest.mark.parametrize("region", REGIONS)
@pytest.mark.parametrize(
    "function, reference", [(gammainc, sp.gammainc), (gammaincc, sp.gammaincc)]
)
def test_float64_sweep_against_scipy(function, reference, region):
    a, x = REGIONS[region]
    got, expected = compiled(function)(a, x), reference(a, x)
    ratio = mismatch(got, expected)
    assert ratio.max() <= 1, (
        a[ratio > 1][:5],
        x[ratio > 1][:5],
        got[ratio > 1][:5],
        expected[ratio > 1][:5],
    )


@pytest.mark.parametrize(
    "function, reference", [(gammainc, sp.gammainc), (gammaincc, sp.gammaincc)]
)
def test_edges_like_scipy(function, reference):
    edges = np.array([0.0, 1e-300, 0.5, 1.0, 1.1, 20.0, 200.0, 1e300, np.inf, np.nan, -1.0])
    a, x = (v.ravel() for v in np.meshgrid(edges, edges))
    got, expected = compiled(function)(a, x), reference(a, x)
    assert mismatch(got, expected).max() <= 1


def test_log1pmx():
    x = np.concatenate([rng.uniform(-0.9, 3, 2000), [0.0, -0.5, 0.5, 1e-10]])
    expected = np.array(
        [
            float(np.log1p(v) - v)
            if abs(v) >= 0.5
            else sum((-v) ** n * -1 / n for n in range(2, 400))
            for v in x
        ]
    )
    assert np.allclose(compiled(log1pmx)(x), expected, rtol=1e-14, atol=0)


def test_p_or_q_is_gammainc_or_gammaincc_bit_for_bit():
    """p_or_q picks P or Q per element (gammaincinv's Halley steps mix them): a mixed mask
    gives, element by element, the bits of gammainc and gammaincc (its all-P and all-Q
    ends, which the sweeps above check against SciPy), edges included."""
    edges = np.array([0.0, 1e-300, 0.5, 1.0, 1.05, 1.1, 20.0, 200.0, 1e300, np.inf, np.nan, -1.0])
    a, x = (
        np.concatenate([v.ravel(), *parts])
        for v, parts in zip(np.meshgrid(edges, edges), zip(*REGIONS.values()), strict=True)
    )
    session = ort.InferenceSession(p_or_q.to_model_proto().SerializeToString())
    p, q = compiled(gammainc)(a, x), compiled(gammaincc)(a, x)
    for on_q in (np.zeros(a.size, bool), np.ones(a.size, bool), np.arange(a.size) % 2 == 1):
        got = session.run(None, {"a": a, "x": x, "on_q": on_q})[0]
        np.testing.assert_array_equal(got, np.where(on_q, q, p))


def test_series_stop_at_zero_terms(tmp_path):
    """log1pmx's series stops for an element whose terms are 0 (x = 0, or put out of the
    series by a Where, as every gammainc call puts some): Cephes adds zeros up to 500 terms,
    and such an element held the whole tensor's loop for them. A one-element gammainc ran
    57,792 nodes (27-67 ms), now ~2,900."""
    zeros = executed_nodes(log1pmx.to_model_proto(), {"x": np.array([0.0, 0.0])}, tmp_path)
    assert len(zeros) < 100
    one = {"a": np.array([2.0]), "x": np.array([1.0])}
    assert len(executed_nodes(gammainc.to_model_proto(), one, tmp_path)) < 10_000
    assert compiled(log1pmx)(np.array([0.0, -0.0, 1e-200]))[0] == 0.0


@pytest.mark.parametrize(
    "dtype", ["float64", "float32", pytest.param("int64", marks=pytest.mark.slow)]
)
def test_through_pytensor(dtype, opset):
    a, x = pt.vector("a", dtype=dtype), pt.matrix("x", dtype=dtype)
    outs = [pt.gammainc(a, x), pt.gammaincc(a, x), pt.gammau(a, x), pt.gammal(a, x)]
    if dtype == "int64":
        a_value, x_value = np.array([1, 3, 30]), np.array([[0, 2, 25], [5, 1, 40]])
    else:
        a_value = np.array([0.5, 3.0, 30.0], dtype=dtype)
        x_value = np.array([[0.2, 2.5, 27.0], [5.0, 0.0, 40.0]], dtype=dtype)
    compare_onnx_and_py(
        [a, x], outs, [a_value, x_value], opset=opset, rtol=1e-13 if dtype != "float32" else None
    )


def test_empty_and_broadcast():
    a, x = pt.vector("a"), pt.tensor("x", shape=(None, 1))
    compare_onnx_and_py([a, x], [pt.gammaincc(a, x)], [np.array([2.0, 3.0]), np.zeros((0, 1))])
    compare_onnx_and_py(
        [a, x], [pt.gammainc(a, x)], [np.array([2.0, 40.0]), np.array([[1.0], [38.0]])]
    )


def test_gradients():
    """The gradients with respect to a run PyTensor's ScalarLoop series (from Stan) as Loops;
    tested where those series are accurate (they lose all digits at some a ~ x > 20)."""
    a, x = pt.vector("a"), pt.vector("x")
    outs = pytensor.grad(pt.gammainc(a, x).sum(), [a, x]) + pytensor.grad(
        pt.gammaincc(a, x).sum(), [a, x]
    )
    a_value = np.array([0.5, 1.0, 2.5, 3.0, 5.0, 0.7, 2.0, 4.0, 10.0, 6.0])
    x_value = np.array([0.3, 2.0, 1.0, 12.0, 9.0, 20.0, 40.0, 0.5, 25.0, 3.0])
    compare_onnx_and_py([a, x], outs, [a_value, x_value], rtol=1e-12, expected_ops=["Loop"])
