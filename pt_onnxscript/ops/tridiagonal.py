"""LAPACK's tridiagonal LU, gttrf and gttrs (LUFactorTridiagonal, SolveLUFactorTridiagonal).

PyTensor's rewrites split ``solve(a, b, assume_a="tridiagonal")`` into these two Ops when the
same matrix is solved more than once (its gradient, say). Both are the reference LAPACK
recurrences, one Loop step per row (each row depends on the one before), on the last axis
of the diagonals, so Blockwise versions run one Loop for the whole batch. The pivots are
LAPACK's 1-based int32 `ipiv`, as SciPy's gttrf returns them.
"""

import onnx_ir as ir

from pt_onnxscript.ops.common import INT64_MIN, constant, ints, loop, pad_zeros, range_to
from pt_onnxscript.registry import register, register_blockwise
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.solvers.tridiagonal import (
        LUFactorTridiagonal,
        SolveLUFactorTridiagonal,
    )
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.tridiagonal import (
        LUFactorTridiagonal,
        SolveLUFactorTridiagonal,
    )


def _as(g, var, value, dtype: str):
    return value if var.type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))


def _length(g, x):
    """The length (0-d int64) of the last axis of x."""
    return g.Squeeze(g.Shape(x, start=-1), ints(g, [0]))


def _entry(g, x, i):
    """x[..., i] for a 0-d int64 i."""
    return g.Gather(x, i, axis=-1)


def _stacked_last(g, x, rank: int):
    """Loop scan outputs (steps, ...) with the steps moved to the last axis."""
    return g.Transpose(x, perm=[*range(1, rank), 0]) if rank > 1 else x


def gttrf(g, dl, d, du, dtype: str, rank: int):
    """gttrf of the tridiagonal matrices with diagonals `dl`, `d`, `du` (..., n - 1), (..., n)
    of rank `rank`: for each row i < n - 1, eliminate dl[i], swapping rows i and i + 1 where
    |d[i]| < |dl[i]| (NaN included, as LAPACK's comparison). Returns the multipliers, U's
    three diagonals (d, du, and du2, the second superdiagonal the swaps create) and the row
    (0-based, int64) each step used, all on the last axis."""
    n = _length(g, d)
    steps = g.Max(g.Sub(n, ints(g, 1)), ints(g, 0))
    zero = constant(g, 0, dtype)
    # Reading d[i + 1] and du[i + 1] past the end gives zeros.
    d_ahead = pad_zeros(g, d, -1, after=ints(g, [1]))
    du_ahead = pad_zeros(g, du, -1, after=ints(g, [1]))

    def step(g, i, d_i, du_i):
        """`d_i`, `du_i`: d[i] and du[i] as the steps before changed them."""
        dl_i = _entry(g, dl, i)
        after = g.Add(i, ints(g, 1))
        d_next, du_next = _entry(g, d_ahead, after), _entry(g, du_ahead, after)
        keep = g.GreaterOrEqual(g.Abs(d_i), g.Abs(dl_i))
        # No swap: fact = dl/d (nothing to do when d is 0, and then dl is 0 too).
        nonzero = g.Not(g.Equal(d_i, zero))
        kept_fact = g.Where(nonzero, g.Div(dl_i, d_i), dl_i)
        kept_next = g.Where(nonzero, g.Sub(d_next, g.Mul(kept_fact, du_i)), d_next)
        # Swap rows i and i + 1.
        swap_fact = g.Div(d_i, dl_i)
        swapped_next = g.Sub(du_i, g.Mul(swap_fact, d_next))
        return [
            g.Where(keep, kept_next, swapped_next),  # d[i + 1]
            g.Where(keep, du_next, g.Neg(g.Mul(swap_fact, du_next))),  # du[i + 1]
            g.Where(keep, kept_fact, swap_fact),  # dl[i]
            g.Where(keep, d_i, dl_i),  # d[i]
            g.Where(keep, du_i, d_next),  # du[i]
            g.Where(keep, zero, du_next),  # du2[i]
            g.Add(i, g.Cast(g.Not(keep), to=ir.DataType.INT64)),  # the row step i used
        ]

    first_du = _entry(g, du_ahead, ints(g, 0))
    last_d, _, dl_out, d_out, du_out, du2, rows = loop(
        g,
        steps,
        [_entry(g, d_ahead, ints(g, 0)), first_du],
        step,
        "gttrf",
        stacked=[*[d.dtype] * 4, ir.DataType.INT64],
    )
    # An ONNX Runtime Loop that ran no step stacks to shape (0,): reshaped to (0, ...batch).
    batch = g.Shape(d, start=0, end=-1)
    shape = g.Concat(g.Unsqueeze(steps, ints(g, [0])), batch, axis=0)
    dl_out, d_out, du_out, du2, rows = (
        _stacked_last(g, g.Reshape(x, shape, allowzero=1), rank)
        for x in (dl_out, d_out, du_out, du2, rows)
    )
    first = ints(g, [0])
    d_out = g.Slice(
        g.Concat(d_out, g.Unsqueeze(last_d, ints(g, [-1])), axis=-1),
        first,
        g.Unsqueeze(n, first),
        ints(g, [-1]),
    )
    du2_size = g.Max(g.Sub(n, ints(g, 2)), ints(g, 0))
    du2 = g.Slice(du2, first, g.Unsqueeze(du2_size, first), ints(g, [-1]))
    # The last row swaps with nothing.
    last = g.Expand(g.Sub(n, ints(g, 1)), g.Concat(batch, ints(g, [1]), axis=0))
    rows = g.Slice(g.Concat(rows, last, axis=-1), first, g.Unsqueeze(n, first), ints(g, [-1]))
    return dl_out, d_out, du_out, du2, rows


