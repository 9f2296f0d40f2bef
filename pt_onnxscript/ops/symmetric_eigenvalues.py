"""Eigenvalues of symmetric matrices (Eigvalsh, and eigh's above its Jacobi sizes):
Householder reduction to a tridiagonal T (LAPACK's dsytd2, with its Q for eigh), then
multisection of all n eigenvalues of T at once by Sturm counts (dstebz's dlaebz, vectorised
over the eigenvalues and the points tried). eigh's vectors of T: decompositions.py.

Jacobi's sweeps take ~8 sweeps of n - 1 rounds, each rotating the whole matrix; here the
matrix work is n - 2 reflections, and what follows reads only T's 2n - 1 entries: each
multisection step runs the Sturm recurrence down T's rows once for every eigenvalue and
point, two elementwise nodes per row and a comparison per chunk of rows.
"""

import math

import numpy as np
import onnx_ir as ir

from pt_onnxscript.ops.common import INT64_MAX, any_of, constant, ints, loop, range_to
from pt_onnxscript.ops.linalg import diagonal
from pt_onnxscript.types import onnx_dtype

# Points tried in each eigenvalue's interval per multisection step: about POINT_BUDGET / n
# (n eigenvalues), at least 3 and at most 255. A node costs ONNX Runtime ~0.5 us plus its
# elements' work: small matrices take many points and few steps, large ones few points (of
# 3, 15 and 63 points, 63 ran fastest at n = 3, 15 at n = 50 and 3 at n = 200).
POINT_BUDGET = 768
# Rows of the Sturm recurrence per Loop step (ONNX Runtime pays ~2-4 us a Loop step; the
# rows padding n to a multiple of ROWS cost their nodes too).
ROWS = 4


def tridiagonal_form(g, a, dtype: str, with_q: bool = False):
    """The diagonal d (..., n) and off-diagonal e (..., n - 1) of T = Q^T a Q for the
    symmetric matrices `a` (..., n, n), both triangles given, and Q = H_0 H_1 ... if
    `with_q` (else None), as dsytd2 reduces them (lower):
    the reflection H_k = I - tau v v^T of step k maps column k's entries below the diagonal
    onto their first, e_k = beta, and updates the trailing matrix, a <- H_k a H_k, as
    a - v w^T - w v^T with w = p - (tau / 2) (p . v) v and p = tau a v. The matrices keep
    their size and take the whole update, which is H_k a H_k there too: v is 0 above row
    k + 1, so the diagonal above it stays as it is, and the rows and columns above it, which
    change, are not read again. A column with nothing to zero below its first entry
    reflects nothing (tau = 0, e_k its first entry), as dlarfg."""
    n = g.Squeeze(g.Shape(a, start=-1), ints(g, [0]))
    index = range_to(g, n)
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    last = ints(g, [-1])

    def step(g, k, t, betas, *q):
        row = g.Gather(t, k, axis=-2)  # (..., n): column k as well
        after = g.Add(k, ints(g, 1))
        below = g.Greater(index, after)
        alpha = g.Gather(row, g.Unsqueeze(after, ints(g, [0])), axis=-1)  # (..., 1)
        x = g.Where(below, row, zero)
        rest = g.ReduceSumSquare(x, last, keepdims=1)
        norm = g.Sqrt(g.Add(g.Mul(alpha, alpha), rest))
        beta = g.Where(g.Less(alpha, zero), norm, g.Neg(norm))  # -sign(alpha) |(alpha, x)|
        plain = g.Equal(rest, zero)
        tau = g.Where(plain, zero, g.Div(g.Sub(beta, alpha), beta))
        scale = g.Where(plain, zero, g.Reciprocal(g.Sub(alpha, beta)))
        v = g.Where(g.Equal(index, after), one, g.Mul(x, scale))
        p = g.Mul(tau, g.Squeeze(g.MatMul(t, g.Unsqueeze(v, last)), last))
        half = g.Mul(
            constant(g, -0.5, dtype), g.Mul(tau, g.ReduceSum(g.Mul(p, v), last, keepdims=1))
        )
        w = g.Add(p, g.Mul(half, v))
        columns = g.Concat(g.Unsqueeze(v, last), g.Unsqueeze(w, last), axis=-1)
        rows = g.Concat(g.Unsqueeze(w, ints(g, [-2])), g.Unsqueeze(v, ints(g, [-2])), axis=-2)
        betas = g.Concat(betas, g.Where(plain, alpha, beta), axis=-1)
        t = g.Sub(t, g.MatMul(columns, rows))
        if not q:
            return [t, betas]
        # Q H_k = Q - tau (Q v) v^T
        q_v = g.Mul(g.MatMul(q[0], g.Unsqueeze(v, last)), g.Unsqueeze(tau, last))
        return [t, betas, g.Sub(q[0], g.Mul(q_v, g.Unsqueeze(v, ints(g, [-2]))))]

    steps = g.Max(g.Sub(n, ints(g, 2)), ints(g, 0))
    none = g.Expand(zero, g.Concat(g.Shape(a, start=0, end=-2), ints(g, [0]), axis=0))
    state = [a, none]
    if with_q:
        eye = g.Cast(g.Equal(g.Unsqueeze(index, last), index), to=onnx_dtype(dtype))
        state.append(g.Expand(eye, g.Shape(a)))
    t, betas, *q = loop(g, steps, state, step, "tridiagonal")
    # The last off-diagonal entry is the trailing 2 x 2 block's, which no step reflects.
    below_diagonal = diagonal(
        g, g.Slice(t, ints(g, [1, 0]), ints(g, [INT64_MAX, -1]), ints(g, [-2, -1]))
    )
    tail = g.Slice(below_diagonal, g.Unsqueeze(steps, ints(g, [0])), ints(g, [INT64_MAX]), last)
    return diagonal(g, t), g.Concat(betas, tail, axis=-1), q[0] if with_q else None


