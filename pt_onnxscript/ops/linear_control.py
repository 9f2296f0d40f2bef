"""The Sylvester equation A X + X B = C (SolveSylvester), and so the continuous Lyapunov
equation and the bilinear method of the discrete one, whose PyTensor graphs call it; TRSYL,
LAPACK's solver of that equation for matrices in real Schur form; and the discrete algebraic
Riccati equation (SolveDiscreteARE).

Small systems (m n up to KRONECKER_MOST) are solved in Kronecker form, (A kron I_n + I_m kron
B^T) vec(X) = vec(C) (row-major vec), by the blocked LU of ops/linalg.py: O((m n)^3) work in
MatMul, and no decomposition. Larger ones take the real Schur form R = V^T B V of the smaller
matrix (say B; else the transposed equation, B^T X^T + X^T A^T = C^T), as Bartels and Stewart
(and PyTensor, with both matrices and trsyl) do, but keep the other one whole: A Y + Y R = C V
for Y = X V is solved column block by column block of R (`trsyl_columns`), each block's 1 or
2 columns of Y a linear system in m or 2 m unknowns solved by LU. Where a system is singular
(A and -B share an eigenvalue) the result is NaN; LAPACK's trsyl perturbs the system instead.

The discrete Lyapunov equation X = A X A^T + Q (PyTensor's bilinear method) takes Smith's
doubling where A's spectral radius is below 1, else PyTensor's bilinear method (a continuous
Lyapunov equation, so SolveSylvester). See `solve_discrete_lyapunov`.

The Riccati equation A^T X A - X - (A^T X B)(R + B^T X B)^-1 (B^T X A) + Q = 0 is solved by
the structure-preserving doubling algorithm (Chu, Fan, Lin and Wang, 2004; Lin and Xu, 2006):
MatMul and one LU per step, quadratically convergent, where PyTensor (as SciPy) takes an
ordered QZ decomposition of the extended symplectic pencil. See `solve_discrete_are`.
"""

import numpy as np

from pt_onnxscript.ops.blockwise import flatten_batch, loop_over_batch
from pt_onnxscript.ops.common import (
    any_last,
    any_of,
    branch,
    constant,
    ints,
    loop,
    raise_if,
)
from pt_onnxscript.ops.compile import op_from_graph
from pt_onnxscript.ops.decompositions import _dim, _non_finite, _square_identity
from pt_onnxscript.ops.linalg import (
    BLOCK,
    _as,
    _columns,
    _nan_where,
    _singular,
    lu_solve_system,
    swap_last,
)
from pt_onnxscript.ops.schur import real_schur
from pt_onnxscript.registry import register, register_blockwise
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.solvers.linear_control import (
        TRSYL,
        SolveBilinearDiscreteLyapunov,
        SolveDiscreteARE,
        SolveSylvester,
    )
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.linear_control import (
        TRSYL,
        SolveBilinearDiscreteLyapunov,
        SolveDiscreteARE,
        SolveSylvester,
    )

# The largest m n solved in Kronecker form (benchmarks/sylvester.py: the Kronecker form runs
# 5x faster at m = n = 8 and 1.5x at 24, the Schur form 1.25x at 32 and 3.7x at 45).
KRONECKER_MOST = 768


def _kron_identity(g, a, size, left: bool):
    """a kron I_size (left) or I_size kron a, for the matrices a (..., k, k): (..., k s, k s)."""
    eye = g.EyeLike(g.ConstantOfShape(g.Concat(size, size, axis=0)), dtype=a.dtype)
    batch = g.Shape(a, start=0, end=-2)
    k = g.Shape(a, start=-1)
    if left:  # [i, p, j, q] = a[i, j] eye[p, q]
        blocks = g.Mul(g.Unsqueeze(a, ints(g, [-3, -1])), g.Unsqueeze(eye, ints(g, [-4, -2])))
    else:  # [p, i, q, j] = eye[p, q] a[i, j]
        blocks = g.Mul(g.Unsqueeze(eye, ints(g, [-3, -1])), g.Unsqueeze(a, ints(g, [-4, -2])))
    side = g.Mul(k, size)
    return g.Reshape(blocks, g.Concat(batch, side, side, axis=0), allowzero=1)


