import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg

from pt_onnxscript.testing import compare_onnx_and_py

try:  # PyTensor 3
    from pytensor.tensor.linalg import (
        solve_continuous_lyapunov,
        solve_discrete_are,
        solve_discrete_lyapunov,
        solve_sylvester,
    )
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.linear_control import solve_sylvester
    from pytensor.tensor.slinalg import (
        solve_continuous_lyapunov,
        solve_discrete_are,
        solve_discrete_lyapunov,
    )


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_sylvester_and_lyapunov_like_scipy(dtype, rng):
    """solve_sylvester (square and rectangular C), the continuous Lyapunov equation and both
    methods of the discrete one, against PyTensor's own (Schur and trsyl, through SciPy)."""
    a, b, c = (pt.matrix(name, dtype=dtype) for name in "abc")
    q = pt.matrix("q", dtype=dtype)
    outs = [
        solve_sylvester(a, b, c),
        solve_continuous_lyapunov(a, q),
        solve_discrete_lyapunov(a * 0.4, q),
    ]
    tol = 1e-9 if dtype == "float64" else 2e-3
    cases = []
    for m, n in [(1, 1), (3, 2), (4, 4)]:
        values = [rng.normal(size=s) for s in [(m, m), (n, n), (m, n), (m, m)]]
        cases.append([v.astype(dtype) for v in values])
    compare_onnx_and_py([a, b, c, q], outs, cases[0], more_inputs=cases[1:], rtol=tol, atol=tol)


@pytest.mark.slow  # gradients through Kronecker and Schur forms
def test_batched_sylvester_and_gradients(rng):
    """A batch of Sylvester equations, and the gradient of the discrete Lyapunov solution (a
    Sylvester equation in A's adjoint) as PyTensor computes it."""
    a, b, c = pt.tensor3("a"), pt.tensor3("b"), pt.tensor3("c")
    compare_onnx_and_py(
        [a, b, c],
        solve_sylvester(a, b, c),
        [rng.normal(size=s) for s in [(2, 3, 3), (2, 2, 2), (2, 3, 2)]],
        rtol=1e-10,
        atol=1e-12,
    )
    m, q = pt.matrix("m"), pt.matrix("q")
    x = solve_discrete_lyapunov(m * 0.4, q)
    grads = pytensor.grad((x * x).sum(), [m, q])
    compare_onnx_and_py([m, q], grads, [rng.normal(size=(4, 4)), rng.normal(size=(4, 4))])
    # Through the Schur form (m n above KRONECKER_MOST), static sizes.
    m, q = pt.tensor("m", shape=(30, 30)), pt.tensor("q", shape=(30, 30))
    x = solve_continuous_lyapunov(m - 8 * pt.eye(30), q)
    grads = pytensor.grad((x * x).sum(), [m, q])
    values = [rng.normal(size=(30, 30)), rng.normal(size=(30, 30))]
    compare_onnx_and_py([m, q], grads, values, rtol=1e-9, atol=1e-12)


def test_singular_systems_are_nan():
    """A and -B sharing an eigenvalue: NaN, in the Kronecker form and the Schur form (LAPACK's
    trsyl perturbs the system instead)."""
    a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c")
    fn = pytensor.function([a, b, c], solve_sylvester(a, b, c), mode="ONNX")
    assert np.isnan(fn(np.eye(2), -np.eye(2), np.ones((2, 2)))).all()
    assert np.isnan(fn(np.eye(30), -np.eye(30), np.ones((30, 30)))).all()


