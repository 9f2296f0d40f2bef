"""Orthogonal decompositions: QR by Householder reflections; SVD and pinv by Jacobi
rotations; eigh by Jacobi rotations for small matrices, else by inverse iteration on the
tridiagonal form (whose eigenvalues, and eigvalsh's: ops/symmetric_eigenvalues.py)."""

import numpy as np

from pt_onnxscript.ops.common import (
    INT64_MAX,
    any_of,
    branch,
    constant,
    ints,
    loop,
    pad_zeros,
    raise_if,
    range_to,
)
from pt_onnxscript.ops.linalg import (
    block_size,
    diagonal,
    float_output_check,
    lower_factor,
    solve_triangular,
    square_float_check,
    square_matrices,
    stacked_rows,
    swap_last,
    symmetric,
    triangular_inverse,
)
from pt_onnxscript.ops.symmetric_eigenvalues import (
    power_of_two_scale,
    symmetric_eigenvalues,
    tridiagonal_eigenvalues,
    tridiagonal_form,
)
from pt_onnxscript.ops.tridiagonal import gttrf, gttrs, swapped_rows
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.decomposition.eigen import Eigh, Eigvalsh
    from pytensor.tensor.linalg.decomposition.qr import QR
    from pytensor.tensor.linalg.decomposition.svd import SVD
    from pytensor.tensor.linalg.inverse import MatrixPinv
    from pytensor.tensor.linalg.solvers.lstsq import Lstsq

    EighGrad = EigvalshGrad = None  # PyTensor 3's eigh gradients are graphs of other Ops
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.nlinalg import SVD, Eigh, EighGrad, Lstsq, MatrixPinv
    from pytensor.tensor.slinalg import QR, Eigvalsh, EigvalshGrad


def _dim(g, a, axis: int):
    """Length `axis` of `a`, 0-d int64."""
    return g.Squeeze(g.Shape(a, start=axis, end=axis + 1 if axis != -1 else None), ints(g, [0]))


def _outer(g, u, v):
    """u v^T for (..., m) `u` and (..., n) `v`: (..., m, n)."""
    return g.Mul(g.Unsqueeze(u, ints(g, [-1])), g.Unsqueeze(v, ints(g, [-2])))


def _square_identity(g, a, size, dtype: str):
    """Identity matrices (size x size) for each matrix of the batch of `a`."""
    eye = g.Cast(_diagonal_mask(g, size), to=onnx_dtype(dtype))
    length = g.Unsqueeze(size, ints(g, [0]))
    return g.Expand(eye, g.Concat(g.Shape(a, start=0, end=-2), length, length, axis=0))


# QR's panels: the columns of a panel take one Loop step each on the panel alone, then the
# panel's reflectors reach the rest at once. 16 was as fast as 32 at n = 200 and faster for
# small matrices (each panel's block reflector and its MatMuls are QR_BLOCK wide).
QR_BLOCK = 16


def householder_qr(g, a, dtype: str, rank: int, with_q: bool = True, size: int | None = None):
    """geqrf's factorization of the matrices `a` (..., m, n) of rank `rank` (min(m, n) of
    static size `size` if known): the packed result (R on and above the diagonal, the
    reflectors' vectors below it), the reflectors' coefficients tau (..., k) for
    k = min(m, n), and Q = H_0 ... H_{k-1} (..., m, m) if `with_q` (else None).

    LAPACK's conventions (dlarfg), so the factors are SciPy's: the reflector of column j makes
    R[j, j] = -sign(a_jj) ||a[j:, j]|| with v[0] = 1, and is the identity (tau = 0) when the
    column is already zero below the diagonal.

    Blocked as geqrf, one Loop step per panel of B columns, carrying the columns right of it:
    the panel's reflectors are made and applied column by column on the panel alone
    (_qr_panel), then to the columns right of it at once in compact WY form, A -= V T^T (V^T
    A), and to Q, Q -= (Q V) T V^T (as orgqr), all MatMuls."""
    block = min(block_size(size), QR_BLOCK)
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    k = g.Min(m, n)
    count = g.Div(g.Add(k, ints(g, block - 1)), ints(g, block))
    # Zero columns up to whole panels (identity reflectors past min(m, n), sliced off).
    extra = g.Max(g.Sub(g.Mul(count, ints(g, block)), n), ints(g, 0))
    padded = pad_zeros(g, a, -1, after=g.Unsqueeze(extra, ints(g, [0])))
    rows = range_to(g, m)
    last_row = g.Max(g.Sub(m, ints(g, 1)), ints(g, 0))
    width = ints(g, [block])

    def step(g, p, rest, *q):
        panel = g.Slice(rest, ints(g, [0]), width, ints(g, [-1]))
        start = g.Mul(p, ints(g, block))
        columns = g.Min(ints(g, block), g.Sub(k, start))
        panel, taus, v = _qr_panel(g, panel, rows, last_row, start, columns, block, dtype, rank)
        t = _block_reflector(g, v, taus, block, dtype, rank)
        v_t = swap_last(g, v, rank)
        right = g.Slice(rest, width, ints(g, [INT64_MAX]), ints(g, [-1]))
        right = g.Sub(right, g.MatMul(v, g.MatMul(swap_last(g, t, rank), g.MatMul(v_t, right))))
        if not q:
            return [right, panel, taus]
        q = g.Sub(q[0], g.MatMul(g.MatMul(q[0], v), g.MatMul(t, v_t)))
        return [right, q, panel, taus]

    state = [padded, _square_identity(g, a, m, dtype)] if with_q else [padded]
    float_type = onnx_dtype(dtype)
    rest, *q, panels, taus = loop(g, count, state, step, "qr", stacked=[float_type] * 2)
    batch = g.Shape(a, start=0, end=-2)
    first = ints(g, [0])
    # The panels (count, ..., m, B) side by side (a Loop that ran no step stacks to (0,)).
    panels = g.Reshape(
        panels,
        g.Concat(g.Unsqueeze(count, first), batch, g.Unsqueeze(m, first), width, axis=0),
        allowzero=1,
    )
    panels = g.Transpose(panels, perm=[*range(1, rank - 1), rank - 1, 0, rank])
    columns = g.Unsqueeze(g.Mul(count, ints(g, block)), first)
    panels = g.Reshape(panels, g.Concat(batch, g.Unsqueeze(m, first), columns, axis=0), allowzero=1)
    packed = _leading(g, g.Concat(panels, rest, axis=-1), n, -1)
    taus = _leading(g, stacked_rows(g, taus, count, batch, block, None, rank), k, -1)
    return packed, taus, q[0] if with_q else None


