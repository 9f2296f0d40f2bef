"""expm, QR, eigh/eigvalsh, SVD and pinv against SciPy/NumPy (through PyTensor's Python linker).

Eigenvectors and singular vectors are unique only up to sign (and to a rotation within a
repeated eigen/singular value's space), so they are compared through invariants: the
residual a v - v w, v^T v - I, u diag(s) v^T - a, which both sides compute (to rounding).
"""

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest

from pt_onnxscript.testing import _all_nodes, compare_onnx_and_py, executed_nodes

RTOL = {"float64": 1e-11, "float32": 5e-4}
PYTENSOR_3 = int(pytensor.__version__.split(".")[0]) >= 3


def _ill_conditioned(rng, n, cond):
    """A non-symmetric n x n matrix with singular values from 1 down to 1/cond."""
    u, _ = np.linalg.qr(rng.normal(size=(n, n)))
    v, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (u * np.logspace(0, -np.log10(cond), n)) @ v.T


# expm


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_expm_like_scipy(dtype, rng):
    a = pt.matrix("a", dtype=dtype)
    cases = [
        [(rng.normal(size=(n, n)) * scale / max(n, 1) ** 0.5).astype(dtype)]
        for n in (0, 1, 2, 5, 17)
        # (float32 entries that cancel lose ~eps32 * norm: smaller norms there)
        for scale in (1e-3, 1.0, 30.0 if dtype == "float64" else 5.0)
    ]
    compare_onnx_and_py(
        [a], [pt.linalg.expm(a)], cases[0], more_inputs=cases[1:], rtol=RTOL[dtype], atol=0
    )


def test_expm_of_special_matrices_and_batches(rng):
    a = pt.tensor3("a")
    nilpotent = np.triu(rng.normal(size=(4, 4)), 1)
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]]) * np.pi
    batch = np.stack(
        [nilpotent, np.eye(4) * -700.0, np.zeros((4, 4)), _ill_conditioned(rng, 4, 1e8)]
    )
    compare_onnx_and_py([a], [pt.linalg.expm(a)], [batch], rtol=1e-11, atol=1e-300)
    compare_onnx_and_py([a], [pt.linalg.expm(a)], [rotation[None]], rtol=1e-11, atol=1e-15)
    # A batch whose matrices need different numbers of squarings, one with none.
    mixed = np.stack([rng.normal(size=(3, 3)) * s for s in (1e-4, 2.0, 300.0)])
    compare_onnx_and_py([a], [pt.linalg.expm(a)], [mixed], rtol=1e-10)


def test_expm_of_nan_is_nan():
    a = pt.matrix("a")
    fn = pytensor.function([a], pt.linalg.expm(a), mode="ONNX")
    assert np.isnan(fn(np.array([[np.nan, 0.0], [0.0, 1.0]]))).any()


@pytest.mark.skipif(not PYTENSOR_3, reason="PyTensor 2.38's expm gradient goes through Eig")
def test_expm_gradient(rng):
    a = pt.matrix("a")
    cost = (pt.linalg.expm(a) * pt.constant(rng.normal(size=(3, 3)))).sum()
    compare_onnx_and_py([a], [pytensor.grad(cost, a)], [rng.normal(size=(3, 3))], rtol=1e-9)


# QR


def _qr_outputs(a, mode):
    out = pt.linalg.qr(a, mode=mode)
    return list(out) if isinstance(out, list | tuple) else [out]