@pytest.mark.parametrize(
    "static", [pytest.param(True, marks=pytest.mark.slow), False], ids=["static", "symbolic"]
)
def test_large_systems_by_the_schur_form_like_scipy(static, rng):
    """Above KRONECKER_MOST unknowns, the real Schur form of the smaller matrix: square and
    lopsided systems both ways round (B's complex eigenvalue pairs make 2 x 2 blocks), and the
    continuous Lyapunov equation; no size limit (70 x 70, 4,900 unknowns, was refused)."""
    sizes = [(30, 40), (400, 3), (70, 70)]
    for m, n in sizes if static else sizes[:1]:
        shapes = [(m, m), (n, n), (m, n)]
        if static:
            a, b, c = (pt.tensor(name, shape=s) for name, s in zip("abc", shapes, strict=True))
        else:
            a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c")
        values = [rng.normal(size=s) for s in shapes]
        more = [] if static else [[rng.normal(size=s) for s in [(40, 40), (30, 30), (40, 30)]]]
        compare_onnx_and_py(
            [a, b, c], solve_sylvester(a, b, c), values, more_inputs=more, rtol=1e-9, atol=1e-10
        )
    q = pt.tensor("q", shape=(30, 30)) if static else pt.matrix("q")
    value = rng.normal(size=(30, 30))
    compare_onnx_and_py(
        [q], solve_continuous_lyapunov(q - 8 * pt.eye(30), q), [value], rtol=1e-9, atol=1e-10
    )


def test_batched_systems_by_the_schur_form(rng):
    """A batch of large systems, B broadcast against it."""
    a, b, c = pt.tensor3("a"), pt.matrix("b"), pt.tensor3("c")
    values = [rng.normal(size=s) for s in [(2, 30, 30), (30, 30), (2, 30, 30)]]
    compare_onnx_and_py([a, b, c], solve_sylvester(a, b, c), values, rtol=1e-9, atol=1e-10)


def test_trsyl_like_lapack(rng):
    """PyTensor's TRSYL (A X + X B = C with A and B in real Schur form, LAPACK's trsyl), alone
    and batched."""
    try:  # PyTensor 3
        from pytensor.tensor.linalg.solvers.linear_control import TRSYL
    except ImportError:  # PyTensor 2.38
        from pytensor.tensor._linalg.solve.linear_control import TRSYL
    from pytensor.tensor.blockwise import Blockwise

    a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c")
    cases = []
    for m, n in [(1, 1), (4, 3), (7, 9)]:
        s = scipy.linalg.schur(rng.normal(size=(m, m)))[0]
        r = scipy.linalg.schur(rng.normal(size=(n, n)))[0]
        cases.append([s, r, rng.normal(size=(m, n))])
    compare_onnx_and_py(
        [a, b, c], TRSYL()(a, b, c), cases[0], more_inputs=cases[1:], rtol=1e-10, atol=1e-12
    )
    batch = [pt.tensor3(name) for name in "abc"]
    values = [np.stack([x, x * 2]) for x in cases[2]]
    compare_onnx_and_py(batch, Blockwise(TRSYL())(*batch), values, rtol=1e-10, atol=1e-12)


def _dare_case(rng, m, n, dtype="float64"):
    """A, B, Q (positive semidefinite) and R (positive definite) of a random DARE."""
    a, b = rng.normal(size=(m, m)), rng.normal(size=(m, n))
    q, r = rng.normal(size=(m, m)), rng.normal(size=(n, n))
    return [x.astype(dtype) for x in (a, b, q @ q.T, r @ r.T + np.eye(n))]


def _dare_residual(a, b, q, r, x):
    """The largest entry of A^T X A - X + Q - (A^T X B)(R + B^T X B)^-1 (B^T X A), SciPy's
    test of its solutions."""
    xa, xb = x @ a, x @ b
    return np.abs(a.T @ xa - x + q - a.T @ xb @ np.linalg.solve(r + b.T @ xb, b.T @ xa)).max()


def test_discrete_are_like_scipy(rng):
    """solve_discrete_are of symbolic size against PyTensor's own (the QZ decomposition of its
    extended pencil, through SciPy): square and lopsided B, one input, and a singular R (a
    state-space model without measurement error, R + B^T Q B nonsingular)."""
    a, b, q, r = (pt.matrix(name) for name in "abqr")
    cases = [_dare_case(rng, m, n) for m, n in [(1, 1), (3, 2), (4, 4), (6, 1)]]
    trend = [[[1.0, 0], [1, 1]], [[1.0], [0]], [[0.5, 0], [0, 0.1]], [[0.0]]]
    cases.append([np.array(x) for x in trend])
    compare_onnx_and_py(
        [a, b, q, r],
        solve_discrete_are(a, b, q, r),
        cases[0],
        more_inputs=cases[1:],
        rtol=1e-9,
        atol=1e-9,
    )