def _qr_panel(g, panel, rows, last_row, start, count, block: int, dtype: str, rank: int):
    """The reflectors of the first `count` (0-d int64) columns of the panels (..., m, block)
    of columns start.. of the matrices (rows ..., m, 0-d int64 `start`), made and applied
    column by column on the panel, one Loop step each: the panel with R above and the
    vectors below the diagonal (dlarfg, dlarf), the coefficients tau (..., block) and the
    vectors V (..., m, block) (v[0] = 1; zero for an identity reflector and past `count`)."""
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    positions = ints(g, np.arange(block))

    def step(g, i, panel):
        j = g.Add(start, i)  # its row; past m for the panels of a wide matrix
        column = g.Gather(panel, i, axis=-1)  # (..., m)
        alpha = g.Gather(column, g.Min(j, last_row), axis=-1)
        below, at = g.Greater(rows, j), g.Equal(rows, j)
        rest = g.Where(below, column, zero)
        trivial = g.Equal(g.ReduceSumSquare(rest, ints(g, [-1]), keepdims=0), zero)
        lower = g.Where(g.Less(rows, j), zero, column)
        norm = g.Sqrt(g.ReduceSumSquare(lower, ints(g, [-1]), keepdims=0))
        beta = g.Where(g.Less(alpha, zero), norm, g.Neg(norm))
        tau = g.Where(trivial, zero, g.Div(g.Sub(beta, alpha), beta))
        scale = g.Where(trivial, zero, g.Reciprocal(g.Sub(alpha, beta)))
        v = g.Where(at, one, g.Mul(rest, g.Unsqueeze(scale, ints(g, [-1]))))
        tau_v = g.Mul(g.Unsqueeze(tau, ints(g, [-1])), v)
        w = g.Squeeze(g.MatMul(g.Unsqueeze(tau_v, ints(g, [-2])), panel), ints(g, [-2]))
        diagonal = g.Unsqueeze(g.Where(trivial, alpha, beta), ints(g, [-1]))
        stored = g.Unsqueeze(g.Where(at, diagonal, g.Where(below, v, column)), ints(g, [-1]))
        panel = g.Where(
            g.Greater(positions, i),
            g.Sub(panel, _outer(g, v, w)),
            g.Where(g.Equal(positions, i), stored, panel),
        )
        return [panel, tau, g.Where(g.Unsqueeze(trivial, ints(g, [-1])), zero, v)]

    float_type = onnx_dtype(dtype)
    panel, taus, vectors = loop(g, count, [panel], step, "qr_panel", stacked=[float_type] * 2)
    # (count, ...) and (count, ..., m) stacks to (..., block) and (..., m, block), zeros past
    # count (a Loop that ran no step stacks to (0,)).
    batch = g.Shape(panel, start=0, end=-2)
    first = ints(g, [0])
    steps = g.Unsqueeze(count, first)
    taus = g.Reshape(taus, g.Concat(steps, batch, axis=0), allowzero=1)
    taus = g.Transpose(taus, perm=[*range(1, rank - 1), 0])
    vectors = g.Reshape(
        vectors, g.Concat(steps, batch, g.Shape(panel, start=-2, end=-1), axis=0), allowzero=1
    )
    vectors = g.Transpose(vectors, perm=[*range(1, rank), 0])
    missing = g.Unsqueeze(g.Sub(ints(g, block), count), first)
    return panel, pad_zeros(g, taus, -1, after=missing), pad_zeros(g, vectors, -1, after=missing)


def _block_reflector(g, v, taus, block: int, dtype: str, rank: int):
    """T (..., block, block) with H_0 .. H_block-1 = I - V T V^T (dlarft's compact WY form):
    T^-1 = diag(1 / tau) + the strict upper triangle of V^T V; 1 on the diagonal where
    tau = 0 (V's column is zero there, so T's row and column do nothing)."""
    gram = g.Trilu(g.MatMul(swap_last(g, v, rank), v), ints(g, 1), upper=1)
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    scale = g.Where(g.Equal(taus, zero), one, g.Reciprocal(taus))
    t_inverse = g.Add(
        gram, g.Mul(g.Unsqueeze(scale, ints(g, [-1])), constant(g, np.eye(block), dtype))
    )
    return swap_last(g, triangular_inverse(g, swap_last(g, t_inverse, rank), block), rank)


def _static_min(shape) -> int | None:
    """The least of the static dims `shape` (None if one is unknown)."""
    return None if None in shape else min(shape)


def _leading(g, x, count, axis: int):
    """x's first `count` entries along `axis`."""
    return g.Slice(x, ints(g, [0]), g.Unsqueeze(count, ints(g, [0])), ints(g, [axis]))


@register_check(QR)
def _check_qr(node):
    op = getattr(node.op, "core_op", node.op)
    if op.pivoting:
        return "qr with pivoting=True (column-pivoted QR, geqp3)"
    return float_output_check(node)


@register(QR)
@register_blockwise(QR)
def qr(g, node, a):
    """QR -> Householder reflections, blocked as geqrf, with geqrf's and orgqr's conventions
    (SciPy's signs); the modes as PyTensor's perform returns them."""
    op = getattr(node.op, "core_op", node.op)
    dtype = node.outputs[0].type.dtype
    var = node.inputs[0]
    rank = var.type.ndim
    a = a if var.type.dtype == dtype else g.Cast(a, to=onnx_dtype(dtype))
    with_q = op.mode in ("full", "economic")
    packed, taus, q = householder_qr(g, a, dtype, rank, with_q, _static_min(var.type.shape[-2:]))
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    k = g.Min(m, n)
    upper = g.Trilu(packed, ints(g, 0), upper=1)
    if op.mode == "r":
        return upper
    if op.mode == "full":
        return [q, upper]
    tall = g.Trilu(_leading(g, packed, k, -2), ints(g, 0), upper=1)
    if op.mode == "economic":
        return [_leading(g, q, k, -1), tall]
    return [packed, taus, tall]  # raw: triu(qr[:k]) is triu(qr) when m <= n