@pytest.mark.parametrize("mode", ["full", "economic", "r", "raw"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_qr_like_scipy(mode, dtype, rng):
    a = pt.matrix("a", dtype=dtype)
    # Past 16 columns, several panels (QR_BLOCK): 40 x 23 and 23 x 40 end in a partial one.
    shapes = [(0, 0), (1, 1), (4, 4), (6, 3), (3, 6), (5, 0), (40, 23), (23, 40), (33, 33)]
    cases = [[rng.normal(size=shape).astype(dtype)] for shape in shapes]
    tol = RTOL[dtype]
    compare_onnx_and_py(
        [a], _qr_outputs(a, mode), cases[0], more_inputs=cases[1:], rtol=tol, atol=tol
    )


@pytest.mark.parametrize("mode", ["full", "economic", "raw"])
def test_qr_of_zero_columns(mode, rng):
    a = pt.matrix("a")
    zero_column = rng.normal(size=(6, 4))
    zero_column[:, 2] = 0.0  # geqrf's identity reflector (tau = 0)
    outs = _qr_outputs(a, mode)
    # The signs of R's zeros are how LAPACK's reflector updates round (0 - 0 * w): not compared.
    close = {"rtol": 1e-10, "atol": 1e-12, "signed_zeros": False}
    compare_onnx_and_py([a], outs, [zero_column], **close)
    compare_onnx_and_py([a], outs, [-np.eye(3)], **close)
    # Identity reflectors in a later panel, and a triangular matrix (all of them).
    wide = rng.normal(size=(30, 40))
    wide[:, [17, 20]] = 0.0
    wide[25:, 22] = 0.0
    compare_onnx_and_py([a], outs, [wide], **close)
    compare_onnx_and_py([a], outs, [np.triu(rng.normal(size=(35, 35)))], **close)


def test_qr_of_rank_deficient_and_ill_conditioned_matrices(rng):
    # Q's columns move by ~eps cond(A) (past a dependent column, the reflectors act on
    # rounding noise): any orthonormal Q with Q R = A is right, so compare Q R - A and Q^T Q.
    a = pt.matrix("a")
    q, r = pt.linalg.qr(a)
    deficient = rng.normal(size=(6, 4))
    deficient[:, 3] = 2 * deficient[:, 1]
    outs = [q @ r - a, q.T @ q, pt.abs(pt.diag(r))[:3]]
    compare_onnx_and_py([a], outs, [deficient], rtol=1e-10, atol=1e-12)
    compare_onnx_and_py([a], outs, [_ill_conditioned(rng, 6, 1e12)], rtol=1e-10, atol=1e-12)


def test_qr_batched_with_symbolic_shapes(rng):
    a = pt.tensor3("a")
    q, r = pt.linalg.qr(a, mode="economic")
    value = rng.normal(size=(3, 5, 4))
    more = [[rng.normal(size=(2, 40, 21))], [rng.normal(size=(2, 21, 40))]]
    compare_onnx_and_py([a], [q, r], [value], more_inputs=more, rtol=1e-10, atol=1e-12)


def test_qr_updates_the_matrix_by_panels(rng, tmp_path):
    """geqrf's blocking: a column's reflector is applied to its panel only, the rest of the
    matrix takes a panel's reflectors at once (MatMuls), so fewer nodes than columns ever
    read the whole matrix."""
    from pt_onnxscript import export_onnx

    a = pt.matrix("a")
    value = rng.normal(size=(50, 30))
    compare_onnx_and_py([a], list(pt.linalg.qr(a)), [value], rtol=1e-10, atol=1e-12)
    executed = executed_nodes(export_onnx(([a], list(pt.linalg.qr(a)))), {"a": value}, tmp_path)
    whole = [op for op, shapes in executed if any(s[-2:] in ([50, 30], [50, 32]) for s in shapes)]
    assert len(whole) < 30, whole


def test_qr_of_no_rows_like_numpy():
    # LAPACK (so PyTensor's perform) rejects m = 0 < n; NumPy's answer is Q (0, 0), R (0, n).
    a = pt.matrix("a")
    fn = pytensor.function([a], _qr_outputs(a, "full"), mode="ONNX")
    q, r = fn(np.zeros((0, 3)))
    assert q.shape == (0, 0) and r.shape == (0, 3)


def test_qr_with_pivoting_is_refused():
    from pt_onnxscript import UnsupportedOpError, export_onnx

    a = pt.matrix("a")
    with pytest.raises(UnsupportedOpError, match="pivoting"):
        export_onnx(([a], list(pt.linalg.qr(a, pivoting=True))))


def test_qr_gradient(rng):
    # Static shapes: PyTensor's QR gradient with symbolic ones fails (it calls the ifelse
    # module: TypeError).
    a = pt.tensor("a", shape=(5, 3))
    q, r = pt.linalg.qr(a, mode="economic")
    weights = [pt.constant(rng.normal(size=(5, 3))), pt.constant(rng.normal(size=(3, 3)))]
    cost = (q * weights[0]).sum() + (r * weights[1]).sum()
    compare_onnx_and_py([a], [pytensor.grad(cost, a)], [rng.normal(size=(5, 3))], rtol=1e-9)


# eigh and eigvalsh


def _eigvalsh(a):
    if PYTENSOR_3:
        return pt.linalg.eigvalsh(a)
    from pytensor.tensor.type_other import NoneConst

    return pt.linalg.eigvalsh(a, NoneConst)


def _eigh(a):
    """eigh of the matrices `a`, batched on PyTensor 2.38 too (its eigh takes a matrix)."""
    if PYTENSOR_3 or a.ndim == 2:
        return pt.linalg.eigh(a)
    from pytensor.tensor.blockwise import Blockwise
    from pytensor.tensor.nlinalg import Eigh

    return Blockwise(Eigh("L"), signature="(m,m)->(m),(m,m)")(a)


def _eigen_checks(a, w, v):
    """w, the residual a v - v diag(w) relative to max |a|, and v^T v: what any correct eigh
    gives (to rounding)."""
    sym = pt.tril(a) + pt.tril(a, -1).mT
    scale = pt.maximum(pt.sqrt((a**2).sum(axis=(-2, -1), keepdims=True)), 1e-300)
    return [w, (sym @ v - v * w[..., None, :]) / scale, v.mT @ v]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_eigh_and_eigvalsh(dtype, rng):
    a = pt.matrix("a", dtype=dtype)
    w, v = pt.linalg.eigh(a)
    # Not symmetric: eigh reads the lower triangle only.
    cases = [[rng.normal(size=(n, n)).astype(dtype)] for n in (0, 1, 2, 3, 6, 11)]
    tol = {"float64": 1e-11, "float32": 1e-4}[dtype]
    outs = [*_eigen_checks(a, w, v), _eigvalsh(a)]
    compare_onnx_and_py([a], outs, cases[0], more_inputs=cases[1:], rtol=tol, atol=tol * 11)


def _wilkinson(n):
    """Wilkinson's W_n^+: pairs of eigenvalues equal to many digits."""
    m = (n - 1) // 2
    return np.diag(np.abs(np.arange(-m, m + 1.0))) + np.eye(n, k=1) + np.eye(n, k=-1)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_eigvalsh_like_scipy(dtype, rng):
    # Householder tridiagonalization and multisection: sizes around its blocks of rows,
    # clusters, a zero matrix, diagonal entries of -0.0 (a Sturm count at x = +0.0 must not
    # count a q of -0.0 as not negative; the symmetrized matrix has +0.0 there already),
    # scales that would overflow or underflow when squared.
    a = pt.matrix("a", dtype=dtype)
    u, _ = np.linalg.qr(rng.normal(size=(9, 9)))
    repeated = (u * np.array([1.0, 1.0, 1.0, -2.0, -2.0, 5.0, 5.0, 5.0, 5.0])) @ u.T
    cases = [rng.normal(size=(n, n)) for n in (0, 1, 2, 3, 4, 5, 8, 9, 17, 40)]
    cases += [
        repeated,
        _wilkinson(21),
        np.eye(6),
        np.zeros((4, 4)),
        np.array([[-0.0, 1.0], [1.0, 0.0]]),
        np.array([[-0.0, 1.0, 0.0], [1.0, -0.0, 0.0], [0.0, 0.0, -0.0]]),
        rng.normal(size=(7, 7)) * 1e200 if dtype == "float64" else rng.normal(size=(7, 7)) * 1e30,
    ]
    values = [[c.astype(dtype)] for c in cases]
    norm = {"float64": 1e-12, "float32": 3e-5}[dtype]
    # (The sign of a zero eigenvalue is LAPACK's choice: -0.0 for a -0.0 it never touched.)
    compare_onnx_and_py(
        [a],
        _eigvalsh(a),
        values[0],
        more_inputs=values[1:],
        rtol=norm,
        atol=norm * 20,
        signed_zeros=False,
    )
    # Relative to these norms, and exact zeros for a zero matrix.
    tiny = (rng.normal(size=(7, 7)) * (1e-200 if dtype == "float64" else 1e-30)).astype(dtype)
    zeros = np.zeros((3, 3), dtype)
    compare_onnx_and_py([a], _eigvalsh(a), [tiny], more_inputs=[[zeros]], rtol=norm, atol=0)


def test_eigvalsh_keeps_small_eigenvalues_relative_digits(rng):
    # LAPACK's eigvalsh (dsyevr) gives the small eigenvalues of a diagonal or graded
    # matrix to full relative accuracy; so must a bisection that stops relative to them.
    a = pt.matrix("a")
    graded = np.diag(np.logspace(0, -14, 7))
    scaled = np.diag(np.logspace(-3, 3, 6))  # a scaled tridiagonal: graded off-diagonal too
    scaled = scaled @ (np.eye(6) * 2 + np.eye(6, k=1) * 0.5 + np.eye(6, k=-1) * 0.5) @ scaled
    compare_onnx_and_py([a], _eigvalsh(a), [graded], more_inputs=[[scaled]], rtol=1e-13, atol=0)


@pytest.mark.parametrize("n", [3, 6, 11])
def test_eigvalsh_static_size_and_batched(n, rng):
    # A static size picks fewer Sturm rows per Loop step below ROWS; batches run at once
    # (PyTensor 2.38's Eigvalsh takes a matrix).
    values = rng.normal(size=(4, n, n))
    values[1] = np.diag(np.arange(n, 0, -1.0))
    values[2] = 0.0
    a = pt.matrix("a", shape=(n, n))
    compare_onnx_and_py(
        [a],
        _eigvalsh(a),
        [values[0]],
        more_inputs=[[v] for v in values[1:]],
        rtol=1e-12,
        atol=1e-12,
    )
    if PYTENSOR_3:
        batch = pt.tensor3("batch", shape=(None, n, n))
        w = pt.vectorize(pt.linalg.eigvalsh, "(m,m)->(m)")(batch)
        compare_onnx_and_py([batch], w, [values], rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not PYTENSOR_3, reason="PyTensor 2.38's Eigvalsh takes a matrix")
@pytest.mark.parametrize("n", [3, 30])
@pytest.mark.parametrize("static", [True, False], ids=["static", "symbolic"])
def test_eigvalsh_and_eigh_of_empty_batches(n, static):
    """A batch of no matrices: the Sturm recurrence's Reshape by (rows, batch..., 1, 1) read
    a 0 batch dim as "keep the input's dim" (ONNX's default) and failed; eigh above 24 runs
    the same recurrence."""
    size = n if static else None
    for shape in [(0, n, n), (2, 0, n, n), (0, 2, n, n)]:
        batch = pt.tensor("batch", shape=(None,) * (len(shape) - 2) + (size, size))
        w, v = pt.linalg.eigh(batch)
        fn = pytensor.function([batch], [pt.linalg.eigvalsh(batch, None), w, v], mode="ONNX")
        values, w, v = fn(np.zeros(shape))
        assert values.shape == w.shape == shape[:-1] and v.shape == shape


def test_eigh_upper_triangle_and_repeated_eigenvalues(rng):
    a = pt.matrix("a")
    w, v = pt.linalg.eigh(a, lower=False) if PYTENSOR_3 else pt.linalg.eigh(a, UPLO="U")
    sym = pt.triu(a) + pt.triu(a, 1).mT
    outs = [w, sym @ v - v * w[None, :], v.T @ v]
    u, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    repeated = (u * np.array([1.0, 1.0, 1.0, -2.0, -2.0, 5.0])) @ u.T
    for value in [np.triu(rng.normal(size=(5, 5))), repeated, np.eye(4), np.zeros((3, 3))]:
        compare_onnx_and_py([a], outs, [value], rtol=1e-11, atol=1e-11)


def test_eigh_batched_and_ill_conditioned(rng):
    a = pt.tensor3("a")
    w, v = _eigh(a)
    m = _ill_conditioned(rng, 7, 1e12)
    batch = np.stack([m + m.T, np.diag(np.logspace(0, -14, 7)), rng.normal(size=(7, 7)) * 1e6])
    compare_onnx_and_py([a], _eigen_checks(a, w, v), [batch], rtol=1e-9, atol=1e-8)


def _glued_wilkinson(copies, glue):
    """Copies of W_21^+ on the diagonal, coupled by `glue`: clusters of eigenvalues equal to
    ~glue (the classic trap for inverse iteration without reorthogonalization)."""
    glued = np.kron(np.eye(copies), _wilkinson(21))
    for i in range(1, copies):
        glued[21 * i - 1, 21 * i] = glued[21 * i, 21 * i - 1] = glue
    return glued


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_eigh_by_inverse_iteration(dtype, rng):
    # Above JACOBI_LARGEST, eigh's vectors come from inverse iteration on the tridiagonal
    # form (shifts apart by dstein's rule, one QR after the last solve): eigenvalues equal to
    # a few ulps, exactly repeated ones (the identity, a zero matrix, rank-deficient
    # matrices), glued Wilkinson matrices, a graded spectrum.
    a = pt.matrix("a", dtype=dtype)
    w, v = pt.linalg.eigh(a)
    u, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    clustered = np.r_[np.ones(10) + 1e-14 * np.arange(10), 2 + 1e-15 * rng.normal(size=10)]
    clustered = np.r_[clustered, np.linspace(3, 4, 20)]
    low_rank = rng.normal(size=(30, 3))
    cases = [rng.normal(size=(n, n)) for n in (25, 40)]
    cases += [
        (u * clustered) @ u.T,
        (u * np.logspace(-12, 0, 40)) @ u.T,
        _glued_wilkinson(3, 1e-14),
        _glued_wilkinson(2, 1e-6),
        np.eye(30),
        np.zeros((30, 30)),
        low_rank @ low_rank.T,
    ]
    values = [[c.astype(dtype)] for c in cases]
    tol = {"float64": 1e-11, "float32": 1e-4}[dtype]
    outs = [*_eigen_checks(a, w, v), _eigvalsh(a)]
    compare_onnx_and_py([a], outs, values[0], more_inputs=values[1:], rtol=tol, atol=tol * 11)


@pytest.mark.parametrize("n", [24, 30])
def test_eigh_chooses_jacobi_up_to_its_size(n, rng):
    # A static size chooses at export: Jacobi's sweeps up to JACOBI_LARGEST (24), inverse
    # iteration above; batched, and through pinv(hermitian=True).
    import onnx

    from pt_onnxscript import export_onnx

    a = pt.matrix("a", shape=(n, n))
    model = export_onnx(([a], list(pt.linalg.eigh(a))))
    graphs = [
        attribute.g.name
        for node in _all_nodes(model.graph)
        for attribute in node.attribute
        if attribute.type == onnx.AttributeProto.GRAPH
    ]
    assert any(name.startswith("jacobi") for name in graphs) == (n <= 24), graphs
    batch = pt.tensor3("batch", shape=(3, n, n))
    w, v = _eigh(batch)
    values = rng.normal(size=(3, n, n))
    values[1] = values[1] @ values[1].transpose() * 1e-8
    compare_onnx_and_py([batch], _eigen_checks(batch, w, v), [values], rtol=1e-11, atol=1e-11)
    hermitian = pt.linalg.pinv(a, hermitian=True)
    compare_onnx_and_py([a], hermitian, [values[1] * 1e8], rtol=1e-8, atol=1e-10)


def test_generalized_eigenproblem(rng):
    a, b = pt.matrix("a"), pt.matrix("b")
    values = []
    for n in (5, 30):  # Jacobi's sweeps, inverse iteration
        m = rng.normal(size=(n, n))
        values.append([rng.normal(size=(n, n)), m @ m.T + n * np.eye(n)])
    value_a, value_b = values[0]
    w = pt.linalg.eigvalsh(a, b)
    outs = [w]
    if PYTENSOR_3:
        w2, v = pt.linalg.eigh(a, b)
        sym_a = pt.tril(a) + pt.tril(a, -1).T
        sym_b = pt.tril(b) + pt.tril(b, -1).T
        outs += [w2, sym_a @ v - (sym_b @ v) * w2[None, :], v.T @ sym_b @ v]
    compare_onnx_and_py([a, b], outs, values[0], more_inputs=values[1:], rtol=1e-10, atol=1e-10)
    fn = pytensor.function([a, b], w, mode="ONNX")
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        fn(value_a, -value_b)


def test_non_finite_input_raises_like_scipy_and_numpy():
    a = pt.matrix("a")
    nan = np.array([[1.0, np.nan], [np.nan, 2.0]])
    inf = np.array([[np.inf, 0.0], [0.0, 1.0]])
    eigh = pytensor.function([a], pt.linalg.eigh(a), mode="ONNX")
    values = pytensor.function([a], _eigvalsh(a), mode="ONNX")
    for fn in (eigh, values):
        for value in (nan, inf):
            with pytest.raises(ValueError, match="must not contain infs or NaNs"):
                fn(value)
    for fn in (
        pytensor.function([a], pt.linalg.svd(a), mode="ONNX"),
        pytensor.function([a], pt.linalg.svd(a, compute_uv=False), mode="ONNX"),
        pytensor.function([a], pt.linalg.pinv(a), mode="ONNX"),
    ):
        with pytest.raises(np.linalg.LinAlgError, match="SVD did not converge"):
            fn(nan)
    # NumPy's eigh-based pinv gives NaN; so does the hermitian pinv here.
    hermitian = pytensor.function([a], pt.linalg.pinv(a, hermitian=True), mode="ONNX")
    assert np.isnan(hermitian(nan)).all()
    # SciPy checks the triangle eigh does not read too.
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):
        values(np.array([[1.0, np.nan], [0.5, 2.0]]))


def test_eigh_gradients(rng):
    # (PyTensor 2.38's are its EighGrad Op; PyTensor 3's are graphs of other Ops.)
    a = pt.matrix("a")
    w, v = pt.linalg.eigh(a)
    # Sign-invariant functions of the eigenvectors: v v^T weighted.
    projector = v[:, 1:2] @ v[:, 1:2].T
    costs = [
        (w * pt.constant(rng.normal(size=4))).sum(),
        (projector * pt.constant(rng.normal(size=(4, 4)))).sum(),
    ]
    m = rng.normal(size=(4, 4))
    grads = [pytensor.grad(cost, a) for cost in costs]
    compare_onnx_and_py([a], grads, [m], rtol=1e-8, atol=1e-10)


def test_generalized_eigenvalue_gradients(rng):
    a, b = pt.matrix("a"), pt.matrix("b")
    w = pt.linalg.eigvalsh(a, b)
    cost = (w * pt.constant(rng.normal(size=4))).sum()
    m = rng.normal(size=(4, 4))
    values = [rng.normal(size=(4, 4)), m @ m.T + 4 * np.eye(4)]
    grads = pytensor.grad(cost, [a, b])
    compare_onnx_and_py([a, b], grads, values, rtol=1e-8, atol=1e-10)


# SVD and pinv


def _svd_checks(a, full):
    u, s, vt = pt.linalg.svd(a, full_matrices=full)
    k = pt.minimum(a.shape[-2], a.shape[-1])
    rebuilt = (u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :]
    return [s, rebuilt - a, u.mT @ u, vt @ vt.mT, pt.linalg.svd(a, compute_uv=False)]


@pytest.mark.parametrize("full", [True, False])
def test_svd(full, rng):
    shapes = [(0, 0), (1, 1), (4, 4), (7, 3), (3, 7), (4, 0), (0, 4)]
    cases = [[rng.normal(size=shape)] for shape in shapes]
    a = pt.matrix("a")  # symbolic: tall or wide is decided at run time
    checks = _svd_checks(a, full)
    compare_onnx_and_py([a], checks, cases[0], more_inputs=cases[1:], rtol=1e-11, atol=1e-12)
    for shape in [(7, 3), (3, 7), (4, 4)]:  # static: decided at export
        a = pt.tensor("a", shape=shape)
        checks = _svd_checks(a, full)
        compare_onnx_and_py([a], checks, [rng.normal(size=shape)], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_svd_and_pinv_of_rank_deficient_and_ill_conditioned_matrices(dtype, rng):
    a = pt.matrix("a", dtype=dtype)
    rank_two = rng.normal(size=(6, 2)) @ rng.normal(size=(2, 5))
    tol = {"float64": 1e-10, "float32": 1e-4}[dtype]
    outs = [*_svd_checks(a, True)]
    if dtype == "float64":
        # (NumPy's rcond, 1e-15, keeps float32's rounding-noise singular values: pinv of a
        # rank-deficient float32 matrix is noise, in NumPy as here.)
        outs.append(pt.linalg.pinv(a))
    for value in [rank_two, rank_two.T, np.zeros((3, 2))]:
        compare_onnx_and_py([a], outs, [value.astype(dtype)], rtol=tol, atol=tol)
    # pinv of a matrix of condition number c moves by ~eps c relative: the SVD checks only.
    ill = _ill_conditioned(rng, 6, 1e10 if dtype == "float64" else 1e4).astype(dtype)
    compare_onnx_and_py([a], outs[:5], [ill], rtol=tol, atol=tol)


@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1e-100, 1e100, 1e160, 1e300])
def test_svd_and_pinv_of_matrices_of_extreme_scale(scale, rng):
    """Jacobi's rotations work on products of squared column norms, which overflow (or
    underflow) for entries far from 1: the matrices are scaled by a power of two first, each
    by its own. Singular values came out 29% off at 1e100 and 1e-100, inf past 1e154, 0 at
    1e-200."""
    a = pt.matrix("a")  # symbolic: tall or wide at run time
    u, s, vt = pt.linalg.svd(a, full_matrices=False)
    fn = pytensor.function(
        [a], [u, s, vt, pt.linalg.svd(a, compute_uv=False), pt.linalg.pinv(a)], mode="ONNX"
    )
    for value in (rng.normal(size=(5, 4)) * scale, rng.normal(size=(3, 6)) * scale):
        got_u, got_s, got_vt, values, pinv = fn(value)
        expected = np.linalg.svd(value, compute_uv=False)
        np.testing.assert_allclose(got_s, expected, rtol=1e-13, atol=0)
        np.testing.assert_allclose(values, expected, rtol=1e-13, atol=0)
        np.testing.assert_allclose((got_u * got_s) @ got_vt, value, rtol=0, atol=1e-14 * scale)
        np.testing.assert_allclose(pinv, np.linalg.pinv(value), rtol=1e-12, atol=0)
    batch = pt.tensor3("batch")
    values = pytensor.function([batch], pt.linalg.svd(batch, compute_uv=False), mode="ONNX")
    both = np.stack([rng.normal(size=(4, 4)) * scale, rng.normal(size=(4, 4))])
    np.testing.assert_allclose(
        values(both), np.linalg.svd(both, compute_uv=False), rtol=1e-13, atol=0
    )
    assert values(np.zeros((0, 4, 4))).shape == (0, 4)  # a batch of none