@pytest.mark.slow
def test_discrete_are_of_float32_inputs(rng):
    """float32 inputs: PyTensor's result is float64 (its NaN switch upcasts), computed in
    float32; ours is computed in float64, so it agrees with SciPy's float64 solution to
    rounding and with PyTensor's to float32's accuracy (A scaled to keep that within 1e-3)."""
    a, b, q, r = (pt.matrix(name, dtype="float32") for name in "abqr")
    cases = []
    for m, n in [(1, 1), (3, 2), (6, 1)]:
        x, *rest = _dare_case(rng, m, n, "float32")
        cases.append([x * np.float32(0.5), *rest])
    fn, _ = compare_onnx_and_py(
        [a, b, q, r],
        solve_discrete_are(a, b, q, r),
        cases[0],
        more_inputs=cases[1:],
        rtol=1e-3,
        atol=1e-3,
    )
    for case in cases:
        (x,) = fn(*case)
        expected = scipy.linalg.solve_discrete_are(*(v.astype("float64") for v in case))
        np.testing.assert_allclose(x, expected, rtol=1e-10, atol=1e-12)


# SciPy's real DARE test cases (scipy/linalg/tests/test_solvers.py, TestSolveDiscreteAre; from
# Benner, Laub and Mehrmann's DAREX collection and a user's report): A, B, Q, R and SciPy's
# tolerance for the largest entry of the residual. Its case 6, darex #3, is in
# test_discrete_are_failures.
# fmt: off
DAREX = [
    # SciPy's case 3: User-reported gh-2251 (Trac #1732)
    (np.array([[0.63399379, 0.54906824, 0.76253406],
               [0.5404729, 0.53745766, 0.08731853],
               [0.27524045, 0.84922129, 0.4681622]]),
     np.array([[0.96861695], [0.05532739], [0.78934047]]),
     np.eye(3),
     np.eye(1),
     1.5e-14),
    # SciPy's case 4: darex #1
    (np.array([[4, 3], [-4.5, -3.5]]),
     np.array([[1], [-1]]),
     np.array([[9, 6], [6, 4]]),
     np.array([[1]]),
     1.5e-13),
    # SciPy's case 5: darex #2
    (np.array([[0.9512, 0], [0, 0.9048]]),
     np.array([[4.877, 4.877], [-1.1895, 3.569]]),
     np.array([[0.005, 0], [0, 0.02]]),
     np.array([[1/3, 0], [0, 3]]),
     1.5e-16),
    # SciPy's case 7: darex #4 (skipped the gen. Ric. term S)
    (np.array([[0, 1], [0, -1]]),
     np.array([[1, 0], [2, 1]]),
     np.array([[-4, -4], [-4, 7]]) * (1/11),
     np.array([[9, 3], [3, 1]]),
     1.5e-14),
    # SciPy's case 8: darex #5
    (np.array([[0, 1], [0, 0]]),
     np.array([[0], [1]]),
     np.array([[1, 2], [2, 4]]),
     np.array([[1]]),
     1.5e-14),
    # SciPy's case 9: darex #6
    (np.array([[0.998, 0.067, 0, 0],
               [-.067, 0.998, 0, 0],
               [0, 0, 0.998, 0.153],
               [0, 0, -.153, 0.998]]),
     np.array([[0.0033, 0.0200],
               [0.1000, -.0007],
               [0.0400, 0.0073],
               [-.0028, 0.1000]]),
     np.array([[1.87, 0, 0, -0.244],
               [0, 0.744, 0.205, 0],
               [0, 0.205, 0.589, 0],
               [-0.244, 0, 0, 1.048]]),
     np.eye(2),
     1.5e-13),
    # SciPy's case 10: darex #7
    (np.array([[0.984750, -.079903, 0.0009054, -.0010765],
               [0.041588, 0.998990, -.0358550, 0.0126840],
               [-.546620, 0.044916, -.3299100, 0.1931800],
               [2.662400, -.100450, -.9245500, -.2632500]]),
     np.array([[0.0037112, 0.0007361],
               [-.0870510, 9.3411e-6],
               [-1.198440, -4.1378e-4],
               [-3.192700, 9.2535e-4]]),
     np.eye(4)*1e-2,
     np.eye(2),
     1.5e-14),
    # SciPy's case 11: darex #8
    (np.array([[-0.6000000, -2.2000000, -3.6000000, -5.4000180],
               [1.0000000, 0.6000000, 0.8000000, 3.3999820],
               [0.0000000, 1.0000000, 1.8000000, 3.7999820],
               [0.0000000, 0.0000000, 0.0000000, -0.9999820]]),
     np.array([[1.0, -1.0, -1.0, -1.0],
               [0.0, 1.0, -1.0, -1.0],
               [0.0, 0.0, 1.0, -1.0],
               [0.0, 0.0, 0.0, 1.0]]),
     np.array([[2, 1, 3, 6],
               [1, 2, 2, 5],
               [3, 2, 6, 11],
               [6, 5, 11, 22]]),
     np.eye(4),
     2.5e-13),
    # SciPy's case 12: darex #9
    (np.array([[95.4070, 1.9643, 0.3597, 0.0673, 0.0190],
               [40.8490, 41.3170, 16.0840, 4.4679, 1.1971],
               [12.2170, 26.3260, 36.1490, 15.9300, 12.3830],
               [4.1118, 12.8580, 27.2090, 21.4420, 40.9760],
               [0.1305, 0.5808, 1.8750, 3.6162, 94.2800]]) * 0.01,
     np.array([[0.0434, -0.0122],
               [2.6606, -1.0453],
               [3.7530, -5.5100],
               [3.6076, -6.6000],
               [0.4617, -0.9148]]) * 0.01,
     np.eye(5),
     np.eye(2),
     1.5e-13),
    # SciPy's case 13: darex #10
    (np.kron(np.eye(2), np.diag([1, 1], k=1)),
     np.kron(np.eye(2), np.array([[0], [0], [1]])),
     np.array([[1, 1, 0, 0, 0, 0],
               [1, 1, 0, 0, 0, 0],
               [0, 0, 0, 0, 0, 0],
               [0, 0, 0, 1, -1, 0],
               [0, 0, 0, -1, 1, 0],
               [0, 0, 0, 0, 0, 0]]),
     np.array([[3, 0], [0, 1]]),
     1.5e-14),
    # SciPy's case 14: darex #11
    (0.001 * np.array(
     [[870.1, 135.0, 11.59, .5014, -37.22, .3484, 0, 4.242, 7.249],
      [76.55, 897.4, 12.72, 0.5504, -40.16, .3743, 0, 4.53, 7.499],
      [-127.2, 357.5, 817, 1.455, -102.8, .987, 0, 11.85, 18.72],
      [-363.5, 633.9, 74.91, 796.6, -273.5, 2.653, 0, 31.72, 48.82],
      [-960, 1645.9, -128.9, -5.597, 71.42, 7.108, 0, 84.52, 125.9],
      [-664.4, 112.96, -88.89, -3.854, 84.47, 13.6, 0, 144.3, 101.6],
      [-410.2, 693, -54.71, -2.371, 66.49, 12.49, .1063, 99.97, 69.67],
      [-179.9, 301.7, -23.93, -1.035, 60.59, 22.16, 0, 213.9, 35.54],
      [-345.1, 580.4, -45.96, -1.989, 105.6, 19.86, 0, 219.1, 215.2]]),
     np.array([[4.7600, -0.5701, -83.6800],
               [0.8790, -4.7730, -2.7300],
               [1.4820, -13.1200, 8.8760],
               [3.8920, -35.1300, 24.8000],
               [10.3400, -92.7500, 66.8000],
               [7.2030, -61.5900, 38.3400],
               [4.4540, -36.8300, 20.2900],
               [1.9710, -15.5400, 6.9370],
               [3.7730, -30.2800, 14.6900]]) * 0.001,
     np.diag([50, 0, 0, 0, 50, 0, 0, 0, 0]),
     np.eye(3),
     1.5e-12),
    # SciPy's case 15: darex #12 - numerically least accurate example
    (np.array([[0, 1e6], [0, 0]]),
     np.array([[0], [1]]),
     np.eye(2),
     np.array([[1]]),
     2e-2),
    # SciPy's case 16: darex #13
    (np.array([[16, 10, -2],
              [10, 13, -8],
              [-2, -8, 7]]) * (1/9),
     np.eye(3),
     1e6 * np.eye(3),
     1e6 * np.eye(3),
     2e-4),
    # SciPy's case 17: darex #14
    (np.array([[1 - 1/1e8, 0, 0, 0],
              [1, 0, 0, 0],
              [0, 1, 0, 0],
              [0, 0, 1, 0]]),
     np.array([[1e-08], [0], [0], [0]]),
     np.diag([0, 0, 0, 1]),
     np.array([[0.25]]),
     1.5e-6),
    # SciPy's case 18: darex #15
    (np.eye(100, k=1),
     np.flipud(np.eye(100, 1)),
     np.eye(100),
     np.array([[1]]),
     1.5e-10),
]
# fmt: on