def power_of_two_scale(g, a, dtype: str):
    """A power of two s (..., 1, 1) with max |s a| near 1 (1 for a zero matrix), within the
    dtype's normal numbers (a subnormal matrix is scaled by the largest: its inverse would be
    inf): the reductions and rotations square entries, which would overflow or underflow far
    from 1; a power of two scales them exactly."""
    largest = g.ReduceMax(g.Abs(a), ints(g, [-2, -1]), keepdims=1)
    zero, one = constant(g, 0, dtype), constant(g, 1, dtype)
    largest = g.Where(g.Greater(largest, zero), largest, one)
    exponent = g.Floor(g.Div(g.Log(largest), constant(g, math.log(2), dtype)))
    bound = np.finfo(dtype).maxexp - 2  # 2^bound and 2^-bound are normal numbers
    exponent = g.Min(g.Max(exponent, constant(g, -bound, dtype)), constant(g, bound, dtype))
    return g.Pow(constant(g, 2, dtype), g.Neg(exponent))


def _bisection_steps(dtype: str) -> int:
    """The most multisection steps: from an interval twice T's norm (Gershgorin's, widened)
    to eps^2 times the norm, each step dividing it by 4 at least (3 points)."""
    eps = np.finfo(dtype).eps
    return math.ceil(math.log(4 / eps**2) / math.log(4)) + 1


