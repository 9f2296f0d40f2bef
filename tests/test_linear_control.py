import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg

from pt_onnxscript.testing import compare_onnx_and_py

try:  # PyTensor 3
    from pytensor.tensor.linalg import (
        solve_continuous_lyapunov,
        solve_discrete_lyapunov,
        solve_sylvester,
    )
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.linear_control import solve_sylvester
    from pytensor.tensor.slinalg import solve_continuous_lyapunov, solve_discrete_lyapunov


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