@pytest.mark.parametrize("scale", [1e-320, 1e-310, 1e-200, 1e160, 1e300])
@pytest.mark.parametrize("n", [5, 30])  # Jacobi's rotations, inverse iteration
def test_eigh_of_matrices_of_extreme_scale(n, scale, rng):
    """Jacobi's rotations square entries too: eigenvalues came out 10-30% off past 1e154 and
    below 1e-160; a subnormal matrix gave NaN on both paths (its scale overflowed)."""
    a = pt.matrix("a")
    w, v = pt.linalg.eigh(a)
    fn = pytensor.function([a], [w, v, pt.linalg.svd(a, compute_uv=False)], mode="ONNX")
    m = rng.normal(size=(n, n))
    value = (m + m.T) * scale
    values, vectors, singular = fn(value)
    tolerance = 1e-12 if scale > 1e-300 else 1e-2  # subnormals keep a few digits
    np.testing.assert_allclose(values, np.linalg.eigvalsh(value), rtol=tolerance, atol=0)
    np.testing.assert_allclose(
        singular, np.linalg.svd(value, compute_uv=False), rtol=tolerance, atol=0
    )
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(n), atol=1e-13)


def test_svd_batched(rng):
    a = pt.tensor3("a")
    value = rng.normal(size=(3, 5, 4))
    compare_onnx_and_py([a], _svd_checks(a, False), [value], rtol=1e-11, atol=1e-12)


