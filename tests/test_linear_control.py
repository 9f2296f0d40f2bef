import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

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


@pytest.mark.slow  # gradients through a batch of Kronecker systems
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


def test_singular_and_too_large_systems():
    """A and -B sharing an eigenvalue: NaN (LAPACK's trsyl perturbs the system instead). A
    system too large for the Kronecker form: refused at export when static, raised when the
    model runs when symbolic."""
    from pt_onnxscript import UnsupportedOpError, export_onnx

    a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c")
    fn = pytensor.function([a, b, c], solve_sylvester(a, b, c), mode="ONNX")
    assert np.isnan(fn(np.eye(2), -np.eye(2), np.ones((2, 2)))).all()
    with pytest.raises(ValueError, match="too large for the Kronecker form"):
        fn(np.eye(70), np.eye(70), np.ones((70, 70)))
    big = pt.tensor("big", shape=(70, 70))
    with pytest.raises(UnsupportedOpError, match="4900 x 4900 matrix"):
        export_onnx(([big], [solve_continuous_lyapunov(big, big)]))