def swapped_rows(g, rows, n):
    """Whether step i of gttrf swapped rows i and i + 1, from the rows (0-based) it used."""
    return g.Not(g.Equal(rows, range_to(g, n)))


def gttrs(g, dl, d, du, du2, swapped, b, n):
    """x with A x = b for A = L U of gttrf (`swapped`: swapped_rows), b and x rows first
    (n, ..., k), the factors' diagonals (..., n) on the last axis, n a 0-d int64."""
    return _upper(g, d, du, du2, _lower(g, dl, swapped, b, n), n)


@register(LUFactorTridiagonal)
@register_blockwise(LUFactorTridiagonal)
def lu_factor_tridiagonal(g, node, dl, d, du):
    """LUFactorTridiagonal -> gttrf; ipiv 1-based (LAPACK's)."""
    dtype = node.outputs[0].type.dtype
    dl, d, du = (_as(g, var, x, dtype) for var, x in zip(node.inputs, (dl, d, du), strict=True))
    dl, d, du, du2, rows = gttrf(g, dl, d, du, dtype, node.inputs[1].type.ndim)
    ipiv = g.Cast(g.Add(rows, ints(g, 1)), to=ir.DataType.INT32)
    return [dl, d, du, du2, ipiv]


@register(SolveLUFactorTridiagonal)
@register_blockwise(SolveLUFactorTridiagonal)
def solve_lu_factor_tridiagonal(g, node, dl, d, du, du2, ipiv, b):
    """SolveLUFactorTridiagonal -> gttrs: with `transposed`, U^T z = b forward then L^T x = z
    backward, else L y = b forward (each row swapped with the next where ipiv says) then
    U x = y backward (U has d, du and du2 on its diagonals)."""
    op = getattr(node.op, "core_op", node.op)
    dtype = node.outputs[0].type.dtype
    floats = (dl, d, du, du2, b)
    dl, d, du, du2, b = (
        _as(g, var, x, dtype)
        for var, x in zip(node.inputs[:4] + node.inputs[5:], floats, strict=True)
    )
    b_rank = node.inputs[5].type.ndim
    if op.b_ndim == 1:
        b = g.Unsqueeze(b, ints(g, [-1]))
    # b's batch broadcast with the factors' (Expand broadcasts both ways), rows first.
    b = g.Expand(b, g.Concat(g.Shape(d, start=0, end=-1), ints(g, [1, 1]), axis=0))
    rank = max(b_rank + (1 if op.b_ndim == 1 else 0), node.inputs[1].type.ndim + 1)
    rows_first = [rank - 2, *range(rank - 2), rank - 1]
    b = g.Transpose(b, perm=rows_first)  # (n, ..., k)
    n = _length(g, d)
    swapped = swapped_rows(g, g.Sub(g.Cast(ipiv, to=ir.DataType.INT64), ints(g, 1)), n)
    if op.transposed:
        x = _lower_transposed(g, dl, swapped, _upper_transposed(g, d, du, du2, b, n), n)
    else:
        x = gttrs(g, dl, d, du, du2, swapped, b, n)
    x = g.Transpose(x, perm=[*range(1, rank - 1), 0, rank - 1])
    return g.Squeeze(x, ints(g, [-1])) if op.b_ndim == 1 else x


def _column(g, x, i):
    """x[..., i] of the diagonals (...,), broadcast against rows (..., k)."""
    return g.Unsqueeze(_entry(g, x, i), ints(g, [-1]))


def _rows_out(g, stacked, last, steps):
    """Rows a Loop emitted (steps, ..., k), then `last`: (steps + 1, ..., k)."""
    shape = g.Concat(g.Unsqueeze(steps, ints(g, [0])), g.Shape(last), axis=0)
    return g.Concat(g.Reshape(stacked, shape, allowzero=1), g.Unsqueeze(last, ints(g, [0])), axis=0)


def _steps(g, n):
    return g.Max(g.Sub(n, ints(g, 1)), ints(g, 0))