def test_discrete_are_benchmark_examples():
    """SciPy's DARE test cases (DAREX), each within SciPy's tolerance for the residual, and
    symmetric, as PyTensor symmetrizes its solution."""
    a, b, q, r = (pt.matrix(name) for name in "abqr")
    fn = pytensor.function([a, b, q, r], solve_discrete_are(a, b, q, r), mode="ONNX")
    for j, (*case, tolerance) in enumerate(DAREX):
        case = [np.asarray(x, dtype="float64") for x in case]
        x = fn(*case)
        np.testing.assert_array_equal(x, x.T)
        assert _dare_residual(*case, x) <= tolerance, j


@pytest.mark.slow  # the gradient: two discrete Lyapunov equations
def test_batched_discrete_are_and_gradient(rng):
    """A batch of DAREs with B and R broadcast against it, and PyTensor's gradient of the
    solution (its pullback solves discrete Lyapunov equations in the closed loop)."""
    a, b, q = pt.tensor3("a"), pt.matrix("b"), pt.tensor3("q")
    r = pt.tensor("r", shape=(1, None, None))
    first, second = _dare_case(rng, 3, 2), _dare_case(rng, 3, 2)
    values = [
        np.stack([first[0], second[0]]),
        first[1],
        np.stack([first[2], second[2]]),
        first[3][None],
    ]
    compare_onnx_and_py([a, b, q, r], solve_discrete_are(a, b, q, r), values, rtol=1e-9, atol=1e-12)
    # Static sizes: the pullback's Lyapunov equations take the Kronecker form alone (of
    # symbolic size, each would also build the Schur form: 12 s to compile).
    shapes = [(3, 3), (3, 2), (3, 3), (2, 2)]
    a, b, q, r = (pt.tensor(name, shape=s) for name, s in zip("abqr", shapes, strict=True))
    x = solve_discrete_are(a, b, q, r)
    grads = pytensor.grad((x * x).sum(), [a, b, q, r])
    compare_onnx_and_py([a, b, q, r], grads, _dare_case(rng, 3, 2), rtol=1e-8, atol=1e-10)