# Jacobi sweeps before a matrix counts as not converged (LinAlgError): each sweep squares the
# off-diagonal norm once the rotations are small, so ~6-10 sweeps reach rounding.
MOST_SWEEPS = 60


def _round_robin(g, m):
    """The round-robin pairings of players 0..m (m odd, or -1: none) as tables by round
    r < m, so a round reads its row of each instead of computing it: the pairs (p_i, q_i),
    i < h = (m + 1) / 2, that together touch every player once (the m rounds pair every
    two), (m, h) each; each player's position in (p, q) concatenated, and its partner,
    (m, m + 1) each."""
    rounds = g.Unsqueeze(range_to(g, g.Max(m, ints(g, 0))), ints(g, [-1]))
    i = range_to(g, g.Div(g.Add(m, ints(g, 1)), ints(g, 2)))
    p = g.Mod(g.Add(rounds, i), m)
    q = g.Where(g.Equal(i, ints(g, 0)), m, g.Mod(g.Sub(rounds, i), m))
    order = g.Concat(p, q, axis=-1)
    places = g.Expand(range_to(g, _dim(g, order, -1)), g.Shape(order))
    back = g.ScatterElements(order, order, places, axis=-1)
    partner = g.GatherElements(g.Concat(q, p, axis=-1), back, axis=-1)
    return p, q, back, partner


def _rotations(g, pairs, c, s):
    """The Jacobi rotations (c, s: (..., h)) of a round's `pairs` (a row of each of
    `_round_robin`'s tables) spread over every index i: its partner, and the factors of x_i
    and x_partner in its new value (c and -s for p_k, c and s for q_k)."""
    _, _, back, partner = pairs
    c_all = g.Gather(g.Concat(c, c, axis=-1), back, axis=-1)
    s_all = g.Gather(g.Concat(g.Neg(s), s, axis=-1), back, axis=-1)
    return partner, c_all, s_all


def _rotate(g, x, rotations, axis: int):
    """x with its entries along `axis` (-2: rows, -1: columns) rotated in pairs: x_p becomes
    c x_p - s x_q and x_q becomes s x_p + c x_q, for all pairs at once (`_rotations`)."""
    partner, c, s = rotations
    c, s = (g.Unsqueeze(t, ints(g, [-1 if axis == -2 else -2])) for t in (c, s))
    return g.Add(g.Mul(c, x), g.Mul(s, g.Gather(x, partner, axis=axis)))


def _diagonal_mask(g, size):
    """True on the diagonal of a size x size matrix."""
    index = range_to(g, size)
    return g.Equal(g.Unsqueeze(index, ints(g, [-1])), index)


def _off_diagonal(g, a, off):
    """The squared Frobenius norms of the matrices `a` off their diagonal (bool `off` masks
    it: a difference of the whole and the diagonal would lose it to rounding), and on all."""
    axes = ints(g, [-2, -1])
    zero = g.CastLike(ints(g, 0), a)
    return g.ReduceSumSquare(g.Where(off, a, zero), axes, keepdims=0), g.ReduceSumSquare(
        a, axes, keepdims=0
    )


def _rotation(g, a_pp, a_qq, a_pq, dtype):
    """c, s of the Jacobi rotation that diagonalizes [[a_pp, a_pq], [a_pq, a_qq]] (Golub and
    Van Loan's symmetric Schur decomposition, |angle| <= pi/4); none where a_pq = 0."""
    zero, one, two = (constant(g, v, dtype) for v in (0, 1, 2))
    rotated = g.Not(g.Equal(a_pq, zero))
    tau = g.Div(g.Sub(a_qq, a_pp), g.Mul(two, g.Where(rotated, a_pq, one)))
    sign = g.Where(g.Less(tau, zero), g.Neg(one), one)
    t = g.Div(sign, g.Add(g.Abs(tau), g.Sqrt(g.Add(one, g.Mul(tau, tau)))))
    t = g.Where(rotated, t, zero)
    c = g.Reciprocal(g.Sqrt(g.Add(one, g.Mul(t, t))))
    return c, g.Mul(t, c)


def _even(g, x, n, axes):
    """x with a zero row/column appended along `axes` when `n` is odd, and the even size: the
    extra index is the round robin's idle player, whose rotations are the identity."""
    odd = g.Mod(n, ints(g, 2))
    for axis in axes:
        x = pad_zeros(g, x, axis, after=g.Unsqueeze(odd, ints(g, [0])))
    return x, g.Add(n, odd)


def _tolerance(g, size, dtype):
    """(size eps)^2: the rounding that `size` rotations (or a dot product of length `size`)
    leave in an entry, squared, relative to the squared norms it is compared with."""
    scaled = g.Mul(
        g.Cast(g.Max(size, ints(g, 1)), to=onnx_dtype(dtype)),
        constant(g, np.finfo(dtype).eps, dtype),
    )
    return g.Mul(scaled, scaled)


def _sweeps(g, state, players, one_round, unconverged):
    """`state` after cyclic Jacobi sweeps (each the `players` - 1 rounds of the round robin,
    ``state = one_round(g, pairs, *state)``) while `unconverged(state[0])` holds for a matrix
    of the batch, at most MOST_SWEEPS; and the flags of the matrices still unconverged."""
    last = g.Sub(players, ints(g, 1))  # players 0..last, last odd (or -1: no player)
    tables = _round_robin(g, last)

    def round_(g, r, *state):
        return one_round(g, [g.Gather(table, r, axis=0) for table in tables], *state)

    def sweep(g, k, *state):
        state = loop(g, g.Max(last, ints(g, 0)), list(state), round_, "jacobi_round")
        return [any_of(g, unconverged(g, state[0])), *state]

    start = any_of(g, unconverged(g, state[0]))
    state = loop(g, ints(g, MOST_SWEEPS), state, sweep, "jacobi", condition=start)
    return state, unconverged(g, state[0])


def _sorted(g, values, n, largest: int):
    """The first `n` of `values` (..., N) sorted (descending if `largest`), and their order."""
    count = g.Unsqueeze(n, ints(g, [0]))
    return g.TopK(_leading(g, values, n, -1), count, axis=-1, largest=largest, sorted=1, _outputs=2)


def _columns_in_order(g, x, order):
    """The columns `order` (..., k) of the matrices `x` (..., m, N): (..., m, k)."""
    shape = g.Concat(g.Shape(x, end=-1), g.Shape(order, start=-1), axis=0)
    return g.GatherElements(x, g.Expand(g.Unsqueeze(order, ints(g, [-2])), shape), axis=-1)


