import collections

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytensor.tensor.linalg import cho_solve, solve_triangular

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py, executed_nodes

RTOL = {"float64": 1e-10, "float32": 2e-4}


def spd(rng, n, batch=()):
    m = rng.normal(size=(*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_decompositions_and_solves(dtype, rng):
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
    cases = [
        [
            spd(rng, n).astype(dtype),
            rng.normal(size=n).astype(dtype),
            rng.normal(size=(n, 3)).astype(dtype),
        ]
        for n in (0, 1, 2, 5, 17)
    ]
    tol = RTOL[dtype]
    compare_onnx_and_py([a, b, B], outs, cases[0], more_inputs=cases[1:], rtol=tol, atol=tol)
    inverses = [pt.linalg.inv(a), pt.linalg.det(a), *pt.linalg.slogdet(a)]
    nonempty = [case[:1] for case in cases[1:]]
    compare_onnx_and_py([a], inverses, nonempty[0], more_inputs=nonempty[1:], rtol=tol, atol=tol)


def test_general_matrices_need_pivoting(rng):
    a = pt.matrix("a")
    b = pt.vector("b")
    value = np.array([[0.0, 2.0, 1.0], [1.0, 1.0, 0.0], [3.0, -1.0, 2.0]])
    outs = [pt.linalg.solve(a, b), pt.linalg.inv(a), pt.linalg.det(a), *pt.linalg.slogdet(a)]
    compare_onnx_and_py(
        [a, b],
        outs,
        [value, rng.normal(size=3)],
        more_inputs=[[-value, rng.normal(size=3)]],
        rtol=1e-12,
    )


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
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        fn(singular)


def test_batched_blockwise(rng):
    a = pt.tensor3("a")
    b = pt.matrix("b")
    outs = [
        pt.linalg.cholesky(a),
        pt.linalg.solve(a, b[..., None], b_ndim=2),
        pt.linalg.det(a),
        pt.linalg.inv(a),
    ]
    compare_onnx_and_py(
        [a, b], outs, [spd(rng, 4, (3,)), rng.normal(size=(3, 4))], rtol=1e-10, atol=1e-12
    )


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
    compare_onnx_and_py(
        [x, ls, y],
        [logp, *grads, pytensor.grad(pt.linalg.slogdet(k)[1], ls)],
        values,
        rtol=1e-10,
        atol=1e-12,
    )


def test_kron_and_einsum(rng):
    a = pt.matrix("a")
    b = pt.matrix("b")
    outs = [pt.linalg.kron(a, b), pt.einsum("ij,jk->ik", a, b.T), pt.einsum("ij,ij->i", a, a)]
    compare_onnx_and_py([a, b], outs, [rng.normal(size=(2, 3)), rng.normal(size=(4, 3))])


@pytest.mark.slow  # a factorization exported per example
@settings(max_examples=4, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), seed=st.integers(0, 1000))
def test_random_sizes(sizes, seed):
    rng = np.random.default_rng(seed)
    a = pt.matrix("a")
    b = pt.vector("b")
    outs = [pt.linalg.cholesky(a), pt.linalg.solve(a, b), *pt.linalg.slogdet(a)]
    cases = [[spd(rng, n), rng.normal(size=n)] for n in sizes]
    compare_onnx_and_py([a, b], outs, cases[0], more_inputs=cases[1:], rtol=1e-10, atol=1e-12)


def _garbage_triangle(rng, a, keep_lower):
    """`a` with its other strict triangle replaced by junk, NaN and inf included."""
    junk = rng.normal(size=a.shape) * 100
    junk.flat[:: a.shape[-1] + 2] = np.nan
    if a.shape[-1] > 2:
        junk[..., 0, -1] = np.inf
        junk[..., -1, 0] = -np.inf
    other = np.triu(np.ones(a.shape[-2:], bool), 1)
    if not keep_lower:
        other = other.T
    return np.where(other, junk, a).astype(a.dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("n", [0, 1, 4])
def test_cholesky_reads_only_its_triangle(dtype, lower, n, rng):
    import scipy.linalg

    a = pt.matrix("a", dtype=dtype)
    value = _garbage_triangle(rng, spd(rng, n).astype(dtype), keep_lower=lower)
    _, result = compare_onnx_and_py(
        [a], pt.linalg.cholesky(a, lower=lower), [value], rtol=RTOL[dtype], atol=RTOL[dtype]
    )
    if n:
        expected = scipy.linalg.cholesky(value, lower=lower, check_finite=False)
        np.testing.assert_allclose(result, expected, rtol=RTOL[dtype], atol=RTOL[dtype])


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_cholesky_by_panels(lower, batch, rng, monkeypatch):
    """Cholesky by panels of two blocks of 4 columns (so 19 columns are three panels, the last
    one partial, the padding an identity): junk, NaN and inf in the triangle LAPACK does not
    read change nothing, and a matrix that stops being positive definite at column 13 (the
    second block of the second panel) gives NaN, as PyTensor."""
    import scipy.linalg

    from pt_onnxscript.ops import linalg

    monkeypatch.setattr(linalg, "BLOCK", 4)
    n = 19
    a = pt.tensor("a", shape=(None,) * (len(batch) + 2))
    value = _garbage_triangle(rng, spd(rng, n, batch), keep_lower=lower)
    _, result = compare_onnx_and_py(
        [a], pt.linalg.cholesky(a, lower=lower), [value], rtol=1e-10, atol=1e-12
    )
    expected = np.vectorize(
        lambda m: scipy.linalg.cholesky(m, lower=lower, check_finite=False),
        signature="(n,n)->(n,n)",
    )(value)
    np.testing.assert_allclose(result, expected, rtol=1e-10, atol=1e-12)
    # Not positive definite from column 13 on: PyTensor gives NaN for the whole matrix.
    failing = spd(rng, n, batch)
    failing[..., 13, 13] = -1.0
    fn = pytensor.function([a], pt.linalg.cholesky(a, lower=lower, on_error="nan"), mode="ONNX")
    assert np.isnan(fn(failing)).all()


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("b_ndim", [1, 2])
def test_cho_solve_with_either_factor(lower, b_ndim, rng):
    import scipy.linalg

    c = pt.matrix("c")
    b = pt.tensor("b", shape=(None,) * b_ndim)
    value = spd(rng, 5)
    factor = _garbage_triangle(rng, scipy.linalg.cholesky(value, lower=lower), keep_lower=lower)
    rhs = rng.normal(size=(5, 2)[:b_ndim])
    _, result = compare_onnx_and_py([c, b], cho_solve((c, lower), b), [factor, rhs], rtol=1e-10)
    expected = scipy.linalg.cho_solve((factor, lower), rhs, check_finite=False)
    np.testing.assert_allclose(result, expected, rtol=1e-10)
    np.testing.assert_allclose(value @ result, rhs, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("assume_a", ["sym", "her", "pos"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_solve_reads_only_the_triangle_scipy_reads(assume_a, lower, dtype, rng):
    import scipy.linalg

    a = pt.matrix("a", dtype=dtype)
    b = pt.vector("b", dtype=dtype)
    sym = spd(rng, 4) if assume_a == "pos" else rng.normal(size=(4, 4))
    sym = np.tril(sym) + np.tril(sym, -1).T
    value = _garbage_triangle(rng, sym.astype(dtype), keep_lower=lower)
    rhs = rng.normal(size=4).astype(dtype)
    out = pt.linalg.solve(a, b, assume_a=assume_a, lower=lower)
    _, result = compare_onnx_and_py([a, b], out, [value, rhs], rtol=RTOL[dtype], atol=RTOL[dtype])
    expected = scipy.linalg.solve(value, rhs, assume_a=assume_a, lower=lower, check_finite=False)
    np.testing.assert_allclose(result, expected, rtol=RTOL[dtype] * 10, atol=RTOL[dtype])


def test_solve_tridiagonal_reads_only_the_band(rng):
    import scipy.linalg

    a = pt.matrix("a")
    b = pt.vector("b")
    value = rng.normal(size=(5, 5)) + 5 * np.eye(5)
    rhs = rng.normal(size=5)
    fn = pytensor.function([a, b], pt.linalg.solve(a, b, assume_a="tridiagonal"), mode="ONNX")
    band = np.triu(np.tril(value, 1), -1)
    np.testing.assert_allclose(fn(value, rhs), scipy.linalg.solve(band, rhs), rtol=1e-12)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
@pytest.mark.parametrize("trans", [0, 1])
@pytest.mark.parametrize("b_shape", [(4,), (4, 3), (4, 0)])
def test_solve_triangular_reads_only_its_triangle(lower, unit_diagonal, trans, b_shape, rng):
    import scipy.linalg

    a = pt.matrix("a")
    b = pt.tensor("b", shape=(None,) * len(b_shape))
    value = rng.normal(size=(4, 4)) + 4 * np.eye(4)
    value = _garbage_triangle(rng, value, keep_lower=lower)
    if unit_diagonal:
        value[np.diag_indices(4)] = np.nan
    rhs = rng.normal(size=b_shape)
    out = solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal, trans=trans)
    _, result = compare_onnx_and_py([a, b], out, [value, rhs], rtol=1e-10, atol=1e-12)
    expected = scipy.linalg.solve_triangular(
        value, rhs, lower=lower, unit_diagonal=unit_diagonal, trans=trans, check_finite=False
    )
    np.testing.assert_allclose(result, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_det_and_slogdet_of_singular_matrices_like_numpy(dtype):
    a = pt.matrix("a", dtype=dtype)
    fn = pytensor.function([a], [pt.linalg.det(a), *pt.linalg.slogdet(a)], mode="ONNX")
    for value in [
        np.array([[0.0, 1.0], [0.0, 2.0]]),  # an all-zero pivot column
        np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),
        np.zeros((3, 3)),
        np.zeros((1, 1)),
        np.array([[1.0, 2.0], [0.0, 0.0]]),
    ]:
        value = value.astype(dtype)
        det, sign, logabs = fn(value)
        e_sign, e_logabs = np.linalg.slogdet(value)
        np.testing.assert_allclose(det, np.linalg.det(value), atol=1e-6)
        assert sign == e_sign and logabs == e_logabs, (value, sign, logabs)
        assert det.dtype == value.dtype


def test_blockwise_linalg_with_batch_broadcasting(rng):
    import scipy.linalg

    a = pt.tensor3("a")
    b = pt.tensor("b", shape=(1, None, None))
    values = [np.stack([spd(rng, 3), np.tril(spd(rng, 3))]), rng.normal(size=(1, 3, 2))]
    outs = [
        pt.linalg.cholesky(a, lower=False),
        solve_triangular(a, b, lower=False),
        pt.linalg.solve(a, b, assume_a="pos", lower=True, b_ndim=2),
        cho_solve((pt.linalg.cholesky(a, lower=False), False), b),
    ]
    _, results = compare_onnx_and_py([a, b], outs, values, rtol=1e-10, atol=1e-12)
    for i in range(2):
        np.testing.assert_allclose(
            results[0][i], scipy.linalg.cholesky(values[0][i], lower=False), rtol=1e-10
        )


def _blocked_graphs(m, B, n):
    """Graphs of the matrices `m` (..., n, n) for the blocked algorithms: positive definite
    ones, general ones, LU factors, determinants."""
    chol = pt.linalg.cholesky(m)
    positive_definite = [
        chol,
        pt.linalg.cholesky(m, lower=False),
        solve_triangular(chol, B, lower=True, b_ndim=2),
        solve_triangular(pt.swapaxes(chol, -1, -2), B, lower=False, b_ndim=2),
        solve_triangular(m, B, lower=True, unit_diagonal=True, b_ndim=2),
        pt.linalg.solve(m, B, assume_a="pos", b_ndim=2),
    ]
    general = [pt.linalg.solve(m, B, b_ndim=2), *([pt.linalg.inv(m)] if n else [])]
    # In graphs of their own: PyTensor 3.0.7 rewrites det(m) next to an LU of m (which
    # lu_factor is, and a solve becomes) into the product of U's diagonal, without the sign
    # of the row swaps.
    factors = list(pt.linalg.lu_factor(m))
    determinants = [pt.linalg.det(m), *pt.linalg.slogdet(m)]
    return positive_definite, general, factors, determinants


def _blocked_inputs(rng, n):
    """A positive definite batch, a general one (and one with rows shuffled), right-hand
    sides."""
    value = spd(rng, n, (2,))
    matrices = np.stack([rng.normal(size=(n, n)), value[0][rng.permutation(n)]])
    return value, matrices, rng.normal(size=(2, n, 3))


@pytest.mark.parametrize("block", [pytest.param(1, marks=pytest.mark.slow), 4])
def test_blocked_factorizations_and_solves_across_blocks(block, rng, monkeypatch):
    """Cholesky, triangular solves and LU by blocks (small blocks here, so that sizes cover
    several blocks, a partial last one and none), symbolic and static sizes, batches."""
    from pt_onnxscript.ops import linalg

    monkeypatch.setattr(linalg, "BLOCK", block)
    sizes = [0, 1, 3, 4, 9]
    inputs = [_blocked_inputs(rng, n) for n in sizes]
    B = pt.tensor3("B")
    # Symbolic sizes: one compilation for all of them.
    _compare_symbolic_sizes(inputs, B)
    tol = {"rtol": 1e-10, "atol": 1e-12}
    # Static sizes: the blocking is chosen at export.
    for n, (value, matrices, rhs) in zip(sizes, inputs, strict=True):
        static = pt.tensor("s", shape=(2, n, n))
        positive_definite, general, factors, determinants = _blocked_graphs(static, B, n)
        compare_onnx_and_py([static, B], positive_definite, [value, rhs], **tol)
        compare_onnx_and_py([static, B], general, [matrices, rhs], **tol)
        for outs in (factors, determinants):
            compare_onnx_and_py([static], outs, [matrices], **tol)


def test_symbolic_sizes_across_the_small_blocks(rng):
    """Matrices of symbolic size take the smallest block of SMALL_BLOCKS (then BLOCK) that
    holds them, chosen at run time: sizes at and past each tier's edge, batched, against
    PyTensor's Python linker with one compilation."""
    from pt_onnxscript.ops.linalg import BLOCK, SMALL_BLOCKS

    edges = sorted({0, 1, 2, *SMALL_BLOCKS, *(b + 1 for b in SMALL_BLOCKS), BLOCK + 1})
    _compare_symbolic_sizes([_blocked_inputs(rng, n) for n in edges], pt.tensor3("B"))


def _compare_symbolic_sizes(inputs, B):
    """_blocked_graphs of a batch of matrices of symbolic size, one compilation for all the
    `inputs` (_blocked_inputs of each size), against the Python linker."""
    a = pt.tensor3("a")
    positive_definite, general, factors, determinants = _blocked_graphs(a, B, 1)
    tol = {"rtol": 1e-10, "atol": 1e-12}
    for outs, chosen in (
        (positive_definite, [[value, rhs] for value, _, rhs in inputs]),
        (general, [[matrices, rhs] for _, matrices, rhs in inputs[1:]]),
        (factors, [[matrices] for _, matrices, _ in inputs]),
        (determinants, [[matrices] for _, matrices, _ in inputs]),
    ):
        variables = [a, B] if len(chosen[0]) == 2 else [a]
        compare_onnx_and_py(variables, outs, chosen[0], more_inputs=chosen[1:], **tol)


def test_small_matrices_of_symbolic_size_run_small_panels(rng, tmp_path):
    """A 3 x 3 matrix of symbolic size runs LU's pivot search and Cholesky's column steps for
    the smallest block that holds it, not for BLOCK columns of padding."""
    from pt_onnxscript.ops.linalg import BLOCK, SMALL_BLOCKS

    a, b = pt.matrix("a"), pt.vector("b")
    values = {"a": rng.normal(size=(3, 3)), "b": rng.normal(size=3)}
    solve = export_onnx(([a, b], [pt.linalg.solve(a, b)]))
    searches = [op for op, _ in executed_nodes(solve, values, tmp_path) if op == "ArgMax"]
    assert 3 <= len(searches) <= min(SMALL_BLOCKS) < BLOCK
    positive = {"a": spd(rng, 3)}
    cholesky = export_onnx(([a], [pt.linalg.cholesky(a)]))
    updates = [op for op, _ in executed_nodes(cholesky, positive, tmp_path) if op == "Gemm"]
    assert 2 <= len(updates) < min(SMALL_BLOCKS)  # one per column but the last
    compare_onnx_and_py([a, b], pt.linalg.solve(a, b), [values["a"], values["b"]])
    compare_onnx_and_py([a], pt.linalg.cholesky(a), [positive["a"]])
    # One block holds the matrix: LU and Cholesky factor it as one panel, a triangular solve
    # of static size multiplies by its block's inverse, with no Loop.
    static = pt.matrix("s", shape=(3, 3))
    cases = [([matrix], pt.linalg.det(matrix), values["a"], "ArgMax") for matrix in (a, static)]
    cases += [([m], pt.linalg.cholesky(m), positive["a"], "Gemm") for m in (a, static)]
    factor = np.linalg.cholesky(positive["a"])
    cases.append(([static, b], solve_triangular(static, b, lower=True), factor, "MatMul"))
    for inputs, outputs, matrix_value, op in cases:
        feeds = {inputs[0].name: matrix_value, "b": values["b"]}
        feeds = {var.name: feeds[var.name] for var in inputs}
        model = export_onnx((inputs, [outputs]))
        executed = {op for op, _ in executed_nodes(model, feeds, tmp_path)}
        assert op in executed
        assert "Loop" not in executed


@pytest.mark.parametrize("n", [1, 3, 20, 31])
def test_static_matrices_one_block_holds_are_not_padded(n, rng):
    """LU and Cholesky of a static n x n matrix up to BLOCK factor n columns, not the next
    power of 2 (a 20 x 20 Cholesky padded to 32 ran 1.5x the nodes and the time): one pivot
    search per column, one rank-1 update per column but the last; values as before."""
    a, b = pt.tensor("a", shape=(n, n)), pt.tensor("b", shape=(n,))
    matrix, positive, rhs = rng.normal(size=(n, n)), spd(rng, n), rng.normal(size=n)
    outputs = [pt.linalg.solve(a, b), pt.linalg.det(a)]
    solve = export_onnx(([a, b], outputs))
    assert [node.op_type for node in solve.graph.node].count("ArgMax") == n
    cholesky = export_onnx(([a], [pt.linalg.cholesky(a)]))
    assert [node.op_type for node in cholesky.graph.node].count("Gemm") == n - 1
    compare_onnx_and_py([a, b], outputs, [matrix, rhs])
    compare_onnx_and_py([a], pt.linalg.cholesky(a), [positive])


@pytest.mark.parametrize("n", [40, 50])
def test_static_cholesky_one_panel_holds_is_not_padded(n, rng):
    """A static Cholesky that one panel (two blocks) holds runs its n columns with no Loop:
    a block of BLOCK, then the columns left, with no rows below to solve for; the factor is
    read from the lower triangle only."""
    from pt_onnxscript.ops.linalg import BLOCK

    a = pt.tensor("a", shape=(n, n))
    model = export_onnx(([a], [pt.linalg.cholesky(a)]))
    ops = [node.op_type for node in model.graph.node]
    assert "Loop" not in ops
    assert ops.count("Gemm") == (BLOCK - 1) + (n - BLOCK - 1)  # one per column but each last
    positive = spd(rng, n)
    positive[np.triu_indices(n, 1)] = np.nan  # never read
    compare_onnx_and_py([a], pt.linalg.cholesky(a), [positive])
    batch = pt.tensor("b", shape=(2, n, n))
    compare_onnx_and_py([batch], pt.linalg.cholesky(batch), [np.stack([spd(rng, n)] * 2)])


def test_solves_with_one_static_matrix_invert_its_diagonal_blocks_once(rng):
    """Two triangular solves with one static 50 x 50 matrix, the second's right-hand side
    read from the first's result (so PyTensor cannot join them): the inverses of the
    matrix's diagonal blocks are computed once. Each solve's gather indices, (50, 32), are a
    constant of their own; equal constants up to DEDUPLICATED_ELEMENTS are made one before
    the common-subexpression pass (onnx-ir's default of 1,024 elements kept them apart)."""
    n = 50
    a, b = pt.tensor("a", shape=(n, n)), pt.tensor("b", shape=(n, n))
    first = solve_triangular(a, b, lower=True)
    outputs = [first, solve_triangular(a, 2 * first + b, lower=True)]
    model = export_onnx(([a, b], outputs))
    assert [node.op_type for node in model.graph.node].count("Trilu") == 1
    lower = np.tril(rng.normal(size=(n, n))) + 10 * np.eye(n)
    compare_onnx_and_py([a, b], outputs, [lower, rng.normal(size=(n, n))])


@pytest.mark.parametrize("n", [70, 130])
def test_cholesky_and_solves_of_several_default_blocks(n, rng):
    """Sizes past the default block size, with a badly conditioned matrix (condition number
    ~1e8) compared with SciPy's LAPACK."""
    a = pt.matrix("a")
    b = pt.vector("b")
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    value = (q * np.logspace(0, -8, n)) @ q.T
    value = (value + value.T) / 2
    chol = pt.linalg.cholesky(a)
    outs = [chol, solve_triangular(chol, b, lower=True), pt.linalg.solve(a, b, assume_a="pos")]
    fn = pytensor.function([a, b], outs, mode="ONNX")
    rhs = rng.normal(size=n)
    got = fn(value, rhs)
    import scipy.linalg

    expected_chol = scipy.linalg.cholesky(value, lower=True)
    np.testing.assert_allclose(got[0], expected_chol, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(
        got[1], scipy.linalg.solve_triangular(expected_chol, rhs, lower=True), rtol=1e-7
    )
    # The solve's error grows with the condition number, LAPACK's as well: residuals.
    np.testing.assert_allclose(value @ got[2], rhs, rtol=0, atol=1e-7 * np.abs(rhs).max())


def _scalars_against_columns(model, feeds, tmp_path):
    """The elementwise nodes that ONNX Runtime ran on an (..., n, 1) column, n > 1, with a 0-d
    or 1-d operand of one element (a broadcast it makes one call per element; a (1, 1) one
    is fast)."""
    from pt_onnxscript.optimize import ELEMENTWISE

    found = []
    for op, shapes in executed_nodes(model, feeds, tmp_path):
        if op not in ELEMENTWISE:
            continue
        rank = max(len(shape) for shape in shapes)
        column = any(len(s) == rank >= 2 and s[-1] == 1 and np.prod(s) > 1 for s in shapes)
        if column and any(len(s) < 2 and np.prod(s) == 1 for s in shapes):
            found.append((op, shapes))
    return found


@pytest.mark.parametrize("batch", [(), (2,)])
def test_column_operations_meet_no_lower_rank_scalar(batch, rng, tmp_path):
    """LU's pivot search and elimination, Cholesky's padding and the triangular solves work on
    columns (..., n, 1): none of their elementwise nodes pairs a column with a 0-d or 1-d
    scalar, which ONNX Runtime broadcasts one element per call (~10x the time)."""
    a = pt.tensor("a", shape=(None,) * (len(batch) + 2))
    b = pt.tensor("b", shape=(None,) * (len(batch) + 1))
    n = 40
    general = rng.normal(size=(*batch, n, n))
    factor = np.linalg.cholesky(spd(rng, n, batch))
    rhs = rng.normal(size=(*batch, n))
    for outputs, values in (
        ([pt.linalg.solve(a, b, b_ndim=1), pt.linalg.inv(a)], [general, rhs]),
        ([*pt.linalg.lu_factor(a), pt.linalg.det(a)], [general]),
        ([pt.linalg.cholesky(a), solve_triangular(a, b, lower=True, b_ndim=1)], [factor, rhs]),
    ):
        inputs = [a, b][: len(values)]
        model = export_onnx((inputs, outputs))
        feeds = {var.name: value for var, value in zip(inputs, values, strict=True)}
        assert _scalars_against_columns(model, feeds, tmp_path) == []


def test_block_inverses_run_no_matmul_of_one_by_one_stacks(rng, tmp_path):
    """The triangular solves invert their diagonal blocks by doubling from 1 x 1 blocks: that
    first product is elementwise, since ONNX Runtime's MatMul runs one GEMM per matrix of a
    stack; and the identity completing the last block is padded in, not a Where over all the
    blocks."""
    a, b = pt.matrix("a"), pt.vector("b")
    x = solve_triangular(a, b, lower=True, b_ndim=1)
    factor, rhs = np.linalg.cholesky(spd(rng, 70, ())), rng.normal(size=70)
    compare_onnx_and_py([a, b], x, [factor, rhs])
    executed = executed_nodes(export_onnx(([a, b], [x])), {"a": factor, "b": rhs}, tmp_path)
    stacks = [
        shapes
        for op, shapes in executed
        if op == "MatMul" and any(s[-2:] == [1, 1] and np.prod(s) > 1 for s in shapes)
    ]
    assert stacks == []
    assert [shapes for op, shapes in executed if op == "Where" and max(map(len, shapes)) > 2] == []


@pytest.mark.parametrize("batch", [(), (2,)])
def test_lu_panels_work_on_rows(batch, rng, tmp_path):
    """LU's pivot search and rank-1 updates run on its panels transposed: no column of a
    panel taller than a block is sliced or searched (ONNX Runtime slices a (H, 1) column
    element by element and broadcasts scalars against it one element per call)."""
    from pt_onnxscript.ops.linalg import BLOCK
    from pt_onnxscript.optimize import ELEMENTWISE

    a = pt.tensor("a", shape=(None,) * (len(batch) + 2))
    values = rng.normal(size=(*batch, 70, 70))
    outputs = [*pt.linalg.lu_factor(a)]
    compare_onnx_and_py([a], outputs, [values])
    executed = executed_nodes(export_onnx(([a], outputs)), {"a": values}, tmp_path)
    searched = {*ELEMENTWISE, "ArgMax", "ReduceMax"}
    columns = [
        (op, shapes)
        for op, shapes in executed
        if op in searched and any(len(s) >= 2 and s[-2] > BLOCK and s[-1] == 1 for s in shapes)
    ]
    assert columns == []
    # One Where per column meets a whole (transposed) column, NaN's mapping to inf: ONNX
    # Runtime's Where costs ~5x an arithmetic node (the swaps are kept as two permutations).
    searches = sum(op == "ArgMax" for op, _ in executed)
    wide = [
        shapes
        for op, shapes in executed
        if op == "Where" and len(shapes[0]) >= 2 and shapes[0][-2:] != [1, 1] and shapes[0][-2] == 1
    ]
    assert searches >= 70 and len(wide) <= searches
    # A panel (..., H, BLOCK) is sliced a few times per step (its rows), not once per column.
    panels = collections.Counter(
        tuple(shapes[0])
        for op, shapes in executed
        if op == "Slice" and shapes[0][-1] == BLOCK and shapes[0][-2] > BLOCK
    )
    assert panels and max(panels.values()) < BLOCK


@pytest.mark.parametrize("block", [1, 2, 8, 32])
def test_doubling_entries_hold_each_steps_blocks(block, rng):
    """triangular_inverse reads the diagonal and every doubling step's block C with one Gather
    of these positions: the doubling run on them in NumPy gives the inverse."""
    from pt_onnxscript.ops.linalg import _doubling_entries

    t = np.tril(rng.normal(size=(block, block))) + 4 * np.eye(block)
    entries = t.reshape(-1)[_doubling_entries(block)]
    inverse = [np.array([[1 / d]]) for d in entries[:block]]
    offset, size = block, 1
    while size < block:
        pairs = block // (2 * size)
        c = entries[offset : offset + pairs * size * size].reshape(pairs, size, size)
        offset += pairs * size * size
        inverse = [
            np.block([[a, np.zeros((size, size))], [-d @ c[p] @ a, d]])
            for p, (a, d) in enumerate(zip(inverse[0::2], inverse[1::2], strict=True))
        ]
        size *= 2
    assert offset == len(entries)
    np.testing.assert_allclose(inverse[0], np.linalg.inv(t), rtol=1e-12, atol=1e-14)


def test_block_inverses_gather_once():
    """The diagonal blocks' inverses read the blocks with one Gather for all doubling steps
    (two reads of the matrix in all, with the blocks' own GatherElements), not a Gather and a
    GatherElements per step."""
    a, b = pt.matrix("a"), pt.vector("b")
    model = export_onnx(([a, b], [solve_triangular(a, b, lower=True, b_ndim=1)]))
    gathers = [
        node.op_type
        for node in model.graph.node
        if node.op_type.startswith("Gather") and "check:" not in node.name
    ]
    assert len(gathers) <= 4, gathers


def _lu_inputs(rng, n, batch=()):
    """A general matrix, a singular one (a zero column: pivots of exactly zero, elimination
    skipped) and an ill-conditioned one."""
    general = rng.normal(size=(*batch, n, n))
    singular = general.copy()
    if n:
        singular[..., :, n // 2] = 0.0
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    ill = np.broadcast_to((q * np.logspace(0, -10, n)) @ q.T, general.shape).copy()
    return [general, singular, ill]


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_lu_factor_and_lu_like_scipy(dtype, rng):
    import scipy.linalg
    from pytensor.tensor.linalg import lu, lu_factor, lu_solve

    a = pt.matrix("a", dtype=dtype)
    b = pt.matrix("b", dtype=dtype)
    factor, pivots = lu_factor(a)
    p_indices, *_ = lu(a, p_indices=True)
    outs = [factor, pivots, *lu(a), *lu(a, p_indices=True)[1:], *lu(a, permute_l=True)]
    solves = pytensor.function(
        [a, b],
        [lu_solve((factor, pivots), b), lu_solve((factor, pivots), b, trans=True)],
        mode="ONNX",
    )
    onnx_lu = pytensor.function([a], [factor, pivots, *lu(a)], mode="ONNX")
    got_indices = pytensor.function([a], p_indices, mode="ONNX")
    expected_indices = pytensor.function([a], p_indices, mode="FAST_COMPILE")
    tol = RTOL[dtype]
    cases = []
    for n in (0, 1, 2, 5, 9):
        general, singular, ill = _lu_inputs(rng, n)
        for value in (general, singular):
            rhs = rng.normal(size=(n, 2))
            values = [value.astype(dtype), rhs.astype(dtype)]
            cases.append(values)
            # p_indices: int32 as its type says (SciPy, and so PyTensor's Python perform,
            # give int64).
            got = got_indices(values[0])
            assert got.dtype == p_indices.type.dtype
            np.testing.assert_array_equal(got, expected_indices(values[0]))
            if n and np.linalg.cond(value) < 1e6:  # solves: residuals
                x, xt = solves(*values)
                np.testing.assert_allclose(value @ x, rhs, atol=50 * tol)
                np.testing.assert_allclose(value.T @ xt, rhs, atol=50 * tol)
        # Rounding differs from getrf's order by ~cond * eps: residuals.
        p, low, up = onnx_lu(ill.astype(dtype))[2:]
        np.testing.assert_allclose(p @ low @ up, ill.astype(dtype), rtol=0, atol=tol)
        assert np.all(np.abs(np.tril(low, -1)) <= 1)  # partial pivoting
        if n:  # SciPy's own lu_factor
            got = onnx_lu(general.astype(dtype))
            expected = scipy.linalg.lu_factor(general)
            np.testing.assert_allclose(got[0], expected[0], rtol=tol, atol=tol)
            np.testing.assert_array_equal(got[1], expected[1])
            p, low, up = got[2:]
            np.testing.assert_allclose(p @ low @ up, general, rtol=tol, atol=tol * 10)
    compare_onnx_and_py([a, b], outs, cases[0], more_inputs=cases[1:], rtol=tol, atol=tol)


@pytest.mark.filterwarnings("ignore:Diagonal number:scipy.linalg.LinAlgWarning")
@pytest.mark.parametrize("block", [2, 32])
def test_lu_factor_pivots_with_ties_like_lapack(block, rng, monkeypatch):
    """Matrices of small integers, where a column's largest |entry| is often reached several
    times: the pivot is the first of them in the order the earlier swaps left (idamax), so the
    pivots equal LAPACK's across panels (blocks of 2: 11 columns are six panels); a NaN makes
    its matrix's factors NaN from its column on, never a wrong finite value."""
    import scipy.linalg
    from pytensor.tensor.linalg import lu_factor

    from pt_onnxscript.ops import linalg

    monkeypatch.setattr(linalg, "BLOCK", block)
    a = pt.tensor3("a")
    fn = pytensor.function([a], list(lu_factor(a)), mode="ONNX")
    values = rng.integers(-2, 3, size=(6, 11, 11)).astype(float)
    values[0] = np.eye(11)[::-1] * 2  # every column's largest entry below the diagonal
    values[1, :, 4] = 1.0  # a column of ties
    values[2, :, 0] = 0.0  # singular: a zero pivot, the column skipped
    got, pivots = fn(values)
    for value, factors, rows in zip(values, got, pivots, strict=True):
        expected, expected_rows = scipy.linalg.lu_factor(value, check_finite=False)
        np.testing.assert_array_equal(rows, expected_rows)
        if not np.isnan(factors).any():  # lu_factor with a zero pivot: NaN, as PyTensor
            np.testing.assert_allclose(factors, expected, rtol=1e-12, atol=1e-12)
    with_nan = values[3:4].copy()
    with_nan[0, 5, 3] = np.nan
    assert np.isnan(fn(with_nan)[0]).any()


def test_lu_batched_and_pivots_to_permutations(rng):
    from pytensor.tensor.blockwise import Blockwise
    from pytensor.tensor.linalg import lu, lu_factor

    try:  # PyTensor 3
        from pytensor.tensor.linalg import PivotToPermutations
    except ImportError:  # PyTensor 2.38
        from pytensor.tensor.slinalg import PivotToPermutations

    a = pt.tensor3("a")
    factor, pivots = lu_factor(a)
    outs = [
        factor,
        pivots,
        *lu(a),
        Blockwise(PivotToPermutations(inverse=True))(pivots),
        Blockwise(PivotToPermutations(inverse=False))(pivots),
    ]
    first, *others = [[value] for value in _lu_inputs(rng, 4, (3,))]
    more = [*others, [np.zeros((2, 0, 0))]]
    compare_onnx_and_py([a], outs, first, more_inputs=more, rtol=1e-10, atol=1e-12)


def test_block_diag(rng):
    from pytensor.tensor.linalg import block_diag

    a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c", dtype="float32")
    batched = pt.tensor3("batched")
    outs = [block_diag(a, b), block_diag(a, b, c), block_diag(batched, a)]
    values = [
        rng.normal(size=(2, 3)),
        rng.normal(size=(0, 2)),
        rng.normal(size=(1, 1)).astype("float32"),
        rng.normal(size=(4, 2, 2)),
    ]
    compare_onnx_and_py([a, b, c, batched], outs, values)


def _tensor_ops():
    try:  # PyTensor 3
        from pytensor.tensor.linalg.inverse import tensorinv
        from pytensor.tensor.linalg.solvers.lstsq import tensorsolve
    except ImportError:  # PyTensor 2.38
        from pytensor.tensor.nlinalg import tensorinv, tensorsolve
    return tensorinv, tensorsolve


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_tensorinv_like_numpy(dtype, rng):
    """tensorinv: NumPy's reshape to (prod(shape[ind:]), -1), inverse, and reshape to
    shape[ind:] + shape[:ind], for each `ind`; non-symmetric, size-1 and ill-conditioned
    tensors, of symbolic shape (one compilation for all sizes of a rank) and static."""
    tensorinv, _ = _tensor_ops()
    tol = RTOL[dtype]
    for shapes, ind in [
        ([(2, 3, 6), (1, 1, 1), (2, 2, 4)], 2),
        ([(6, 2, 3), (1, 1, 1), (4, 2, 2)], 1),
        ([(2, 3, 2, 3)], 2),
    ]:
        static = len(shapes) == 1
        a = pt.tensor("a", dtype=dtype, shape=shapes[0] if static else (None,) * len(shapes[0]))
        values = [rng.normal(size=s).astype(dtype) for s in shapes]
        more = [[v] for v in values[1:]]
        compare_onnx_and_py(
            [a], [tensorinv(a, ind)], values[:1], more_inputs=more, rtol=tol, atol=tol
        )
    # Ill-conditioned (cond 1e8 in float64, 1e3 in float32): within what that allows.
    cond = 1e8 if dtype == "float64" else 1e3
    q1, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    q2, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    ill = ((q1 * np.geomspace(1, 1 / cond, 6)) @ q2).reshape(6, 2, 3).astype(dtype)
    a = pt.tensor3("a", dtype=dtype)
    got = pytensor.function([a], tensorinv(a, 1), mode="ONNX")(ill)
    expected = np.linalg.tensorinv(ill.astype("float64"), 1)
    error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
    assert got.dtype == dtype and error < 10 * cond * np.finfo(dtype).eps


def test_tensorinv_failures_like_numpy(rng):
    tensorinv, _ = _tensor_ops()
    a = pt.tensor3("a")
    fn = pytensor.function([a], tensorinv(a, 2), mode="ONNX")
    singular = rng.normal(size=(2, 3, 6))
    singular[1, 2] = singular[0, 1]
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.linalg.tensorinv(singular, 2)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        fn(singular)
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        fn(rng.normal(size=(2, 3, 4)))  # prod(shape[2:]) = 4, prod(shape[:2]) = 6


@pytest.mark.parametrize(
    ("a", "ind", "message"),
    [
        (pt.tensor3("a"), 0, "ind=0"),
        (pt.tensor("a", shape=(2, 3, 4)), 2, r"not square: prod\(shape\[2:\]\) is 4"),
        (pt.tensor("a", shape=(6, 2, 3)), 1, r"PyTensor types its result as \(6, 2, 3\)"),
        (pt.tensor3("a", dtype="int64"), 2, "int64 output"),
    ],
)
def test_tensorinv_refused_with_the_reason(a, ind, message):
    from pt_onnxscript import UnsupportedOpError

    tensorinv, _ = _tensor_ops()
    with pytest.raises(UnsupportedOpError, match=message):
        export_onnx(([a], [tensorinv(a, ind)]))


@pytest.mark.parametrize("dtype", ["float64", pytest.param("float32", marks=pytest.mark.slow)])
def test_tensorsolve_like_numpy(dtype, rng):
    """tensorsolve: a's axes moved to the end, a reshaped to a square matrix, b raveled, the
    solution shaped as a's trailing dims; with and without `axes`, size 1, static shapes."""
    _, tensorsolve = _tensor_ops()
    tol = RTOL[dtype]
    for a_shapes, b_shapes, axes in [
        ([(6, 2, 3), (1, 1, 1), (4, 1, 4)], [(6,), (1,), (4,)], None),
        ([(2, 6, 3), (2, 4, 2)], [(6,), (4,)], (0,)),
        ([(3, 2, 3, 2)], [(3, 2)], (1, 0)),
    ]:
        static = len(a_shapes) == 1
        a = pt.tensor("a", dtype=dtype, shape=a_shapes[0] if static else (None,) * len(a_shapes[0]))
        b = pt.tensor("b", dtype=dtype, shape=b_shapes[0] if static else (None,) * len(b_shapes[0]))
        cases = [
            [rng.normal(size=sa).astype(dtype), rng.normal(size=sb).astype(dtype)]
            for sa, sb in zip(a_shapes, b_shapes, strict=True)
        ]
        compare_onnx_and_py(
            [a, b], [tensorsolve(a, b, axes)], cases[0], more_inputs=cases[1:], rtol=tol, atol=tol
        )


def test_tensorsolve_mixed_dtypes_and_failures_like_numpy(rng):
    _, tensorsolve = _tensor_ops()
    a = pt.tensor3("a", dtype="float32")
    b = pt.vector("b")
    compare_onnx_and_py(
        [a, b],
        [tensorsolve(a, b)],
        [rng.normal(size=(6, 2, 3)).astype("float32"), rng.normal(size=6)],
        rtol=1e-10,
    )
    a = pt.tensor3("a")
    fn = pytensor.function([a, b], tensorsolve(a, b), mode="ONNX")
    singular = rng.normal(size=(6, 2, 3))
    singular[3] = singular[1]
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        np.linalg.tensorsolve(singular, np.ones(6))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        fn(singular, np.ones(6))
    with pytest.raises(np.linalg.LinAlgError, match=r"prod\(a.shape\[b.ndim:\]\)"):
        fn(rng.normal(size=(5, 2, 3)), np.ones(5))  # 30 entries, 6 unknowns
    with pytest.raises(ValueError, match="b must have as many entries"):
        fn(rng.normal(size=(6, 2, 3)), np.ones(5))  # a 6 x 6 matrix, b of 5


def test_tensorsolve_refused_unless_its_result_is_a_matrix():
    from pt_onnxscript import UnsupportedOpError

    _, tensorsolve = _tensor_ops()
    a, b = pt.tensor3("a"), pt.matrix("b")
    with pytest.raises(UnsupportedOpError, match="types its result as a matrix"):
        export_onnx(([a, b], [tensorsolve(a, b)]))


def _square_matrix_ops():
    from pytensor.tensor import linalg as slinalg

    return {
        "det": (lambda a: pt.linalg.det(a), np.linalg.LinAlgError, "must be square"),
        "slogdet": (lambda a: pt.linalg.slogdet(a)[1], np.linalg.LinAlgError, "must be square"),
        "inv": (lambda a: pt.linalg.inv(a), np.linalg.LinAlgError, "must be square"),
        "expm": (lambda a: slinalg.expm(a), np.linalg.LinAlgError, "must be square"),
        "cholesky": (lambda a: pt.linalg.cholesky(a), ValueError, "expected to be square"),
        "solve": (lambda a: pt.linalg.solve(a, a[:, 0]), ValueError, "Expected square matrix"),
        "solve_triangular": (
            lambda a: solve_triangular(a, a[:, 0]),
            ValueError,
            "expected square matrix",
        ),
        "cho_solve": (lambda a: cho_solve((a, True), a[:, 0]), ValueError, "c is not square"),
        "eigh": (lambda a: pt.linalg.eigh(a)[0], ValueError, 'expected square "a" matrix'),
        "schur": (lambda a: slinalg.schur(a)[0], ValueError, "expected square matrix"),
        "lu": (lambda a: slinalg.lu(a)[1], NotImplementedError, "LU of a non-square matrix"),
        "lu_factor": (
            lambda a: slinalg.lu_factor(a)[0],
            NotImplementedError,
            "LU of a non-square matrix",
        ),
    }


@pytest.mark.parametrize("name", list(_square_matrix_ops()))
def test_a_non_square_matrix_raises_where_pytensor_does(name, rng):
    """Ops of square matrices refuse a non-square one at run time, as PyTensor does (det,
    slogdet and inv of a tall matrix gave a value: LU factored it as if it were n x n; lu and
    lu_factor gave factors of the wrong shapes), and at export when its shape says so."""
    from pt_onnxscript import UnsupportedOpError

    build, exc_type, message = _square_matrix_ops()[name]
    a = pt.matrix("a")
    fn = pytensor.function([a], build(a), mode="ONNX")
    for shape in [(4, 3), (3, 4), (3, 1), (1, 3), (3, 0)]:
        with pytest.raises(exc_type, match=message):
            fn(rng.normal(size=shape))
    square = rng.normal(size=(3, 3))
    square = square @ square.T + 3 * np.eye(3)
    compare_onnx_and_py([a], [build(a)], [square], rtol=1e-10, atol=1e-12)
    static = pt.matrix("a", shape=(4, 3))
    try:
        out = build(static)
    except ValueError:
        return  # PyTensor refuses it when it builds the graph
    with pytest.raises(UnsupportedOpError, match="of a 4 x 3 matrix"):
        export_onnx(([static], [out]))


def test_a_batch_of_non_square_matrices_raises(rng):
    a = pt.tensor3("a")
    fn = pytensor.function([a], [pt.linalg.det(a), pt.linalg.inv(a)], mode="ONNX")
    with pytest.raises(np.linalg.LinAlgError, match="must be square"):
        fn(rng.normal(size=(2, 4, 3)))


def test_matrices_known_square_are_not_checked():
    """No square check where both dims are known equal: static, or one named dim."""

    def checks(model):
        return [node.name for node in model.graph.node if "must be square" in node.name]

    a = pt.matrix("a")
    assert checks(export_onnx(([a], [pt.linalg.det(a)]))) != []
    # A name given to two dims says they should be equal, not that they are.
    assert checks(export_onnx(([a], [pt.linalg.det(a)]), dims={"a": ("n", "n")})) != []
    x = pt.vector("x")
    outer = pt.linalg.det(pt.outer(x, x) + x)
    assert checks(export_onnx(([x], [outer]), dims={"x": ("n",)})) == []
    static = pt.matrix("a", shape=(3, 3))
    assert checks(export_onnx(([static], [pt.linalg.det(static)]))) == []