def tridiagonal_eigenvalues(g, d, e, dtype: str, rank: int, size: int | None = None):
    """The eigenvalues (..., n), ascending, of the symmetric tridiagonal matrices with
    diagonal `d` (..., n) and off-diagonal `e` (..., n - 1), `rank` the rank of d plus one,
    n = `size` if known.

    All eigenvalues at once by multisection: eigenvalue j lies in [lo_j, hi_j), from
    Gershgorin's interval widened as dstebz does; each step counts, for P points x evenly
    inside each interval (see POINT_BUDGET), the eigenvalues below x, the negative q_i of
    the Sturm recurrence q_i = (d_i - x) - e_{i-1}^2 / q_{i-1}, and keeps the part between
    the last point with at most j below it and the next. It stops when every interval is
    within 2 eps of its ends (LAPACK's relative tolerance, so the small eigenvalues of graded
    or diagonal matrices keep their digits), or of eps^2 times T's norm or pivmin
    (absolute), at most `_bisection_steps` steps.

    The recurrence runs as IEEE arithmetic allows, without dlaebz's test of each q_i: a
    zero q_i makes q_{i+1} -inf (counted once, as dlaebz counts its -pivmin), and the one
    way to 0 / 0, a zero coupling, is closed by taking each e^2 as at least pivmin (which
    moves eigenvalues by ~1e-154 of T's norm, far below the eps^2 bound); d has no -0.0
    (a -0.0 q_i would count as not negative and make q_{i+1} +inf). The padding rows'
    0 / 0 after a zero q_{n-1} is a NaN, never negative, and stops at the end of the rows."""
    info = np.finfo(dtype)
    zero = constant(g, 0, dtype)
    last = ints(g, [-1])
    n = g.Squeeze(g.Shape(d, start=-1), ints(g, [0]))
    batch = g.Shape(d, start=0, end=-1)
    magnitudes = g.Abs(e)
    zeros = g.Expand(zero, g.Concat(batch, ints(g, [1]), axis=0))
    radius = g.Add(g.Concat(zeros, magnitudes, axis=-1), g.Concat(magnitudes, zeros, axis=-1))
    # The interval holds 0 too, so it has ends for n = 0.
    low = g.ReduceMin(g.Concat(g.Sub(d, radius), zeros, axis=-1), last, keepdims=1)
    high = g.ReduceMax(g.Concat(g.Add(d, radius), zeros, axis=-1), last, keepdims=1)
    norm = g.Max(g.Abs(low), g.Abs(high))
    squares = g.Mul(e, e)
    ones = g.Add(zeros, constant(g, 1, dtype))
    largest_square = g.ReduceMax(g.Concat(squares, ones, axis=-1), last, keepdims=1)
    pivmin = g.Mul(constant(g, info.tiny, dtype), largest_square)  # (..., 1)
    count = g.Cast(g.Max(n, ints(g, 1)), to=onnx_dtype(dtype))
    widen = g.Add(
        g.Mul(g.Mul(constant(g, 2.1 * info.eps, dtype), count), norm),
        g.Mul(constant(g, 4.2, dtype), pivmin),
    )
    low, high = g.Sub(low, widen), g.Add(high, widen)
    floor = g.Max(g.Mul(constant(g, info.eps**2, dtype), norm), pivmin)

    # The recurrence's rows, first axis, padded to a multiple of `block` with rows that count
    # nothing (d past every point, no coupling), as (chunks, block, ..., 1, 1).
    block = ROWS if size is None else max(1, min(ROWS, size))
    chunks = g.Div(g.Add(n, ints(g, block - 1)), ints(g, block))
    rows = g.Unsqueeze(g.Mul(chunks, ints(g, block)), ints(g, [0]))
    padding = g.Expand(zero, g.Concat(batch, g.Sub(rows, g.Unsqueeze(n, ints(g, [0]))), axis=0))
    past = g.Add(padding, g.Add(high, constant(g, 1, dtype)))
    coupling = g.Slice(  # e_{i-1}^2 (at least pivmin), 0 for the first row (none for n = 0)
        g.Concat(zeros, g.Max(squares, pivmin), padding, axis=-1), ints(g, [0]), rows, last
    )
    shifted = g.Concat(g.Sub(zero, g.Neg(d)), past, axis=-1)  # d with no -0.0
    shape = g.Concat(
        g.Unsqueeze(chunks, ints(g, [0])), ints(g, [block]), batch, ints(g, [1, 1]), axis=0
    )
    perm = [rank - 2, *range(rank - 2)]  # the rows first

    def by_chunks(values):
        return g.Reshape(g.Transpose(values, perm=perm), shape, allowzero=1)

    shifted, coupling = by_chunks(shifted), by_chunks(coupling)
    targets = g.Unsqueeze(range_to(g, n), last)  # (n, 1): eigenvalue j
    parts = g.Max(
        g.Min(g.Div(ints(g, POINT_BUDGET), g.Max(n, ints(g, 1))), ints(g, 256)), ints(g, 4)
    )
    fractions = g.Div(
        g.Cast(g.Range(ints(g, 1), parts, ints(g, 1)), to=onnx_dtype(dtype)),
        g.Cast(parts, to=onnx_dtype(dtype)),
    )  # (P,)
    intervals = g.Concat(batch, g.Unsqueeze(n, ints(g, [0])), axis=0)
    lo, hi = g.Expand(low, intervals), g.Expand(high, intervals)

    def below(g, points):
        """The number of eigenvalues below each of `points` (..., n, P)."""

        def rows(g, k, q, count):
            # d_i - x for the chunk's rows (for all rows at once, n^2 P entries: 0.6 GB at
            # n = 5,000).
            differences = g.Sub(g.Gather(shifted, k, axis=0), points)  # (block, ..., n, P)
            d_rows = g.Split(differences, axis=0, num_outputs=block, _outputs=block)
            e_rows = g.Split(
                g.Gather(coupling, k, axis=0), axis=0, num_outputs=block, _outputs=block
            )
            if block == 1:
                d_rows, e_rows = [d_rows], [e_rows]
            qs = []
            for d_i, e_i in zip(d_rows, e_rows, strict=True):
                q = g.Sub(d_i, g.Div(e_i, q))
                qs.append(q)
            # The chunk's negative q counted at once (a Less per row cost a node per row).
            chunk = qs[0] if block == 1 else g.Concat(*qs, axis=0)
            found = g.Cast(g.Less(chunk, zero), to=ir.DataType.INT64)
            return [q, g.Add(count, g.ReduceSum(found, ints(g, [0]), keepdims=1))]

        # The first row's q and count, broadcast to (1, ..., n, P) by the first step.
        ones = [1] * (rank + 1)
        start = constant(g, np.ones(ones), dtype)
        _, count = loop(g, chunks, [start, ints(g, np.zeros(ones, np.int64))], rows, "sturm")
        return g.Squeeze(count, ints(g, [0]))

    def bisect(g, k, lo, hi):
        width = g.Sub(hi, lo)
        points = g.Add(
            g.Unsqueeze(lo, last), g.Mul(g.Unsqueeze(width, last), fractions)
        )  # (..., n, P)
        kept = g.ReduceSum(
            g.Cast(g.LessOrEqual(below(g, points), targets), to=ir.DataType.INT64),
            last,
            keepdims=1,
        )
        ends = g.Concat(g.Unsqueeze(lo, last), points, g.Unsqueeze(hi, last), axis=-1)
        lo = g.Squeeze(g.GatherElements(ends, kept, axis=-1), last)
        hi = g.Squeeze(g.GatherElements(ends, g.Add(kept, ints(g, 1)), axis=-1), last)
        return [_unconverged(g, lo, hi, floor, dtype), lo, hi]

    start = _unconverged(g, lo, hi, floor, dtype)
    lo, hi = loop(
        g, ints(g, _bisection_steps(dtype)), [lo, hi], bisect, "multisection", condition=start
    )
    middle = g.Add(lo, g.Mul(constant(g, 0.5, dtype), g.Sub(hi, lo)))
    # An interval that holds 0 gives 0, and so does a zero T (whose couplings, raised to
    # pivmin, would put its eigenvalues out of Gershgorin's interval of width ~pivmin).
    holds_zero = g.And(g.LessOrEqual(lo, zero), g.GreaterOrEqual(hi, zero))
    middle = g.Where(g.Or(holds_zero, g.Equal(norm, zero)), zero, middle)
    # Each interval holds its eigenvalue; the midpoints of equal eigenvalues' intervals may
    # differ in their last bits, out of order.
    values, _ = g.TopK(middle, g.Unsqueeze(n, ints(g, [0])), axis=-1, largest=0, _outputs=2)
    return values


def _unconverged(g, lo, hi, floor, dtype: str):
    """Whether any interval [lo, hi) is wider than 2 eps of its ends and `floor`."""
    relative = g.Mul(constant(g, 2 * np.finfo(dtype).eps, dtype), g.Max(g.Abs(lo), g.Abs(hi)))
    return any_of(g, g.Greater(g.Sub(hi, lo), g.Max(relative, floor)))


def symmetric_eigenvalues(g, a, dtype: str, rank: int, size: int | None = None):
    """The eigenvalues (..., n), ascending, of the symmetric matrices `a` (..., n, n) of
    rank `rank` (n = `size` if known), both triangles given."""
    scale = power_of_two_scale(g, a, dtype)
    d, e, _ = tridiagonal_form(g, g.Mul(a, scale), dtype)
    values = tridiagonal_eigenvalues(g, d, e, dtype, rank, size)
    return g.Div(values, g.Squeeze(scale, ints(g, [-1])))