def jacobi_eigen(g, a, dtype: str, rank: int):
    """The eigenvalues (..., n), ascending, and the eigenvectors (..., n, n) of the symmetric
    matrices `a` of rank `rank`, by cyclic Jacobi rotations in round-robin order (each round
    rotates n/2 disjoint pairs at once, on both sides) until the off-diagonal norm is at most
    n eps times the norm; and flags (..) of the matrices that did not converge in
    MOST_SWEEPS.

    Every rotation is of rows: J^T A J is J^T (J^T A)^T for a symmetric A, and the
    eigenvectors are kept transposed (V^T becomes J^T V^T), since ONNX Runtime gathers whole
    rows where it gathers columns element by element. The matrices are scaled exactly by
    powers of two to entries near 1 (power_of_two_scale), and the eigenvalues back: the
    rotations square entries (eigenvalues 10-30% off past 1e154 or below 1e-160 before)."""
    n = _dim(g, a, -1)
    scale = power_of_two_scale(g, a, dtype)
    a, size = _even(g, g.Mul(a, scale), n, [-2, -1])
    tolerance = _tolerance(g, n, dtype)
    off = g.Not(_diagonal_mask(g, size))

    def unconverged(g, a):
        off_norm, norm = _off_diagonal(g, a, off)
        return g.Greater(off_norm, g.Mul(tolerance, norm))

    def one_round(g, pairs, a, *vt):
        p, q, *_ = pairs
        d = diagonal(g, a)
        rows = g.Gather(a, p, axis=-2)
        shape = g.Concat(g.Shape(rows, end=-1), ints(g, [1]), axis=0)
        index = g.Expand(g.Unsqueeze(q, ints(g, [-1])), shape)
        a_pq = g.Squeeze(g.GatherElements(rows, index, axis=-1), ints(g, [-1]))
        c, s = _rotation(g, g.Gather(d, p, axis=-1), g.Gather(d, q, axis=-1), a_pq, dtype)
        rotations = _rotations(g, pairs, c, s)
        half = swap_last(g, _rotate(g, a, rotations, -2), rank)
        return [_rotate(g, x, rotations, -2) for x in (half, *vt)]

    vectors = _square_identity(g, a, size, dtype)
    (a, vectors), failed = _sweeps(g, [a, vectors], size, one_round, unconverged)
    # Ascending, as LAPACK's, the eigenvectors in the same order.
    values, order = _sorted(g, diagonal(g, a), n, largest=0)
    vectors = swap_last(g, vectors, rank)
    values = g.Div(values, g.Squeeze(scale, ints(g, [-1])))
    return values, _columns_in_order(g, _leading(g, vectors, n, -2), order), failed


# Inverse iteration's solves per eigenvector (the eigenvalues are accurate to a few ulps,
# so one solve grows the wanted component by ~1/eps; the second makes it win over an unlucky
# start, as dstein's extra iterations).
INVERSE_ITERATIONS = 2


# The largest matrices whose eigenvectors come from Jacobi's sweeps rather than inverse
# iteration: its fixed cost (the multisection, five Loops of n steps, a QR) made it 2.3x
# slower at n = 3 and 1.1x at n = 20, and 1.2x faster at n = 33, 1.4x at 50, 5.7x at 200.
JACOBI_LARGEST = 24


def symmetric_eigen(g, a, dtype: str, rank: int, size: int | None = None):
    """The eigenvalues (..., n), ascending, and eigenvectors (..., n, n), as columns in the
    same order, of the symmetric matrices `a` (..., n, n) of rank `rank` (n = `size` if
    known), both triangles given, and whether any matrix did not converge (0-d): by Jacobi's
    sweeps up to JACOBI_LARGEST, by inverse iteration above (chosen by an If where n is not
    known at export)."""

    def by_jacobi(g):
        values, vectors, failed = jacobi_eigen(g, a, dtype, rank)
        return [values, vectors, any_of(g, failed)]

    def by_inverse_iteration(g):
        never = g.Identity(constant(g, False, "bool"))  # a branch's output is a node's
        return [*inverse_iteration_eigen(g, a, dtype, rank, size), never]

    if size is not None:
        return (by_jacobi if size <= JACOBI_LARGEST else by_inverse_iteration)(g)
    dtypes = [onnx_dtype(dtype)] * 2 + [onnx_dtype("bool")]
    small = g.LessOrEqual(_dim(g, a, -1), ints(g, JACOBI_LARGEST))
    return g.If(
        small,
        then_branch=branch(g, "jacobi", by_jacobi, dtypes),
        else_branch=branch(g, "inverse_iteration", by_inverse_iteration, dtypes),
        _outputs=3,
    )


def inverse_iteration_eigen(g, a, dtype: str, rank: int, size: int | None = None):
    """The eigenvalues (..., n), ascending, and eigenvectors (..., n, n), as columns in the
    same order, of the symmetric matrices `a` (..., n, n) of rank `rank` (n = `size` if
    known), both triangles given: a = Q T Q^T (tridiagonal_form), T's eigenvalues by
    multisection (tridiagonal_eigenvalues) and its eigenvectors by inverse iteration, mapped
    back by Q."""
    scale = power_of_two_scale(g, a, dtype)
    d, e, q = tridiagonal_form(g, g.Mul(a, scale), dtype, with_q=True)
    values = tridiagonal_eigenvalues(g, d, e, dtype, rank, size)
    vectors = g.MatMul(q, tridiagonal_eigenvectors(g, d, e, values, dtype, rank, size))
    return g.Div(values, g.Squeeze(scale, ints(g, [-1]))), vectors