def _kronecker(g, a, b, c, dtype: str, rank: int, b_rank: int):
    """X of A X + X B = C from (A kron I_n + I_m kron B^T) vec(X) = vec(C) by LU; NaN where
    that system is singular."""
    m = g.Shape(c, start=-2, end=-1)
    n = g.Shape(c, start=-1)
    size = g.Mul(m, n)
    system = g.Add(
        _kron_identity(g, a, n, left=True),
        _kron_identity(g, swap_last(g, b, b_rank), m, left=False),
    )
    rhs = g.Reshape(
        c, g.Concat(g.Shape(c, start=0, end=-2), size, ints(g, [1]), axis=0), allowzero=1
    )
    x, pivots = lu_solve_system(g, system, rhs, dtype, rank, None)
    x = _nan_where(g, _singular(g, pivots, dtype), x, dtype)  # as Solve does
    # (..., m, n): x's batch dims (the broadcast of the inputs'), then c's matrix dims.
    shape = g.Concat(g.Shape(x, start=0, end=-2), g.Shape(c, start=-2), axis=0)
    return g.Reshape(x, shape, allowzero=1)


def trsyl_columns(g, a, r, f, dtype: str, large: bool = False):
    """Y with a Y + Y r = f for a (m, m), f (m, n) and r (n, n) upper quasi-triangular (real
    Schur form: 1 x 1 and 2 x 2 diagonal blocks), and whether a system below was singular.

    One Loop step per diagonal block of r, left to right: with the columns of Y before it
    known (the others still zero), a 1 x 1 block r_jj gives (a + r_jj I) y_j = f_j - Y r_j,
    a 2 x 2 block [[r11, r12], [r21, r22]] the system [[a + r11 I, r21 I], [r12 I, a + r22 I]]
    [y1; y2] = [f1 - Y r_1; f2 - Y r_2] in 2 m unknowns; either is solved by one LU (with
    `large`, m is known to be above SMALL_BLOCKS: the blocked LU alone, without the Ifs that
    choose smaller blocks for small matrices)."""
    m, n = _dim(g, a, 0), _dim(g, r, 0)
    m_vector = g.Unsqueeze(m, ints(g, [0]))
    zero = constant(g, 0, dtype)
    eye = _square_identity(g, a, m, dtype)
    float_type, int_type = onnx_dtype(dtype), onnx_dtype("int64")

    def step(g, _, y, column, bad):
        after = g.Add(column, ints(g, 1))
        below = g.Gather(g.Gather(r, g.Min(after, g.Sub(n, ints(g, 1))), axis=0), column, axis=0)
        pair = g.And(g.Less(after, n), g.Not(g.Equal(below, zero)))

        def single(g):
            columns = g.Unsqueeze(column, ints(g, [0]))
            coefficients = g.Gather(r, columns, axis=1)  # (n, 1)
            rhs = g.Sub(g.Gather(f, columns, axis=1), g.MatMul(y, coefficients))
            r11 = g.Gather(g.Gather(coefficients, column, axis=0), ints(g, 0), axis=0)
            return [g.Add(a, g.Mul(r11, eye)), rhs, columns]

        def double(g):
            columns = g.Add(column, ints(g, [0, 1]))
            coefficients = g.Gather(r, columns, axis=1)  # (n, 2)
            rhs = g.Sub(g.Gather(f, columns, axis=1), g.MatMul(y, coefficients))  # (m, 2)
            block = g.Reshape(g.Gather(coefficients, columns, axis=0), ints(g, [-1]))
            r11, r12, r21, r22 = (g.Gather(block, ints(g, i), axis=0) for i in range(4))
            system = g.Concat(
                g.Concat(g.Add(a, g.Mul(r11, eye)), g.Mul(r21, eye), axis=1),
                g.Concat(g.Mul(r12, eye), g.Add(a, g.Mul(r22, eye)), axis=1),
                axis=0,
            )
            return [system, rhs, columns]

        types = [float_type, float_type, int_type]
        system, rhs, columns = g.If(
            pair,
            then_branch=branch(g, "trsyl_pair", double, types),
            else_branch=branch(g, "trsyl_single", single, types),
            _outputs=3,
        )
        width = g.Shape(columns)
        # The block's columns of Y stacked: (w m, 1), solved and back to (m, w).
        stacked = g.Reshape(g.Transpose(rhs, perm=[1, 0]), ints(g, [-1, 1]))
        size = BLOCK + 1 if large else None  # any static size above one block: the blocked LU
        x, pivots = lu_solve_system(g, system, stacked, dtype, 2, size)
        x = g.Transpose(g.Reshape(x, g.Concat(width, m_vector, axis=0)), perm=[1, 0])
        where = g.Expand(g.Unsqueeze(columns, ints(g, [0])), g.Concat(m_vector, width, axis=0))
        y = g.ScatterElements(y, where, x, axis=1)
        column = g.Add(column, g.Squeeze(width, ints(g, [0])))
        return [g.Less(column, n), y, column, g.Or(bad, _singular(g, pivots, dtype))]

    start = g.And(g.Greater(m, ints(g, 0)), g.Greater(n, ints(g, 0)))
    state = [g.Expand(zero, g.Shape(f)), ints(g, 0), constant(g, False, "bool")]
    y, _, bad = loop(g, None, state, step, "trsyl", condition=start)
    return y, bad