def _round_bodies(model):
    """The Jacobi rounds' Loop bodies, wherever they are nested."""
    import onnx

    return [
        attribute.g
        for node in _all_nodes(model.graph)
        for attribute in node.attribute
        if attribute.type == onnx.AttributeProto.GRAPH
        and attribute.g.name.startswith("jacobi_round")
    ]


def _carried_gathers(model):
    """The axes of the Gathers in the Jacobi rounds' Loop bodies that read a carried state
    (the matrices a round rotates)."""
    found = []
    for body in _round_bodies(model):
        carried = {value.name for value in body.input[2:]}
        for inner in body.node:
            if inner.op_type == "Gather" and inner.input[0] in carried:
                found.append(next((a.i for a in inner.attribute if a.name == "axis"), 0))
    return found


def test_jacobi_rotates_rows(rng):
    """eigh's two-sided rotations and SVD's one-sided ones rotate rows only (J^T A J as
    J^T (J^T A)^T; a^T, V^T kept transposed): ONNX Runtime gathers whole rows, columns
    element by element."""
    from pt_onnxscript import export_onnx

    a = pt.matrix("a")
    values, vectors = pt.linalg.eigh(a)
    u, s, vt = pt.linalg.svd(a)
    for outputs in ([values, vectors], [u, s, vt]):
        axes = _carried_gathers(export_onnx(([a], outputs)))
        assert axes and set(axes) == {-2}, axes
    m = rng.normal(size=(9, 9))
    compare_onnx_and_py([a], [values, pt.abs(vectors)], [m + m.T], rtol=1e-10, atol=1e-12)