def tridiagonal_eigenvectors(g, d, e, values, dtype: str, rank: int, size: int | None = None):
    """Unit eigenvectors (..., n, n), as columns, of the symmetric tridiagonal matrices with
    diagonal `d` (..., n) and off-diagonal `e` (..., n - 1) for their eigenvalues `values`
    (..., n), ascending: LAPACK's inverse iteration (dstein), for all eigenvalues at once.

    Each x_j solves (T - s_j I) x_j = b_j by tridiagonal LU with partial pivoting (gttrf,
    one factorization per shift, vectorised over the shifts), U's pivots below eps |T| raised
    to it in sign (dlagts). The shifts are the eigenvalues moved apart to at least 10 eps |T|
    from the one before (dstein's perturbation: equal eigenvalues would give equal systems);
    the first b_j are fixed pseudo-random vectors, each later one the solution before it
    (INVERSE_ITERATIONS solves, each solution scaled to a largest entry of 1). Last, a
    Householder QR in ascending order makes the vectors orthonormal, each keeping its
    direction: dstein orthogonalizes each vector against those of its cluster before it at
    every step; elsewhere the vectors are orthogonal to ~eps already and the QR changes them
    by that. (A QR after each solve left residuals up to 2.4 n eps rather than 5.7 n eps in
    our tests of clusters, and took as long as the multisection at n = 10.)"""
    info = np.finfo(dtype)
    last = ints(g, [-1])
    n = _dim(g, d, -1)
    batch = g.Shape(d, start=0, end=-1)
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    zeros = g.Expand(zero, g.Concat(batch, ints(g, [1]), axis=0))
    largest_d = g.ReduceMax(g.Concat(g.Abs(d), zeros, axis=-1), last, keepdims=1)
    largest_e = g.ReduceMax(g.Concat(g.Abs(e), zeros, axis=-1), last, keepdims=1)
    norm = g.Add(largest_d, g.Add(largest_e, largest_e))  # (..., 1), T's norm within 3x
    norm = g.Where(g.Equal(norm, zero), one, norm)
    # s_j = max over k <= j of (w_k + (j - k) p), p = 10 eps |T|: a masked ReduceMax over k.
    index = range_to(g, n)
    apart = g.Mul(
        g.Cast(index, to=onnx_dtype(dtype)), g.Mul(constant(g, 10 * info.eps, dtype), norm)
    )
    earlier = g.LessOrEqual(index, g.Unsqueeze(index, last))  # (j, k): k <= j
    candidates = g.Where(
        earlier, g.Unsqueeze(g.Sub(values, apart), ints(g, [-2])), constant(g, -np.inf, dtype)
    )
    shifts = g.Add(g.ReduceMax(candidates, last, keepdims=0), apart)  # (..., n)

    # One system per shift: the shifts become a batch axis before T's rows.
    couplings = g.Expand(
        g.Unsqueeze(e, ints(g, [-2])), g.Concat(g.Shape(shifts), g.Shape(e, start=-1), axis=0)
    )
    diagonals = g.Sub(g.Unsqueeze(d, ints(g, [-2])), g.Unsqueeze(shifts, last))
    factors = gttrf(g, couplings, diagonals, couplings, dtype, rank)
    multipliers, pivots, upper, upper2, used = factors
    tolerance = g.Unsqueeze(g.Mul(constant(g, info.eps, dtype), norm), last)
    raised = g.Where(g.Less(pivots, zero), g.Neg(tolerance), tolerance)
    pivots = g.Where(g.Less(g.Abs(pivots), tolerance), raised, pivots)
    swapped = swapped_rows(g, used, n)

    rows_first = [rank - 2, *range(rank - 2), rank - 1]  # (..., rows, n) -> (rows, ..., n)
    by_columns = [*range(1, rank - 1), 0, rank - 1]
    length = g.Unsqueeze(n, ints(g, [0]))
    x = g.Expand(_fixed_uniforms(g, n, dtype), g.Concat(batch, length, length, axis=0))
    for _ in range(INVERSE_ITERATIONS):
        b = g.Unsqueeze(g.Transpose(x, perm=rows_first), last)  # (rows, ..., n, 1)
        solved = g.Squeeze(gttrs(g, multipliers, pivots, upper, upper2, swapped, b, n), last)
        x = g.Transpose(solved, perm=by_columns)
        x = g.Div(x, g.ReduceMax(g.Abs(x), ints(g, [-2]), keepdims=1))
    return _orthonormal(g, x, dtype, rank, size=size)[0]


# SplitMix64's finalizer (Steele et al. 2014): a counter's bits mixed to 64 random-looking bits.
_SPLITMIX = [(30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None)]


def _fixed_uniforms(g, n, dtype: str):
    """Fixed pseudo-random numbers in [-1, 1), (n, n) of `dtype` (SplitMix64 of each entry's
    flat index), the same on every runtime (integer arithmetic)."""
    count = g.Mul(n, n)
    z = g.Cast(g.Range(ints(g, 0), count, ints(g, 1)), to=onnx_dtype("uint64"))
    z = g.Mul(z, constant(g, 0x9E3779B97F4A7C15, "uint64"))  # wraps modulo 2^64
    for shift, multiplier in _SPLITMIX:
        z = g.BitwiseXor(z, g.BitShift(z, constant(g, shift, "uint64"), direction="RIGHT"))
        if multiplier is not None:
            z = g.Mul(z, constant(g, multiplier, "uint64"))
    bits = g.BitShift(z, constant(g, 11, "uint64"), direction="RIGHT")  # 53 bits
    uniforms = g.Mul(g.Cast(bits, to=onnx_dtype("float64")), constant(g, 2.0**-52, "float64"))
    uniforms = g.Sub(uniforms, constant(g, 1, "float64"))
    length = g.Unsqueeze(n, ints(g, [0]))
    uniforms = g.Reshape(uniforms, g.Concat(length, length, axis=0), allowzero=1)
    return uniforms if dtype == "float64" else g.Cast(uniforms, to=onnx_dtype(dtype))


def _orthonormal(g, x, dtype: str, rank: int, k=None, size: int | None = None):
    """The Householder QR's Q (..., m, m) of the matrices x (..., m, k), k <= m (`k` a 0-d
    int64, or None for square x), and its first k columns, each with the sign of x's column:
    Gram-Schmidt's vectors, to working accuracy (Q's other columns complete a basis)."""
    packed, _, q = householder_qr(g, x, dtype, rank, size=size)
    leading = q if k is None else _leading(g, q, k, -1)
    r = packed if k is None else _leading(g, packed, k, -2)
    negative = g.Less(diagonal(g, r), constant(g, 0, dtype))
    signs = g.Where(negative, constant(g, -1, dtype), constant(g, 1, dtype))
    return g.Mul(leading, g.Unsqueeze(signs, ints(g, [-2]))), q