def _by_schur(g, a, b, c, dtype: str):
    """X of A X + X B = C for one system, through the real Schur form R = V^T B V: Y of
    A Y + Y R = C V by `trsyl_columns`, X = Y V^T."""
    r, v = real_schur(g, b, dtype)
    # m n > KRONECKER_MOST = 768 with n <= m: m >= 28 > the small LU blocks (16), so the
    # blocked LU is what its Ifs would choose anyway.
    y, singular = trsyl_columns(g, a, r, g.MatMul(c, v), dtype, large=True)
    return _nan_where(g, singular, g.MatMul(y, g.Transpose(v, perm=[1, 0])), dtype)


def _by_schur_of_smaller(g, a, b, c, dtype: str, m, n):
    """_by_schur of the equation or of its transpose, B^T X^T + X^T A^T = C^T, whichever
    decomposes the smaller matrix (chosen by an If where m or n is symbolic)."""
    if m is not None and n is not None:
        if n <= m:
            return _by_schur(g, a, b, c, dtype)
        t = [g.Transpose(x, perm=[1, 0]) for x in (b, a, c)]
        return g.Transpose(_by_schur(g, *t, dtype), perm=[1, 0])
    flip = g.Greater(_dim(g, b, 0), _dim(g, a, 0))

    def transposed(g, *values):
        return [g.Transpose(x, perm=[1, 0]) for x in values]

    float_type = onnx_dtype(dtype)
    a, b, c = g.If(
        flip,
        then_branch=branch(g, "sylvester_t", lambda g: transposed(g, b, a, c), [float_type] * 3),
        else_branch=branch(
            g, "sylvester", lambda g: [g.Identity(x) for x in (a, b, c)], [float_type] * 3
        ),
        _outputs=3,
    )
    x = _by_schur(g, a, b, c, dtype)
    return g.If(
        flip,
        then_branch=branch(g, "sylvester_t", lambda g: transposed(g, x), [float_type]),
        else_branch=branch(g, "sylvester", lambda g: [g.Identity(x)], [float_type]),
    )


@register(SolveSylvester)
@register_blockwise(SolveSylvester)
def solve_sylvester(g, node, a, b, c):
    """SolveSylvester -> the Kronecker form by LU up to m n = KRONECKER_MOST, else the real
    Schur form of the smaller matrix and a linear system per diagonal block (an If where m
    and n are symbolic); NaN where a system is singular (A and -B share an eigenvalue)."""
    dtype = node.outputs[0].type.dtype
    a, b, c = (_as(g, var, x, dtype) for var, x in zip(node.inputs, (a, b, c), strict=True))
    ranks = [var.type.ndim for var in node.inputs]
    m, n = node.inputs[2].type.shape[-2:]

    def kronecker(g):
        return _kronecker(g, a, b, c, dtype, max(ranks), ranks[1])

    def schur(g):
        def one(g, a, b, c):
            return [_by_schur_of_smaller(g, a, b, c, dtype, m, n)]

        if ranks == [2, 2, 2]:
            return one(g, a, b, c)[0]
        return loop_over_batch(g, node, [a, b, c], one)[0]  # one system after another

    if m is not None and n is not None:
        return kronecker(g) if m * n <= KRONECKER_MOST else schur(g)
    size = g.Mul(_dim(g, c, -2), _dim(g, c, -1))
    float_type = onnx_dtype(dtype)
    return g.If(
        g.LessOrEqual(size, ints(g, KRONECKER_MOST)),
        then_branch=branch(g, "sylvester_kronecker", lambda g: [kronecker(g)], [float_type]),
        else_branch=branch(g, "sylvester_schur", lambda g: [schur(g)], [float_type]),
    )