def test_discrete_are_failures():
    """Where no stabilizing solution exists (A = I with no input; an indefinite R), or Q is
    not symmetric, the result is NaN, as PyTensor's; an empty system is empty. Where (A, Q)
    is not detectable the result is NaN too. R + B^T Q B singular (darex #3: R = 0, the input
    not reaching Q) raises: the doubling needs it."""
    a, b, q, r = (pt.matrix(name) for name in "abqr")
    out = solve_discrete_are(a, b, q, r)
    rng = np.random.default_rng(1)
    a0, b0 = rng.normal(size=(3, 3)), rng.normal(size=(3, 2))
    cases = [
        [np.eye(2), np.zeros((2, 1)), np.eye(2), np.eye(1)],
        [a0, b0, np.eye(3), -np.eye(2)],
        [a0, b0, np.eye(3) + np.triu(np.ones((3, 3)), 1), np.eye(2)],
    ]
    fn, x = compare_onnx_and_py([a, b, q, r], out, cases[0], more_inputs=cases[1:])
    assert np.isnan(x).all()
    (empty,) = fn(np.zeros((0, 0)), np.zeros((0, 1)), np.zeros((0, 0)), np.eye(1))
    assert empty.shape == (0, 0)
    # Q not seeing A's unstable mode: the doubling stays at X = 0, which is no stabilizing
    # solution, so NaN (PyTensor's QZ finds the stabilizing one).
    (undetectable,) = fn([[2.0, 1], [0, 0.5]], [[1.0], [1]], np.zeros((2, 2)), [[1.0]])
    assert np.isnan(undetectable).all()
    darex3 = [[[2.0, -1], [1, 0]], [[1.0], [0]], [[0.0, 0], [0, 1]], [[0.0]]]
    with pytest.raises(np.linalg.LinAlgError, match="R \\+ B\\^T Q B is singular"):
        fn(*(np.array(x) for x in darex3))