def jacobi_svd(g, a, dtype: str, rank: int, with_vectors: bool = True, full: bool = True):
    """The singular values (..., k), descending, of the matrices `a` (..., m, n), k = min(m, n),
    and, if `with_vectors`, U (..., m, m) (full) or (..., m, k), and V^T (..., n, n) or
    (..., k, n): one-sided Jacobi (Hestenes), rotating pairs of columns of a (and of V, from
    the identity) until every pair is orthogonal to n eps relative to their norms, so a V =
    U diag(s) with the singular values to high relative accuracy. U's columns for zero
    singular values (and past k, if `full`) complete an orthonormal basis: the Householder QR
    of U's known columns gives it, with the signs of those columns kept. Last, the flags (..)
    of the matrices that did not converge in MOST_SWEEPS. The matrices are scaled exactly by
    powers of two to entries near 1 (power_of_two_scale), and the singular values back: the
    rotations multiply squared column norms (singular values 29% off at entries of 1e100 and
    1e-100, inf past 1e154, before)."""
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    k = g.Min(m, n)
    scale = power_of_two_scale(g, a, dtype)
    x, size = _even(g, g.Mul(a, scale), n, [-1])
    tolerance = _tolerance(g, g.Max(m, n), dtype)
    zero = constant(g, 0, dtype)
    off = g.Not(_diagonal_mask(g, size))

    # a's columns and V's are rotated as the rows of a^T and V^T: ONNX Runtime gathers whole
    # rows where it gathers columns element by element.
    def unconverged(g, xt):
        gram = g.MatMul(xt, swap_last(g, xt, rank))
        norms = diagonal(g, gram)
        bound = g.Mul(tolerance, _outer(g, norms, norms))
        worse = g.And(off, g.Greater(g.Mul(gram, gram), bound))
        flags = g.Cast(worse, to=onnx_dtype("uint8"))
        return g.Cast(g.ReduceMax(flags, ints(g, [-2, -1]), keepdims=0), to=onnx_dtype("bool"))

    def one_round(g, pairs, xt, *vt):
        x_p, x_q = g.Gather(xt, pairs[0], axis=-2), g.Gather(xt, pairs[1], axis=-2)
        columns = ints(g, [-1])
        a_pp = g.ReduceSumSquare(x_p, columns, keepdims=0)
        a_qq = g.ReduceSumSquare(x_q, columns, keepdims=0)
        a_pq = g.ReduceSum(g.Mul(x_p, x_q), columns, keepdims=0)
        rotations = _rotations(g, pairs, *_rotation(g, a_pp, a_qq, a_pq, dtype))
        return [_rotate(g, y, rotations, -2) for y in (xt, *vt)]

    vectors = [_square_identity(g, x, size, dtype)] if with_vectors else []
    state = [swap_last(g, x, rank), *vectors]
    (xt, *vectors), failed = _sweeps(g, state, size, one_round, unconverged)
    x = swap_last(g, xt, rank)
    norms = g.Sqrt(g.ReduceSumSquare(x, ints(g, [-2]), keepdims=0))
    values, order = _sorted(g, norms, n, largest=1)
    singular = g.Div(_leading(g, values, k, -1), g.Squeeze(scale, ints(g, [-1])))
    if not with_vectors:
        return singular, None, None, failed
    v = _columns_in_order(g, _leading(g, swap_last(g, vectors[0], rank), n, -2), order)
    inverse = g.Where(g.Equal(values, zero), zero, g.Reciprocal(values))
    u = g.Mul(
        _leading(g, _columns_in_order(g, x, order), k, -1),
        g.Unsqueeze(_leading(g, inverse, k, -1), ints(g, [-2])),
    )
    u, q = _orthonormal(g, u, dtype, rank, k)
    if full:
        u = g.Concat(
            u,
            g.Slice(q, g.Unsqueeze(k, ints(g, [0])), g.Unsqueeze(m, ints(g, [0])), ints(g, [-1])),
            axis=-1,
        )
    else:
        v = _leading(g, v, k, -1)
    return singular, u, swap_last(g, v, rank), failed


def _non_finite(g, x):
    """Whether any entry of `x` is NaN or infinite."""
    return any_of(g, g.Or(g.IsNaN(x), g.IsInf(x)))


def _guarded(g, outputs, failed, exc_type, message):
    """`outputs` (None: not computed), each made to raise when any of `failed` holds."""
    return [x if x is None else raise_if(g, failed, x, exc_type, message) for x in outputs]


NOT_FINITE = "array must not contain infs or NaNs"


def reads_lower(op) -> bool:
    """Which triangle an Eigh or Eigvalsh reads (PyTensor 2.38's Eigh says it by UPLO)."""
    return op.lower if hasattr(op, "lower") else op.UPLO == "L"


def _symmetric_eigen(g, node, inputs, with_vectors: bool, variables=None):
    """Eigenvalues (and eigenvectors) of the symmetric matrices whose triangle the node reads,
    or of the generalized problem a v = w b v for positive definite b: with b = L L^T, the
    standard problem of L^-1 a L^-T, its vectors mapped back by L^-T (so v^T b v = I).
    `inputs` are the ONNX values of `variables` (by default the node's inputs)."""
    variables = node.inputs if variables is None else variables
    op = getattr(node.op, "core_op", node.op)
    dtype = node.outputs[0].type.dtype
    rank, size = variables[0].type.ndim, variables[0].type.shape[-1]
    checked = (
        square_matrices(g, var, x, ValueError, f'expected square "{name}" matrix')
        for var, x, name in zip(variables, inputs, "ab", strict=False)
    )
    a, *b = (
        x if var.type.dtype == dtype else g.Cast(x, to=onnx_dtype(dtype))
        for var, x in zip(variables, checked, strict=True)
    )
    # SciPy's check_finite (of the whole matrices, both triangles), then LAPACK's failures.
    non_finite = _non_finite(g, a) if not b else g.Or(_non_finite(g, a), _non_finite(g, b[0]))
    a = symmetric(g, a, reads_lower(op), rank)
    if b:
        factor = lower_factor(g, b[0], dtype, reads_lower(op), rank, size)
        half = solve_triangular(g, factor, a, dtype, True, False, size=size)
        reduced = solve_triangular(
            g, factor, swap_last(g, half, rank), dtype, True, False, size=size
        )
        a = symmetric(g, reduced, True, rank)
    if with_vectors:
        values, vectors, failed = symmetric_eigen(g, a, dtype, rank, size)
        outputs = _guarded(
            g, [values, vectors], failed, np.linalg.LinAlgError, "eigh did not converge"
        )
    else:
        outputs = [symmetric_eigenvalues(g, a, dtype, rank, size), None]
    if b:
        if with_vectors:
            upper = swap_last(g, factor, rank)
            vectors = solve_triangular(g, upper, outputs[1], dtype, False, False, size=size)
            outputs = [outputs[0], vectors]
        corner = g.Gather(g.Gather(factor, ints(g, 0), axis=-1), ints(g, 0), axis=-1)
        not_definite = g.IsNaN(corner)  # potrf's NaN factor
        message = "eigh: the matrix b is not positive definite"
        outputs = _guarded(g, outputs, not_definite, np.linalg.LinAlgError, message)
    return _guarded(g, outputs, non_finite, ValueError, NOT_FINITE)