@register(TRSYL)
def trsyl(g, node, a, b, c):
    """TRSYL (A X + X B = C with B in real Schur form; A's form is not needed) ->
    `trsyl_columns`; NaN where a system is singular, where LAPACK's trsyl perturbs it (a batch
    runs through Blockwise's Loop)."""
    dtype = node.outputs[0].type.dtype
    a, b, c = (_as(g, var, x, dtype) for var, x in zip(node.inputs, (a, b, c), strict=True))
    y, singular = trsyl_columns(g, a, b, c, dtype)
    return _nan_where(g, singular, y, dtype)


# The most doubling steps of `solve_discrete_are`. Step k has squared the closed loop 2^k
# times: a closed-loop eigenvalue 1 - 1e-8 (DAREX #14) takes 31.
MOST_DOUBLINGS = 100


def _largest(g, x):
    """The largest |entry| of each matrix of `x` (k, m, n): (k,)."""
    return g.ReduceMax(g.Abs(x), ints(g, [-2, -1]), keepdims=0)


def _symmetrized(g, x, dtype: str):
    """(x + x^T) / 2 of each matrix of `x` (k, m, m)."""
    return g.Mul(g.Add(x, swap_last(g, x, 3)), constant(g, 0.5, dtype))


def _symmetric_part(g, x, dtype: str):
    """`_symmetrized` x, and whether x is farther from symmetric than sqrt(eps) relative
    (where the equation has no symmetric solution)."""
    tolerance = constant(g, np.sqrt(np.finfo(dtype).eps), dtype)
    far = g.Greater(_largest(g, g.Sub(x, swap_last(g, x, 3))), g.Mul(tolerance, _largest(g, x)))
    return _symmetrized(g, x, dtype), far


def _still_pending(g, x_next, x, a, dtype: str):
    """Which matrices of a doubling iteration go on: X still changing (relative eps) or A
    not yet vanished (below eps). NaN (a singular system, an overflow) stops a matrix too:
    the caller's checks of its X make it NaN or take another way."""
    eps = constant(g, np.finfo(dtype).eps, dtype)
    changing = g.Greater(_largest(g, g.Sub(x_next, x)), g.Mul(eps, _largest(g, x_next)))
    return g.Or(changing, g.Greater(_largest(g, a), eps))


def _doubling_loop(g, a, state, step, kind: str, most: int):
    """The final `state` of a Loop of at most `most` doubling steps on matrices (k, m, m)
    like `a`, `step(g, *state, pending)` returning the new state and which matrices go on,
    while any does; the last of the returned state is that flag. Empty matrices need no
    step (and their largest entry is undefined)."""
    pending = g.Expand(g.Greater(_dim(g, a, -1), ints(g, 0)), g.Shape(a, start=0, end=1))

    def body(g, _, *values):
        *state, pending = step(g, *values)
        return [any_last(g, pending), *state, pending]

    return loop(g, ints(g, most), [*state, pending], body, kind, condition=any_last(g, pending))


