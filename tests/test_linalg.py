import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytensor.tensor.linalg import cho_solve, solve_triangular

from pt_onnxscript.testing import compare_onnx_and_py

RTOL = {"float64": 1e-10, "float32": 2e-4}


def spd(rng, n, batch=()):
    m = rng.normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 17])
def test_decompositions_and_solves(dtype, n, rng):
    a = pt.matrix("a", dtype=dtype)
    b = pt.vector("b", dtype=dtype)
    B = pt.matrix("B", dtype=dtype)
    outs = [
        pt.linalg.cholesky(a),
        pt.linalg.cholesky(a, lower=False),
        solve_triangular(pt.linalg.cholesky(a), b, lower=True),
        solve_triangular(pt.linalg.cholesky(a).T, B, lower=False),
        solve_triangular(a, b, lower=True, unit_diagonal=True),
        pt.linalg.solve(a, b),
        pt.linalg.solve(a, B, assume_a="pos"),
        cho_solve((pt.linalg.cholesky(a), True), B),
    ]
    if n:
        outs += [pt.linalg.inv(a), pt.linalg.det(a), *pt.linalg.slogdet(a)]
    values = [spd(rng, n).astype(dtype), rng.normal(size=n).astype(dtype), rng.normal(size=(n, 3)).astype(dtype)]
    compare_onnx_and_py([a, b, B], outs, values, rtol=RTOL[dtype], atol=RTOL[dtype])


def test_general_matrices_need_pivoting(rng):
    a = pt.matrix("a")
    b = pt.vector("b")
    value = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, -1.0, 2.0]])
    outs = [pt.linalg.solve(a, b), pt.linalg.inv(a), pt.linalg.det(a), *pt.linalg.slogdet(a)]
    compare_onnx_and_py([a, b], outs, [value, rng.normal(size=3)], rtol=1e-12)
    compare_onnx_and_py([a, b], outs, [-value, rng.normal(size=3)], rtol=1e-12)


def test_failures_like_lapack():
    a = pt.matrix("a")
    b = pt.vector("b")
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    compare_onnx_and_py([a], [pt.linalg.cholesky(a)], [not_pd])
    # (PyTensor's own Solve returns NaNs shaped like `a` here, against its output type.)
    solve = pytensor.function([a, b], pt.linalg.solve(a, b, assume_a="pos"), mode="ONNX")
    assert np.isnan(solve(not_pd, np.ones(2))).all() and solve(not_pd, np.ones(2)).shape == (2,)
    compare_onnx_and_py([a], [pt.linalg.det(a), *pt.linalg.slogdet(a)], [singular])
    fn = pytensor.function([a], pt.linalg.inv(a), mode="ONNX")
    with pytest.raises(Exception, match="out of data bounds"):
        fn(singular)


def test_batched_blockwise(rng):
    a = pt.tensor3("a")
    b = pt.matrix("b")
    outs = [pt.linalg.cholesky(a), pt.linalg.solve(a, b[..., None], b_ndim=2), pt.linalg.det(a), pt.linalg.inv(a)]
    compare_onnx_and_py([a, b], outs, [spd(rng, 4, (3,)), rng.normal(size=(3, 4))], rtol=1e-10, atol=1e-12)


def test_gradients_of_gp_style_logp(rng):
    x = pt.vector("x")
    ls = pt.scalar("ls")
    y = pt.vector("y")
    k = pt.exp(-0.5 * ((x[:, None] - x[None, :]) / ls) ** 2) + 0.1 * pt.eye(x.shape[0])
    chol = pt.linalg.cholesky(k)
    alpha = solve_triangular(chol, y, lower=True)
    logp = -0.5 * (alpha**2).sum() - pt.log(pt.diagonal(chol)).sum()
    grads = pytensor.grad(logp, [ls, y])
    values = [np.linspace(0, 3, 6), np.array(0.8), rng.normal(size=6)]
    compare_onnx_and_py([x, ls, y], [logp, *grads, pytensor.grad(pt.linalg.slogdet(k)[1], ls)], values, rtol=1e-10, atol=1e-12)


def test_kron_and_einsum(rng):
    a = pt.matrix("a")
    b = pt.matrix("b")
    outs = [pt.linalg.kron(a, b), pt.einsum("ij,jk->ik", a, b.T), pt.einsum("ij,ij->i", a, a)]
    compare_onnx_and_py([a, b], outs, [rng.normal(size=(2, 3)), rng.normal(size=(4, 3))])


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 9), seed=st.integers(0, 1000))
def test_random_sizes(n, seed):
    rng = np.random.default_rng(seed)
    a = pt.matrix("a")
    b = pt.vector("b")
    outs = [pt.linalg.cholesky(a), pt.linalg.solve(a, b), *pt.linalg.slogdet(a)]
    compare_onnx_and_py([a, b], outs, [spd(rng, n), rng.normal(size=n)], rtol=1e-10, atol=1e-12)