def test_jacobi_rounds_read_their_pairings():
    """The round robin's pairings are tables made once; a round reads its row of each (no
    round computes its pairs: a Mod, a ScatterElements and their index arithmetic)."""
    from pt_onnxscript import export_onnx

    a = pt.matrix("a")
    model = export_onnx(([a], list(pt.linalg.eigh(a))))
    rounds = [{inner.op_type for inner in body.node} for body in _round_bodies(model)]
    assert rounds and all(not ops & {"Mod", "ScatterElements"} for ops in rounds), rounds


def test_pinv(rng):
    a = pt.matrix("a")
    cases = [[rng.normal(size=shape)] for shape in [(4, 4), (6, 3), (3, 6), (0, 3)]]
    outs = [pt.linalg.pinv(a)]
    compare_onnx_and_py([a], outs, cases[0], more_inputs=cases[1:], rtol=1e-10, atol=1e-12)


def test_pinv_hermitian_reads_the_lower_triangle(rng):
    a = pt.matrix("a")
    m = rng.normal(size=(5, 5))
    singular = m @ np.diag([3.0, 2.0, 1.0, 0.0, 0.0]) @ m.T
    for value in [rng.normal(size=(5, 5)), singular]:
        compare_onnx_and_py(
            [a], [pt.linalg.pinv(a, hermitian=True)], [value], rtol=1e-9, atol=1e-10
        )


