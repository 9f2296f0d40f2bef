"""The real Schur decomposition against SciPy (LAPACK's dgees, through PyTensor's Python
linker).

The Schur form is unique only up to the signs of Z's columns and, for each complex pair, a
choice between two standard 2 x 2 blocks, which rounding can tip either way (as between two
LAPACK builds). So general matrices are compared through what both sides compute to rounding:
Z T Z^T - A, Z^T Z - I, T below its subdiagonal and T's diagonal (the eigenvalues' real
parts, in LAPACK's order: the QR iteration is dlahqr's); and the structure of T (standard 2 x
2 blocks) is checked on our outputs. Where the form is unique (2 x 2 matrices, triangular
ones), T and Z themselves are compared.
"""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.linalg

from pt_onnxscript.testing import compare_onnx_and_py

TOL = {"float64": 1e-12, "float32": 2e-5}
PYTENSOR_3 = int(pytensor.__version__.split(".")[0]) >= 3


def _checks(a, t, z, empty=True):
    """What both sides compute to rounding, relative to the matrices' size (their Frobenius
    norm; the largest entry, which does not overflow, unless the matrices may be `empty`):
    the residual, the orthogonality of Z, T below its subdiagonal, T's diagonal."""
    if empty:
        size = pt.sqrt(pt.sum(pt.sqr(a), axis=(-2, -1), keepdims=True))
    else:
        size = pt.max(pt.abs(a), axis=(-2, -1), keepdims=True)
    scale = pt.maximum(size, np.finfo(t.dtype).tiny)
    eye = pt.eye(a.shape[-1], dtype=t.dtype)
    return [
        (z @ t @ z.mT - a) / scale,
        z.mT @ z - eye,
        pt.tril(t, -2),
        pt.diagonal(t, axis1=-2, axis2=-1) / scale[..., 0],
    ]


def _assert_standard_form(t, tol):
    """T quasi-upper-triangular: no two consecutive nonzero subdiagonal entries, each 2 x 2
    block with equal diagonal entries and off-diagonal entries of opposite signs (LAPACK's
    standard form of a complex pair)."""
    n = t.shape[-1]
    assert np.all(np.tril(t, -2) == 0)
    sub = np.diagonal(t, -1)
    for k in np.flatnonzero(sub):
        assert k + 1 == n - 1 or sub[k + 1] == 0, f"consecutive subdiagonal entries at {k}"
        block = t[k : k + 2, k : k + 2]
        assert abs(block[0, 0] - block[1, 1]) <= tol * np.abs(t).max()
        assert np.sign(block[0, 1]) * np.sign(block[1, 0]) < 0


def _schur_fn(dtype="float64"):
    a = pt.matrix("a", dtype=dtype)
    return pytensor.function([a], pt.linalg.schur(a), mode="ONNX")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_schur_like_scipy(dtype, rng):
    a = pt.matrix("a", dtype=dtype)
    t, z = pt.linalg.schur(a)
    cases = [[rng.normal(size=(n, n)).astype(dtype)] for n in (0, 1, 3, 4, 7, 12, 25)]
    tol = TOL[dtype]
    compare_onnx_and_py(
        [a],
        _checks(a, t, z),
        cases[0],
        more_inputs=cases[1:],
        rtol=tol,
        atol=tol,
        signed_zeros=False,
    )
    fn = _schur_fn(dtype)
    for (value,) in cases:
        got_t, got_z = fn(value)
        assert got_t.dtype == got_z.dtype == dtype
        _assert_standard_form(got_t, 10 * np.finfo(dtype).eps)


def test_schur_of_two_by_two_and_triangular_matrices_is_scipys(rng, opset):
    """Unique forms: a 2 x 2 matrix is dlanv2's standard form directly (no QR sweep), a
    triangular one is its own Schur form with Z = I."""
    a = pt.matrix("a")
    cases = [
        [np.array([[1.0, 2.0], [-3.0, 4.0]])],  # complex pair
        [np.array([[1.0, 2.0], [3.0, 4.0]])],  # real pair, made upper triangular
        [np.array([[2.0, 5.0], [0.0, 2.0]])],  # already triangular
        [np.array([[1.5, 2.0], [-0.5, 1.5]])],  # a = d with b c < 0: already standard
        [rng.normal(size=(2, 2))],
        [np.triu(rng.normal(size=(6, 6)))],
        [np.diag([3.0, -1.0, 2.0])],
    ]
    compare_onnx_and_py(
        [a], list(pt.linalg.schur(a)), cases[0], more_inputs=cases[1:], opset=opset, atol=1e-15
    )