def _doubling(g, a, gain, h, size: int | None, dtype: str):
    """H of the structure-preserving doubling from A_0 = `a`, G_0 = `gain`, H_0 = `h` (k, m,
    m), and which matrices did not converge. Each step, with W = I + G H,

        A' = A W^-1 A,   G' = G + A W^-1 G A^T,   H' = H + A^T H W^-1 A,

    until, for every matrix, H stops changing (relative eps) and A has vanished (below eps:
    the closed loop is stable, so H is the stabilizing solution); at most MOST_DOUBLINGS
    steps."""
    m = _dim(g, a, -1)
    eye = _square_identity(g, a, m, dtype)

    def step(g, a, gain, h, _pending):
        w = g.Add(eye, g.MatMul(gain, h))
        solved, _pivots = lu_solve_system(g, w, g.Concat(a, gain, axis=-1), dtype, 3, size)
        wa, wg = _columns(g, solved, ints(g, 0), m), _columns(g, solved, m, g.Add(m, m))
        at = swap_last(g, a, 3)
        h_next = g.Add(h, g.MatMul(at, g.MatMul(h, wa)))
        gain = g.Add(gain, g.MatMul(a, g.MatMul(wg, at)))
        a = g.MatMul(a, wa)
        return [a, gain, h_next, _still_pending(g, h_next, h, a, dtype)]

    _, _, h, pending = _doubling_loop(g, a, [a, gain, h], step, "doubling", MOST_DOUBLINGS)
    return h, pending


def _not_a_solution(g, a, b, q, r, x, dtype: str, n_size: int | None):
    """Whether A^T X A - X + Q - (A^T X B)(R + B^T X B)^-1 (B^T X A) exceeds sqrt(eps) times
    its terms' largest entries (or is NaN): X is no solution."""
    xa, xb = g.MatMul(x, a), g.MatMul(x, b)
    at, bt = swap_last(g, a, 3), swap_last(g, b, 3)
    feedback, _ = lu_solve_system(g, g.Add(r, g.MatMul(bt, xb)), g.MatMul(bt, xa), dtype, 3, n_size)
    atxa = g.MatMul(at, xa)
    term = g.MatMul(g.MatMul(at, xb), feedback)
    residual = g.Sub(g.Add(g.Sub(atxa, x), q), term)
    terms = [_largest(g, v) for v in (atxa, x, q, term)]
    scale = g.Add(g.Add(terms[0], terms[1]), g.Add(terms[2], terms[3]))
    tolerance = constant(g, np.sqrt(np.finfo(dtype).eps), dtype)
    return g.Not(g.LessOrEqual(_largest(g, residual), g.Mul(tolerance, scale)))


@register(SolveDiscreteARE)
@register_blockwise(SolveDiscreteARE)
def solve_discrete_are(g, node, a, b, q, r):
    """SolveDiscreteARE -> the stabilizing X of A^T X A - X - (A^T X B)(R + B^T X B)^-1
    (B^T X A) + Q = 0 by structure-preserving doubling, for Q and R symmetric (their
    symmetric parts are used; farther than sqrt(eps) from symmetric: NaN).

    The doubling needs G = B R^-1 B^T: X = Q + Y, whose Y solves the equation with
    R' = R + B^T Q B (nonsingular where R is singular but Q reaches the inputs, as in a
    state-space model without measurement error; singular R' raises), G = B R'^-1 B^T,
    A' = A - B R'^-1 B^T Q A and Q' = A^T Q A' (positive semidefinite when Q and R are).
    NaN where the doubling does not converge to a stabilizing solution or its X fails the
    equation's residual test (no stabilizing solution: PyTensor gives NaN too). The doubling
    converges under the textbook conditions, (A, B) stabilizable and (A, Q) detectable; where
    an unstable mode of A is not seen by Q it stays at a non-stabilizing solution, and the
    result is NaN although a stabilizing solution may exist (PyTensor's QZ finds it)."""
    dtype = node.outputs[0].type.dtype
    values = [_as(g, var, x, dtype) for var, x in zip(node.inputs, (a, b, q, r), strict=True)]
    ranks = [var.type.ndim for var in node.inputs]
    batch, (a, b, q, r) = flatten_batch(g, values, [rank - 2 for rank in ranks], ranks)
    m_size, n_size = node.inputs[1].type.shape[-2:]
    q, q_far = _symmetric_part(g, q, dtype)
    r, r_far = _symmetric_part(g, r, dtype)
    bt = swap_last(g, b, 3)
    shifted = g.Add(r, g.MatMul(bt, g.MatMul(q, b)))
    # R'^-1 B^T and R'^-1 B^T Q A in one solve.
    qa = g.MatMul(q, a)
    solved, pivots = lu_solve_system(
        g, shifted, g.Concat(bt, g.MatMul(bt, qa), axis=-1), dtype, 3, n_size
    )
    m = _dim(g, a, -1)
    solved = raise_if(
        g,
        g.And(_singular(g, pivots, dtype), g.Greater(m, ints(g, 0))),
        solved,
        np.linalg.LinAlgError,
        "solve_discrete_are: R + B^T Q B is singular (R singular, and Q not reaching the "
        "inputs' directions). The ONNX translation solves the equation by doubling from "
        "X = Q, which needs it nonsingular; a nonsingular R (e.g. measurement error) works",
    )
    r_inv_bt, r_inv_btqa = _columns(g, solved, ints(g, 0), m), _columns(g, solved, m, g.Add(m, m))
    gain = g.MatMul(b, r_inv_bt)
    a_shifted = g.Sub(a, g.MatMul(b, r_inv_btqa))
    h = _symmetrized(g, g.MatMul(swap_last(g, a, 3), g.MatMul(q, a_shifted)), dtype)
    y, pending = _doubling(g, a_shifted, gain, h, m_size, dtype)
    x = _symmetrized(g, g.Add(q, y), dtype)
    residual = _not_a_solution(g, a, b, q, r, x, dtype, n_size)
    failed = g.Or(g.Or(pending, residual), g.Or(q_far, r_far))
    failed = g.And(failed, g.Greater(m, ints(g, 0)))
    x = _nan_where(g, failed, x, dtype)
    shape = g.Concat(batch, g.Shape(x, start=-2), axis=0)
    return g.Reshape(x, shape, allowzero=1)