def test_svd_gradient(rng):
    a = pt.matrix("a")
    s = pt.linalg.svd(a, compute_uv=False)
    cost = (s * pt.constant(rng.normal(size=3))).sum()
    compare_onnx_and_py([a], [pytensor.grad(cost, a)], [rng.normal(size=(4, 3))], rtol=1e-9)


def _lstsq():
    try:  # PyTensor 3
        from pytensor.tensor.linalg.solvers.lstsq import lstsq
    except ImportError:  # PyTensor 2.38
        from pytensor.tensor.nlinalg import lstsq
    return lstsq


@pytest.mark.parametrize("a_dtype", ["float64", "float32"])
def test_lstsq_like_numpy(a_dtype, rng):
    """Lstsq (float64 outputs, as its type says): tall, wide, square, empty, rank-deficient and
    ill-conditioned matrices, rcond negative (machine epsilon), tiny and large enough to drop
    singular values; the residuals only where the rank is N < M, as NumPy."""
    a = pt.matrix("a", dtype=a_dtype)
    b = pt.matrix("b")
    rcond = pt.dscalar("rcond")
    outs = _lstsq()(a, b, rcond)
    fn = pytensor.function([a, b, rcond], outs, mode="ONNX")
    deficient = rng.normal(size=(6, 3))
    deficient[:, 2] = deficient[:, 0]
    q, _ = np.linalg.qr(rng.normal(size=(7, 4)))
    ill = (q * np.logspace(0, -9, 4)) @ np.linalg.qr(rng.normal(size=(4, 4)))[0]
    matrices = [rng.normal(size=s) for s in [(5, 3), (3, 5), (4, 4), (0, 3), (3, 0)]]
    tol = 1e-10 if a_dtype == "float64" else 1e-9
    for value in [*matrices, deficient, ill]:
        value = value.astype(a_dtype)
        rhs = rng.normal(size=(value.shape[0], 2))
        for cut in (-1.0, 1e-12, 0.5):
            got = fn(value, rhs, cut)
            expected = np.linalg.lstsq(value.astype(float), rhs, rcond=cut)
            assert [x.dtype for x in got] == [o.type.dtype for o in outs]
            assert int(got[2]) == expected[2] and got[1].shape == expected[1].shape
            np.testing.assert_allclose(got[3], expected[3], rtol=tol, atol=tol)
            # The minimum-norm solution is unique: compared where it is well conditioned.
            if value.size == 0 or cut == 0.5 or np.linalg.cond(value.astype(float)) < 1e6:
                np.testing.assert_allclose(got[0], expected[0], rtol=tol, atol=tol)
                np.testing.assert_allclose(got[1], expected[1], rtol=1e-8, atol=tol)
    with pytest.raises(np.linalg.LinAlgError, match="Linear Least Squares"):
        fn(np.full((3, 2), np.nan, a_dtype), np.ones((3, 1)), -1.0)


def test_lstsq_of_a_vector_is_refused_with_the_fix():
    from pt_onnxscript import UnsupportedOpError, export_onnx

    a, b = pt.matrix("a"), pt.vector("b")
    with pytest.raises(UnsupportedOpError, match=r"pass b\[:, None\]"):
        export_onnx(([a, b], list(_lstsq()(a, b, -1.0))))