register_check(SVD, MatrixPinv)(float_output_check)
register_check(Eigh, Eigvalsh)(square_float_check)


@register(Eigh)
@register_blockwise(Eigh)
def eigh(g, node, *inputs):
    """Eigh -> symmetric_eigen (Jacobi rotations or inverse iteration): eigenvalues
    ascending as LAPACK's; the eigenvectors are unique only up to sign (and, for repeated
    eigenvalues, to a rotation of their eigenspace), so they may differ from LAPACK's by
    those."""
    values, vectors = _symmetric_eigen(g, node, inputs, with_vectors=True)
    return [values, vectors]


@register(Eigvalsh)
@register_blockwise(Eigvalsh)
def eigvalsh(g, node, *inputs):
    """Eigvalsh -> Householder tridiagonalization and multisection (symmetric_eigenvalues),
    ascending."""
    values, _ = _symmetric_eigen(g, node, inputs, with_vectors=False)
    return values


def _fold_triangle(g, x, lower: bool, rank: int):
    """tril(x) + triu(x, 1)^T (or the upper twin): the gradient with respect to the triangle
    an eigh reads, the other triangle's share folded onto it."""
    return g.Add(
        g.Trilu(x, ints(g, 0), upper=0 if lower else 1),
        swap_last(g, g.Trilu(x, ints(g, 1 if lower else -1), upper=1 if lower else 0), rank),
    )


def _spectral(g, v, weights, rank):
    """v diag(weights) v^T for the matrices v (..., n, n) and weights (..., n)."""
    return g.MatMul(g.Mul(v, g.Unsqueeze(weights, ints(g, [-2]))), swap_last(g, v, rank))


if EighGrad is not None:

    @register(EighGrad)
    @register_blockwise(EighGrad)
    def eigh_grad(g, node, x, w, v, gw, gv):
        """PyTensor 2.38's EighGrad -> v (diag(gw) + F o (v^T gv)^T) v^T with F[n, m] =
        1 / (w_n - w_m) off the diagonal, folded onto the triangle eigh read."""
        dtype = node.outputs[0].type.dtype
        rank = node.outputs[0].type.ndim
        w, v, gw, gv = (
            x if var.type.dtype == dtype else g.Cast(x, to=onnx_dtype(dtype))
            for var, x in zip(node.inputs[1:], (w, v, gw, gv), strict=True)
        )
        n = _dim(g, w, -1)
        same = _diagonal_mask(g, n)
        gaps = g.Sub(g.Unsqueeze(w, ints(g, [-1])), g.Unsqueeze(w, ints(g, [-2])))
        zero = constant(g, 0, dtype)
        inverse_gaps = g.Where(same, zero, g.Reciprocal(g.Where(same, constant(g, 1, dtype), gaps)))
        mixed = g.Mul(inverse_gaps, swap_last(g, g.MatMul(swap_last(g, v, rank), gv), rank))
        eye = g.Cast(same, to=onnx_dtype(dtype))
        inner = g.Add(g.Mul(eye, g.Unsqueeze(gw, ints(g, [-2]))), mixed)
        grad = g.MatMul(g.MatMul(v, inner), swap_last(g, v, rank))
        return _fold_triangle(g, grad, reads_lower(getattr(node.op, "core_op", node.op)), rank)

    @register(EigvalshGrad)
    @register_blockwise(EigvalshGrad)
    def eigvalsh_grad(g, node, a, b, gw):
        """PyTensor 2.38's EigvalshGrad -> with w, v = eigh(a, b): v diag(gw) v^T for a and
        -v diag(gw w) v^T for b, each folded onto the triangle read."""
        op = getattr(node.op, "core_op", node.op)
        dtype = node.outputs[0].type.dtype
        rank = node.outputs[0].type.ndim
        w, v = _symmetric_eigen(g, node, [a, b], True, variables=node.inputs[:2])
        gw = gw if node.inputs[2].type.dtype == dtype else g.Cast(gw, to=onnx_dtype(dtype))
        grad_a = _spectral(g, v, gw, rank)
        grad_b = g.Neg(_spectral(g, v, g.Mul(gw, w), rank))
        return [_fold_triangle(g, x, op.lower, rank) for x in (grad_a, grad_b)]


def _as_output_dtype(g, node, x):
    dtype = node.outputs[0].type.dtype
    return x if node.inputs[0].type.dtype == dtype else g.Cast(x, to=onnx_dtype(dtype))


def svd_any_shape(
    g,
    a,
    dtype: str,
    rank: int,
    shape,
    with_vectors=True,
    full=True,
    message: str = "SVD did not converge",
):
    """jacobi_svd of the matrices `a` of static `shape` (None where unknown), or of their
    transposes, the factors swapped back, when they are wide: the rotations act on the
    shorter side (a wide matrix's surplus columns, rounding noise once the rest is
    orthogonal, would never converge). A symbolic shape decides at run time, by an If.
    Raises NumPy's LinAlgError for a matrix with NaN or infinite entries, or that does not
    converge."""
    m, n = shape

    def factored(g, wide: bool):
        x = swap_last(g, a, rank) if wide else a
        values, u, vt, failed = jacobi_svd(g, x, dtype, rank, with_vectors, full)
        if not with_vectors:
            return [values, failed]
        if wide:
            u, vt = swap_last(g, vt, rank), swap_last(g, u, rank)
        return [values, u, vt, failed]

    if m is not None and n is not None:
        results = factored(g, n > m)
    else:
        wide = g.Greater(_dim(g, a, -1), _dim(g, a, -2))
        dtypes = [onnx_dtype(dtype)] * (3 if with_vectors else 1) + [onnx_dtype("bool")]
        results = g.If(
            wide,
            then_branch=branch(g, "wide", lambda g: factored(g, True), dtypes),
            else_branch=branch(g, "tall", lambda g: factored(g, False), dtypes),
            _outputs=len(dtypes),
        )
    *results, failed = results
    if not with_vectors:
        results += [None, None]
    failed = g.Or(any_of(g, failed), _non_finite(g, a))
    return _guarded(g, results, failed, np.linalg.LinAlgError, message)