# The most doubling steps of `solve_discrete_lyapunov`'s Smith iteration: step k has summed
# 2^k powers of A, so a spectral radius of 1 - 1e-15 converges in ~55.
MOST_SMITH_STEPS = 64


def _smith(g, a, q, dtype: str):
    """X = sum_j A^j Q A^jT, the solution of X = A X A^T + Q where the spectral radius of A is
    below 1, by Smith's doubling on matrices (k, n, n): X' = X + A X A^T, A' = A A, until,
    for every matrix, X stops changing (relative eps) and A has vanished (below eps); at
    most MOST_SMITH_STEPS steps. Returns X and which matrices did not converge (NaN stops a
    matrix too, so the caller also checks that X is finite)."""

    def step(g, a, x, _pending):
        x_next = g.Add(x, g.MatMul(a, g.MatMul(x, swap_last(g, a, 3))))
        a = g.MatMul(a, a)
        return [a, x_next, _still_pending(g, x_next, x, a, dtype)]

    _, x, pending = _doubling_loop(g, a, [a, q], step, "smith", MOST_SMITH_STEPS)
    return x, pending


@register(SolveBilinearDiscreteLyapunov)
def solve_discrete_lyapunov(g, node, a, q):
    """SolveBilinearDiscreteLyapunov (X = A X A^T + Q, batched) -> Smith's doubling, a few
    MatMuls per step, where it converges to a finite X (the spectral radius of A below 1,
    as in a stationary state-space model's covariance); otherwise, under an If, the bilinear
    method of PyTensor's inner graph (a continuous Lyapunov equation: SolveSylvester)."""
    dtype = node.outputs[0].type.dtype
    values = [_as(g, var, x, dtype) for var, x in zip(node.inputs, (a, q), strict=True)]
    ranks = [var.type.ndim for var in node.inputs]
    batch, (a_flat, q_flat) = flatten_batch(g, values, [rank - 2 for rank in ranks], ranks)
    x, pending = _smith(g, a_flat, q_flat, dtype)
    x = g.Reshape(x, g.Concat(batch, g.Shape(x, start=-2), axis=0), allowzero=1)
    float_type = onnx_dtype(dtype)
    return g.If(
        g.Or(any_of(g, pending), _non_finite(g, x)),
        then_branch=branch(
            g, "lyapunov_bilinear", lambda g: op_from_graph(g, node, a, q), [float_type]
        ),
        else_branch=branch(g, "lyapunov_smith", lambda g: [g.Identity(x)], [float_type]),
    )