def test_schur_of_hard_matrices(rng):
    """Matrices the plain Francis iteration handles badly or that test the deflation: the
    cyclic permutation (unit-modulus eigenvalues, Francis' shifts stall: exceptional shifts),
    a singular, a defective (Jordan block), a graded and an ill-conditioned matrix, huge and
    tiny entries, a zero matrix, the companion matrix of a polynomial with a repeated root."""
    a = pt.matrix("a")
    t, z = pt.linalg.schur(a)
    checks = _checks(a, t, z, empty=False)
    u, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    v, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    ill = (u * np.logspace(0, -12, 6)) @ v.T
    singular = rng.normal(size=(6, 3)) @ rng.normal(size=(3, 6))
    jordan = np.eye(5) * 2.0 + np.eye(5, k=1)
    graded = rng.normal(size=(6, 6)) * np.logspace(0, -10, 6)[:, None] * np.logspace(0, 10, 6)
    companion = scipy.linalg.companion(np.poly([1.0, 1.0, 2.0, -3.0, 0.5]))
    cases = [
        np.roll(np.eye(n), 1, axis=0) for n in (3, 4, 8)
    ] + [ill, singular, jordan, graded, rng.normal(size=(5, 5)) * 1e200,
         rng.normal(size=(5, 5)) * 1e-150, np.zeros((4, 4)), companion]  # fmt: skip
    # b = 0 in a 2 x 2 matrix: dlanv2 swaps the eigenvalues (LAPACK's dgebal permutes it first).
    cases.append(np.array([[1.0, 0.0], [3.0, 4.0]]))
    inputs = [[c] for c in cases]
    compare_onnx_and_py(
        [a], checks, inputs[0], more_inputs=inputs[1:], atol=1e-12, signed_zeros=False
    )
    fn = _schur_fn()
    for value in cases:
        _assert_standard_form(fn(value)[0], 1e-14)


def test_schur_batched_static_and_empty(rng):
    a = pt.tensor3("a")
    t, z = pt.linalg.schur(a)
    batch = rng.normal(size=(3, 5, 5))
    batch[1] = np.roll(np.eye(5), 1, axis=0)  # needs more sweeps than its neighbours
    compare_onnx_and_py([a], _checks(a, t, z), [batch], atol=1e-12, signed_zeros=False)
    # (PyTensor's Python linker cannot run an empty batch: "vectorize with zero size".)
    empty = pytensor.function([a], pt.linalg.schur(a), mode="ONNX")(np.zeros((0, 4, 4)))
    assert [x.shape for x in empty] == [(0, 4, 4)] * 2
    compare_onnx_and_py([a], list(pt.linalg.schur(a)), [rng.normal(size=(4, 2, 2))], atol=1e-15)
    static = pt.tensor("s", shape=(2, 3, 4, 4))
    t, z = pt.linalg.schur(static)
    compare_onnx_and_py(
        [static], _checks(static, t, z), [rng.normal(size=(2, 3, 4, 4))], atol=1e-12
    )


@pytest.mark.skipif(not PYTENSOR_3, reason="PyTensor 2.38 keeps an integer input's dtype")
def test_schur_of_integers_is_float64(rng):
    a = pt.matrix("a", dtype="int64")
    value = rng.integers(-5, 5, size=(5, 5))
    t, z = pt.linalg.schur(a)
    compare_onnx_and_py([a], _checks(a, t, z), [value], atol=1e-12, signed_zeros=False)


def test_schur_of_non_finite_input_is_nan():
    """PyTensor's perform returns NaN matrices (SciPy's check_finite would raise)."""
    a = pt.matrix("a")
    cases = [[np.array([[1.0, np.nan], [0.0, 1.0]])], [np.array([[np.inf, 1.0], [2.0, 3.0]])]]
    compare_onnx_and_py([a], list(pt.linalg.schur(a)), cases[0], more_inputs=cases[1:])


def test_schur_that_does_not_converge_is_nan(rng, monkeypatch):
    """LAPACK's info > 0 (no convergence within its bound of sweeps): PyTensor's perform
    returns NaN matrices. With a bound of 0, the iteration stops after one sweep without a
    deflation: a matrix that needs none still converges."""
    from pt_onnxscript.ops import schur

    monkeypatch.setattr(schur, "SWEEPS_PER_EIGENVALUE", 0)
    fn = _schur_fn()
    assert all(np.isnan(x).all() for x in fn(rng.normal(size=(4, 4))))
    triangular = np.triu(rng.normal(size=(4, 4)))
    np.testing.assert_array_equal(fn(triangular)[0], triangular)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output": "complex"}, "no complex dtypes"),
        ({"sort": "lhp"}, "sort='lhp'.*trsen"),
    ],
)
def test_schur_options_without_translation_are_refused(kwargs, message):
    from pt_onnxscript import UnsupportedOpError, export_onnx

    a = pt.matrix("a")
    t, _ = pt.linalg.schur(a, **kwargs)
    with pytest.raises(UnsupportedOpError, match=message):
        export_onnx(([a], [pt.real(t)]))