def _lower(g, dl, swapped, b, n):
    """L y = b, rows (n, ..., k) forward: row i + 1 -= dl[i] row i, rows i and i + 1 swapped
    first where step i swapped them. Zero rows give zero rows."""
    steps = _steps(g, n)
    ahead = _pad_rows(g, b)

    def step(g, i, current):
        after = g.Gather(ahead, g.Add(i, ints(g, 1)), axis=0)
        swap, factor = _column(g, swapped, i), _column(g, dl, i)
        top = g.Where(swap, after, current)
        bottom = g.Where(swap, current, after)
        return [g.Sub(bottom, g.Mul(factor, top)), top]

    last, rows = loop(
        g, steps, [g.Gather(ahead, ints(g, 0), axis=0)], step, "gttrs_l", stacked=[b.dtype]
    )
    return _slice_rows(g, _rows_out(g, rows, last, steps), n)


def _pad_rows(g, b):
    """b (n, ..., k) with one zero row after it (so row n - 1 + 1 reads as zeros; n = 0 too)."""
    zeros = g.Expand(g.CastLike(ints(g, 0), b), g.Concat(ints(g, [1]), g.Shape(b, start=1), axis=0))
    return g.Concat(b, zeros, axis=0)


def _slice_rows(g, x, n):
    return g.Slice(x, ints(g, [0]), g.Unsqueeze(n, ints(g, [0])), ints(g, [0]))


def _upper(g, d, du, du2, y, n):
    """U x = y backward: x[i] = (y[i] - du[i] x[i + 1] - du2[i] x[i + 2]) / d[i], the entries
    past the ends zeros (so the last two rows read no x that is not there)."""
    du = pad_zeros(g, du, -1, after=ints(g, [1]))
    du2 = pad_zeros(g, du2, -1, after=ints(g, [2]))
    zero_row = g.Gather(_pad_rows(g, y), n, axis=0)

    def step(g, k, next1, next2):
        i = g.Sub(g.Sub(n, ints(g, 1)), k)
        row = g.Gather(y, i, axis=0)
        rest = g.Sub(g.Sub(row, g.Mul(_column(g, du, i), next1)), g.Mul(_column(g, du2, i), next2))
        x_i = g.Div(rest, _column(g, d, i))
        return [x_i, next1, x_i]

    _, _, rows = loop(g, n, [zero_row, zero_row], step, "gttrs_u", stacked=[y.dtype])
    shape = g.Concat(g.Unsqueeze(n, ints(g, [0])), g.Shape(zero_row), axis=0)
    return _flip_rows(g, g.Reshape(rows, shape, allowzero=1))


def _flip_rows(g, x):
    return g.Slice(x, ints(g, [-1]), ints(g, [INT64_MIN]), ints(g, [0]), ints(g, [-1]))


def _upper_transposed(g, d, du, du2, b, n):
    """U^T z = b forward: z[i] = (b[i] - du[i - 1] z[i - 1] - du2[i - 2] z[i - 2]) / d[i], the
    entries before the start zeros."""
    du = pad_zeros(g, du, -1, before=ints(g, [1]))
    du2 = pad_zeros(g, du2, -1, before=ints(g, [2]))
    zero_row = g.Gather(_pad_rows(g, b), n, axis=0)

    def step(g, i, previous1, previous2):
        rest = g.Sub(
            g.Sub(g.Gather(b, i, axis=0), g.Mul(_column(g, du, i), previous1)),
            g.Mul(_column(g, du2, i), previous2),
        )
        z_i = g.Div(rest, _column(g, d, i))
        return [z_i, previous1, z_i]

    _, _, rows = loop(g, n, [zero_row, zero_row], step, "gttrs_ut", stacked=[b.dtype])
    shape = g.Concat(g.Unsqueeze(n, ints(g, [0])), g.Shape(zero_row), axis=0)
    return g.Reshape(rows, shape, allowzero=1)


def _lower_transposed(g, dl, swapped, z, n):
    """L^T x = z backward, for i = n - 2 down to 0: where step i swapped, row i + 1 becomes
    z[i] - dl[i] x_(i + 1) and row i carries x_(i + 1) on; else row i becomes z[i] - dl[i]
    x_(i + 1)."""
    steps = _steps(g, n)

    def step(g, k, current):
        i = g.Sub(g.Sub(n, ints(g, 2)), k)
        row, swap, factor = g.Gather(z, i, axis=0), _column(g, swapped, i), _column(g, dl, i)
        reduced = g.Sub(row, g.Mul(factor, current))
        return [g.Where(swap, current, reduced), g.Where(swap, reduced, current)]

    last_row = g.Gather(_pad_rows(g, z), g.Max(g.Sub(n, ints(g, 1)), ints(g, 0)), axis=0)
    first, rows = loop(g, steps, [last_row], step, "gttrs_lt", stacked=[z.dtype])
    # Rows emitted from n - 1 down to 1, then row 0.
    x = _rows_out(g, rows, first, steps)
    return _slice_rows(g, _flip_rows(g, x), n)