@register(SVD)
@register_blockwise(SVD)
def svd(g, node, a):
    """SVD -> one-sided Jacobi: singular values descending, to high relative accuracy; the
    singular vectors are unique only up to sign (and, for repeated singular values, to a
    rotation), so they may differ from LAPACK's by those."""
    op = getattr(node.op, "core_op", node.op)
    var = node.inputs[0]
    a = _as_output_dtype(g, node, a)
    dtype = node.outputs[0].type.dtype
    shape = var.type.shape[-2:]
    values, u, vt = svd_any_shape(
        g, a, dtype, var.type.ndim, shape, op.compute_uv, op.full_matrices
    )
    return [u, values, vt] if op.compute_uv else values


# NumPy's default cut-off of pinv: singular values up to rcond times the largest count as zero.
PINV_RCOND = 1e-15


@register(MatrixPinv)
@register_blockwise(MatrixPinv)
def pinv(g, node, a):
    """MatrixPinv -> V diag(1/s) U^T over the singular values above PINV_RCOND times the
    largest (NumPy's pinv); with hermitian=True, from the eigenvalues of the lower triangle
    (as NumPy's eigh-based path)."""
    op = getattr(node.op, "core_op", node.op)
    dtype = node.outputs[0].type.dtype
    rank = node.inputs[0].type.ndim
    a = _as_output_dtype(g, node, a)
    if op.hermitian:
        a = symmetric(g, a, True, rank)
        values, u, failed = symmetric_eigen(g, a, dtype, rank, node.inputs[0].type.shape[-1])
        (values,) = _guarded(g, [values], failed, np.linalg.LinAlgError, "eigh did not converge")
        # LAPACK's eigenvalues of a matrix with NaN or infinite entries are NaN: so is pinv.
        bad = g.Or(g.IsNaN(a), g.IsInf(a))
        bad = g.ReduceMax(g.Cast(bad, to=onnx_dtype("uint8")), ints(g, [-2, -1]), keepdims=0)
        bad = g.Cast(g.Unsqueeze(bad, ints(g, [-1])), to=onnx_dtype("bool"))
        values = g.Where(bad, constant(g, np.nan, dtype), values)
        v = u
        magnitude = g.Abs(values)
    else:
        shape = node.inputs[0].type.shape[-2:]
        values, u, vt = svd_any_shape(g, a, dtype, rank, shape, full=False)
        v, magnitude = swap_last(g, vt, rank), values
    largest = g.ReduceMax(
        g.Concat(
            magnitude,
            g.Expand(
                constant(g, [0], dtype), g.Concat(g.Shape(magnitude, end=-1), ints(g, [1]), axis=0)
            ),
            axis=-1,
        ),
        ints(g, [-1]),
        keepdims=1,
    )
    zero = constant(g, 0, dtype)
    # Not (|s| <= cutoff): a NaN stays, and makes the result NaN.
    kept = g.Not(g.LessOrEqual(magnitude, g.Mul(constant(g, PINV_RCOND, dtype), largest)))
    inverse = g.Where(kept, g.Reciprocal(g.Where(kept, values, constant(g, 1, dtype))), zero)
    return g.MatMul(g.Mul(v, g.Unsqueeze(inverse, ints(g, [-2]))), swap_last(g, u, rank))


@register_check(Lstsq)
def _check_lstsq(node):
    if node.inputs[1].type.ndim != 2:
        return (
            "lstsq of a vector b (PyTensor's Lstsq says its solution is a matrix, NumPy "
            "returns a vector); pass b[:, None]"
        )
    return None


@register(Lstsq)
def lstsq(g, node, a, b, rcond):
    """Lstsq -> np.linalg.lstsq from the SVD a = U diag(s) V^T: x = V diag(1/s) U^T b over the
    singular values above rcond times the largest (machine epsilon for a negative rcond, as
    gelsd), their count as the rank, and the squared residuals per column of b when the rank
    is N < M (an empty vector otherwise), in float64 as the Op's outputs."""
    float64 = onnx_dtype("float64")
    a, b, rcond = (g.Cast(x, to=float64) for x in (a, b, rcond))
    shape = node.inputs[0].type.shape
    s, u, vt = svd_any_shape(
        g,
        a,
        "float64",
        2,
        shape,
        full=False,
        message="SVD did not converge in Linear Least Squares",
    )
    epsilon = constant(g, np.finfo(np.float64).eps, "float64")
    rcond = g.Where(g.Less(rcond, constant(g, 0, "float64")), epsilon, rcond)
    largest = g.ReduceMax(g.Concat(s, constant(g, [0], "float64"), axis=0), keepdims=0)
    kept = g.Greater(s, g.Mul(rcond, largest))
    zero = constant(g, 0, "float64")
    inverse = g.Where(kept, g.Reciprocal(g.Where(kept, s, constant(g, 1, "float64"))), zero)
    x = g.MatMul(
        g.Mul(swap_last(g, vt, 2), g.Unsqueeze(inverse, ints(g, [-2]))), swap_last(g, u, 2)
    )
    x = g.MatMul(x, b)
    rank = g.ReduceSum(g.Cast(kept, to=onnx_dtype("int64")), keepdims=0)
    m, n = _dim(g, a, -2), _dim(g, a, -1)
    residual = g.Sub(b, g.MatMul(a, x))
    squares = g.ReduceSum(g.Mul(residual, residual), ints(g, [0]), keepdims=0)
    full_rank = g.And(g.Equal(rank, n), g.Greater(m, n))
    count = g.Where(full_rank, g.Shape(squares), ints(g, [0]))
    residuals = g.Slice(squares, ints(g, [0]), count, ints(g, [0]))
    return [x, residuals, g.Cast(rank, to=onnx_dtype(node.outputs[2].type.dtype)), s]