def _with_spectral_radius(rng, n, radius):
    """A random n x n matrix scaled to spectral radius `radius`."""
    a = rng.normal(size=(n, n))
    return a * (radius / np.abs(np.linalg.eigvals(a)).max())


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_discrete_lyapunov_by_doubling(dtype, rng):
    """solve_discrete_lyapunov (bilinear method) against PyTensor's own: Smith's doubling for
    spectral radii below 1, up to 1 - 1e-4 (a nearly nonstationary state-space model), and the
    bilinear method, under an If, where A's spectral radius is not below 1 (2 I: X = -Q / 3,
    and a triangular A); a batch with Q broadcast."""
    a, q = pt.matrix("a", dtype=dtype), pt.matrix("q", dtype=dtype)
    cases = []
    for n, radius in [(1, 0.5), (4, 0.9), (6, 0.9999), (3, 2.0)]:
        x = rng.normal(size=(n, n))
        cases.append([_with_spectral_radius(rng, n, radius).astype(dtype), (x @ x.T).astype(dtype)])
    cases.append([np.array([[1.5, 1], [0, -0.3]], dtype), np.eye(2, dtype=dtype)])
    tol = 1e-8 if dtype == "float64" else 1e-3
    compare_onnx_and_py(
        [a, q],
        solve_discrete_lyapunov(a, q),
        cases[0],
        more_inputs=cases[1:],
        rtol=tol,
        atol=tol,
    )
    # Static sizes: the bilinear branch builds the Kronecker form alone.
    batch = pt.tensor("batch", shape=(2, 4, 4), dtype=dtype)
    q = pt.tensor("q", shape=(4, 4), dtype=dtype)
    values = [np.stack([cases[1][0], cases[1][0] * 0.5]), cases[1][1]]
    compare_onnx_and_py([batch, q], solve_discrete_lyapunov(batch, q), values, rtol=tol, atol=tol)


def test_discrete_lyapunov_takes_the_doubling_where_it_converges(rng, tmp_path):
    """A stable A runs Smith's doubling alone: no LU pivot search (ArgMax) runs; an unstable
    one runs the bilinear method's LUs."""
    from pt_onnxscript import export_onnx
    from pt_onnxscript.testing import executed_nodes

    a, q = pt.tensor("a", shape=(12, 12)), pt.tensor("q", shape=(12, 12))
    model = export_onnx(([a, q], [solve_discrete_lyapunov(a, q)]))
    x = rng.normal(size=(12, 12))
    stable = {"a": _with_spectral_radius(rng, 12, 0.95), "q": x @ x.T}
    unstable = {"a": stable["a"] * 1.1 / 0.95, "q": x @ x.T}
    ops = [op for op, _ in executed_nodes(model, stable, tmp_path)]
    assert "ArgMax" not in ops and "MatMul" in ops
    assert "ArgMax" in [op for op, _ in executed_nodes(model, unstable, tmp_path)]
    fn = pytensor.function([a, q], solve_discrete_lyapunov(a, q), mode="ONNX")
    for values in (stable, unstable):
        expected = scipy.linalg.solve_discrete_lyapunov(values["a"], values["q"])
        np.testing.assert_allclose(
            fn(**values), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max()
        )
