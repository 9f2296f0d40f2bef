import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

try:  # PyTensor 3
    from pytensor.tensor.linalg import tridiagonal_lu_factor, tridiagonal_lu_solve
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.tridiagonal import (
        tridiagonal_lu_factor,
        tridiagonal_lu_solve,
    )

from pt_onnxscript.testing import compare_onnx_and_py

RTOL = {"float64": 1e-12, "float32": 1e-5}


def tridiagonal(rng, n, batch=(), swaps=True):
    """A tridiagonal matrix; with `swaps`, a subdiagonal large enough that gttrf swaps rows at
    most steps, and a zero on the diagonal that forces a swap."""
    scale = 3.0 if swaps else 0.1
    a = np.zeros((*batch, n, n))
    rows = np.arange(n)
    a[..., rows, rows] = rng.normal(size=(*batch, n)) + (0 if swaps else 4)
    a[..., rows[1:], rows[:-1]] = rng.normal(size=(*batch, max(n - 1, 0))) * scale
    a[..., rows[:-1], rows[1:]] = rng.normal(size=(*batch, max(n - 1, 0)))
    if swaps and n > 3:
        a[..., 1, 1] = 0.0
    return a


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("swaps", [True, False])
def test_factor_and_solves_like_lapack(dtype, swaps, rng):
    """gttrf's five outputs (1-based int32 pivots included) and gttrs with one and several
    right-hand sides, plain and transposed, as PyTensor's SciPy calls give them (SciPy's
    wrappers reject n < 3)."""
    a = pt.matrix("a", dtype=dtype)
    b = pt.vector("b", dtype=dtype)
    many = pt.matrix("B", dtype=dtype)
    factors = tridiagonal_lu_factor(a)
    outs = [
        *factors,
        tridiagonal_lu_solve(factors, b, b_ndim=1),
        tridiagonal_lu_solve(factors, b, b_ndim=1, transposed=True),
        tridiagonal_lu_solve(factors, many, b_ndim=2),
        tridiagonal_lu_solve(factors, many, b_ndim=2, transposed=True),
    ]
    cases = [
        [tridiagonal(rng, n, swaps=swaps).astype(dtype), *(rng.normal(size=s) for s in (n, (n, 2)))]
        for n in (3, 4, 9, 40)
    ]
    cases = [[value.astype(dtype) for value in case] for case in cases]
    _, got = compare_onnx_and_py(
        [a, b, many], outs, cases[0], more_inputs=cases[1:], rtol=RTOL[dtype], atol=RTOL[dtype]
    )
    assert got[4].dtype == np.int32


def test_batched_factor_and_solve(rng):
    """Blockwise versions: a batch of matrices, right-hand sides broadcast against it."""
    a = pt.tensor3("a")
    b = pt.matrix("b")
    many = pt.tensor("B", shape=(1, None, None))  # broadcast against the batch
    factors = tridiagonal_lu_factor(a)
    outs = [
        *factors,
        tridiagonal_lu_solve(factors, b, b_ndim=1),
        tridiagonal_lu_solve(factors, many, b_ndim=2, transposed=True),
    ]
    value = tridiagonal(rng, 6, (3,))
    compare_onnx_and_py(
        [a, b, many],
        outs,
        [value, rng.normal(size=(3, 6)), rng.normal(size=(1, 6, 2))],
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7])
def test_tridiagonal_solve_and_its_gradient(n, rng):
    """solve(assume_a="tridiagonal") with its gradient, which PyTensor rewrites into one
    gttrf and two gttrs (the second transposed): the values of NumPy's dense solve, the
    gradients of PyTensor's own (dense) graph, for sizes SciPy's wrappers refuse too."""
    a = pt.matrix("a")
    b = pt.vector("b")
    x = pt.linalg.solve(a, b, assume_a="tridiagonal")
    grads = pytensor.grad((x**2).sum(), [a, b])
    fn = pytensor.function([a, b], [x, *grads], mode="ONNX")
    value, rhs = tridiagonal(rng, n), rng.normal(size=n)
    if n:
        value[np.arange(n), np.arange(n)] += 5.0  # well conditioned
    got = fn(value, rhs)
    expected_x = np.linalg.solve(value, rhs) if n else np.zeros(0)
    np.testing.assert_allclose(got[0], expected_x, rtol=1e-12, atol=1e-12)
    # d loss / d b = A^-T (2 x); d loss / d A = -(A^-T 2 x) x^T on the band.
    grad_b = np.linalg.solve(value.T, 2 * expected_x) if n else np.zeros(0)
    np.testing.assert_allclose(got[2], grad_b, rtol=1e-12, atol=1e-12)
    band = np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1
    grad_a = -np.outer(grad_b, expected_x)
    np.testing.assert_allclose(got[1][band], grad_a[band], rtol=1e-11, atol=1e-12)


def test_no_runtime_warning_when_a_loop_runs_no_step(capfd, rng):
    # gttrf's and gttrs' Loops run n - 1 steps (and the optimiser's unrolled copies fewer):
    # none at n = 0, 1 and 2. ONNX Runtime with its default logging printed "Loop had zero
    # iterations and the shape of subgraph output ... was not found" at every such call
    # until Loops' outputs carried their ranks to the bodies of the Loops that read them.
    import onnxruntime as ort

    from pt_onnxscript import export_onnx

    a, b = pt.matrix("a"), pt.vector("b")
    x = pt.linalg.solve(a, b, assume_a="tridiagonal")
    model = export_onnx(([a, b], [x, pytensor.grad((x**2).sum(), a)]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    capfd.readouterr()
    for n in (0, 1, 2, 3):
        value, rhs = tridiagonal(rng, n, swaps=False), rng.normal(size=n)
        got = session.run(None, {"a": value, "b": rhs})[0]
        np.testing.assert_allclose(got, np.linalg.solve(value, rhs) if n else rhs, rtol=1e-12)
    assert "zero iterations" not in capfd.readouterr().err
