"""Linear algebra ONNX lacks, by blocks whose bulk runs in MatMul.

Cholesky, triangular solves and LU with partial pivoting (for Solve, MatrixInverse, Det,
SLogDet, LU, LUFactor) work on matrices padded to a multiple of the block size, one Loop
step per block: triangular solves multiply by the inverses of the diagonal blocks (all
computed at once by doubling), Cholesky's diagonal blocks and LU's panels take one Loop step
per column. Every translation works on the last two dims, so Blockwise versions run one Loop
for the whole batch. Failures follow PyTensor: NaN where it gives NaN (Cholesky and solves of
non-positive-definite or singular systems, lu_factor with a zero pivot), LinAlgError where it
raises (inverting a singular matrix: a failure guard in the model).
"""

import numpy as np
import onnx_ir as ir

from pt_onnxscript.ops.common import constant, loop, pad_zeros, raise_if
from pt_onnxscript.registry import register, register_blockwise
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.constructors import BlockDiagonal
    from pytensor.tensor.linalg.decomposition.cholesky import Cholesky
    from pytensor.tensor.linalg.decomposition.lu import LU, LUFactor, PivotToPermutations
    from pytensor.tensor.linalg.inverse import MatrixInverse
    from pytensor.tensor.linalg.solvers.general import Solve
    from pytensor.tensor.linalg.solvers.psd import CholeskySolve
    from pytensor.tensor.linalg.solvers.triangular import SolveTriangular
    from pytensor.tensor.linalg.summary import Det, SLogDet
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.nlinalg import Det, MatrixInverse, SLogDet
    from pytensor.tensor.slinalg import (
        LU,
        BlockDiagonal,
        Cholesky,
        CholeskySolve,
        LUFactor,
        PivotToPermutations,
        Solve,
        SolveTriangular,
    )


def _core(node):
    """The linalg Op of `node`, a Blockwise node or not."""
    return getattr(node.op, "core_op", node.op)


def float_output_check(node):
    """register_check for the linalg Ops computed in float arithmetic only: a sentence for a
    node whose output dtype is not float32 or float64 (PyTensor 2.38 keeps an integer input's
    dtype), None otherwise."""
    dtype = node.outputs[0].type.dtype
    if dtype in ("float32", "float64"):
        return None
    name = type(_core(node)).__name__
    return f"{name} with {dtype} output (cast the input to a float dtype)"


def _int(g, value):
    return constant(g, value, "int64")


def _size(g, a):
    """n of the (..., n, n) matrices `a`, 0-d."""
    return g.Squeeze(g.Shape(a, start=-1), _int(g, [0]))


def _positions(g, n):
    return g.Range(_int(g, 0), n, _int(g, 1))


def swap_last(g, a, rank: int):
    """The matrices of `a` (of rank `rank`) transposed."""
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return g.Transpose(a, perm=perm)


def _nan_where(g, failed, value, dtype):
    """NaN where `failed` (one flag per matrix of the batch), broadcast over the matrices."""
    return g.Where(g.Unsqueeze(failed, _int(g, [-1, -2])), constant(g, np.nan, dtype), value)


def _triangle(g, a, lower: bool, k: int = 0):
    """The lower (or upper) triangle of the matrices `a`, from diagonal `k` on; the other
    entries are zeros whatever they held (NaN and inf included), as LAPACK never reads them."""
    return g.Trilu(a, _int(g, k), upper=0 if lower else 1)


def symmetric(g, a, lower: bool, rank: int):
    """The symmetric matrices LAPACK's symmetric routines see: the `lower` (or upper) triangle
    of `a`, mirrored."""
    strict = _triangle(g, a, lower, -1 if lower else 1)
    return g.Add(_triangle(g, a, lower), swap_last(g, strict, rank))


def _as_lower(g, a, lower: bool, rank: int):
    """The lower-triangular matrices that the `lower` (or upper, transposed) triangle of `a`
    holds."""
    return _triangle(g, a, True) if lower else swap_last(g, _triangle(g, a, False), rank)


# The largest block of Cholesky and the triangular solves: matrices are padded (with an
# identity) to a multiple of the block size, blocks of columns (rows) are updated by MatMul,
# the diagonal blocks' triangular inverses come from log2(block) batched MatMul steps, and only
# Cholesky's diagonal blocks take one Loop step per column.
BLOCK = 32


def block_size(size: int | None) -> int:
    """The block size for matrices of static size `size` (None: unknown): a power of 2, at
    most BLOCK."""
    if size is None or size >= BLOCK:
        return BLOCK
    return 1 << max(size - 1, 0).bit_length()


def _rows(g, x, start, end):
    """x[..., start:end, :] for 0-d int64 `start` and `end`."""
    return g.Slice(
        x, g.Unsqueeze(start, _int(g, [0])), g.Unsqueeze(end, _int(g, [0])), _int(g, [-2])
    )


def _columns(g, x, start, end):
    """x[..., start:end] for 0-d int64 `start` and `end`."""
    return g.Slice(
        x, g.Unsqueeze(start, _int(g, [0])), g.Unsqueeze(end, _int(g, [0])), _int(g, [-1])
    )


def _padded(g, a, n, block: int, unit_diagonal: bool = False):
    """The lower triangle of the matrices `a` (n x n; its strict lower triangle if
    `unit_diagonal`), padded with zeros to N x N for N the next multiple of `block`, and N."""
    size = g.Mul(g.Div(g.Add(n, _int(g, block - 1)), _int(g, block)), _int(g, block))
    extra = g.Unsqueeze(g.Sub(size, n), _int(g, [0]))
    a = _triangle(g, a, True, -1 if unit_diagonal else 0)
    padded = pad_zeros(g, pad_zeros(g, a, -2, after=extra), -1, after=extra)
    return padded, size


def _block_ones(g, n, size, block: int, dtype: str, unit_diagonal: bool = False):
    """What to add to the diagonal blocks of matrices padded by `_padded` (broadcasting to
    (N / block, block, block)): ones on the diagonal past row n, where an identity keeps the
    blocks invertible and positive definite, or on the whole diagonal if `unit_diagonal`."""
    eye = constant(g, np.eye(block, dtype=bool), "bool")
    if not unit_diagonal:
        rows = g.Reshape(_positions(g, size), _int(g, [-1, block, 1]))
        eye = g.And(eye, g.GreaterOrEqual(rows, n))
    return g.Cast(eye, to=onnx_dtype(dtype))


def _pad_rows(g, b, size):
    """The matrices `b` (..., n, k) with zero rows after them up to `size` rows."""
    extra = g.Sub(size, g.Squeeze(g.Shape(b, start=-2, end=-1), _int(g, [0])))
    return pad_zeros(g, b, -2, after=g.Unsqueeze(extra, _int(g, [0])))


def _diagonal_blocks(g, a, block: int):
    """The diagonal `block` x `block` blocks of the matrices `a` (..., N, N), N a multiple of
    `block`: (..., N / block, block, block)."""
    count = g.Div(_size(g, a), _int(g, block))
    shape = g.Concat(
        g.Shape(a, start=0, end=-2),
        g.Unsqueeze(count, _int(g, [0])),
        _int(g, [block]),
        g.Shape(a, start=-1),
        axis=0,
    )
    rows = g.Reshape(a, shape, allowzero=1)
    starts = g.Mul(_positions(g, count), _int(g, block))
    columns = g.Add(g.Unsqueeze(starts, _int(g, [-1, -2])), _int(g, np.arange(block)))
    columns = g.Expand(columns, g.Concat(g.Shape(rows, start=0, end=-1), _int(g, [block]), axis=0))
    return g.GatherElements(rows, columns, axis=-1)


def triangular_inverse(g, t, block: int):
    """The inverses of lower-triangular matrices `t` (..., block, block), `block` a power of 2,
    by doubling: from the 1 x 1 diagonal blocks' inverses, each step inverts blocks twice as
    large, [[A, 0], [C, D]]^-1 = [[A^-1, 0], [-D^-1 C A^-1, D^-1]], for all of them at once."""
    batch = g.Shape(t, start=0, end=-2)
    diagonal = _diagonal(g, t, _int(g, np.arange(block)))
    inverse = g.Unsqueeze(g.Reciprocal(diagonal), _int(g, [-1, -2]))  # (..., block, 1, 1)
    size = 1
    while size < block:
        pairs = block // (2 * size)
        lower_rows = np.array(
            [2 * p * size + size + r for p in range(pairs) for r in range(size)], np.int64
        )
        rows = g.Reshape(
            g.Gather(t, _int(g, lower_rows), axis=-2),
            g.Concat(batch, _int(g, [pairs, size, block]), axis=0),
            allowzero=1,
        )
        columns = np.arange(pairs)[:, None, None] * 2 * size + np.arange(size)
        columns = np.broadcast_to(columns, (pairs, size, size)).astype(np.int64)
        shape = g.Concat(batch, _int(g, [pairs, size, size]), axis=0)
        c = g.GatherElements(rows, g.Expand(_int(g, columns), shape), axis=-1)
        a_inv = g.Slice(inverse, _int(g, [0]), _int(g, [block]), _int(g, [-3]), _int(g, [2]))
        d_inv = g.Slice(inverse, _int(g, [1]), _int(g, [block]), _int(g, [-3]), _int(g, [2]))
        corner = g.Neg(g.MatMul(g.MatMul(d_inv, c), a_inv))
        zeros = g.Expand(g.CastLike(_int(g, 0), t), shape)
        top = g.Concat(a_inv, zeros, axis=-1)
        bottom = g.Concat(corner, d_inv, axis=-1)
        inverse = g.Concat(top, bottom, axis=-2)
        size *= 2
    return g.Squeeze(inverse, _int(g, [-3]))


def _blocks(g, count, step, initial, kind: str):
    """A Loop over `count` blocks, ``done = step(g, k, done)`` for each: `done` grows by the
    block's rows (columns) from `initial`."""

    def body(g, k, done):
        return [step(g, k, done)]

    (result,) = loop(g, count, [initial], body, kind)
    return result


def lower_factor(g, a, dtype: str, lower: bool, rank: int, size: int | None = None):
    """Cholesky of the symmetric matrices whose `lower` (or upper) triangle `a` holds (of
    static size `size` if known): the lower factor L, NaN for a matrix that is not positive
    definite (a pivot not > 0), as LAPACK's potrf reports it.

    Left-looking by blocks of columns, as potrf: for the columns s:s+B, T = A[s:, s:s+B] -
    L[s:, :s] L[s:s+B, :s]^T (a MatMul), its top block factored column by column, the rows
    below it multiplied by the inverse of that factor, transposed."""
    block = block_size(size)
    a = _as_lower(g, a, lower, rank)
    n = _size(g, a)
    padded, total = _padded(g, a, n, block)
    ones = _block_ones(g, n, total, block, dtype)
    width = _int(g, block)

    def step(g, k, done):
        start = g.Mul(k, width)
        end = g.Add(start, width)
        below = _rows(g, done, start, total)
        t = g.Sub(
            _columns(g, _rows(g, padded, start, total), start, end),
            g.MatMul(below, swap_last(g, _rows(g, below, _int(g, 0), width), rank)),
        )
        diagonal_block = g.Add(_rows(g, t, _int(g, 0), width), g.Gather(ones, k, axis=0))
        top = _unblocked_factor(g, diagonal_block, dtype, rank)
        inverse = triangular_inverse(g, top, block)
        side = g.MatMul(_rows(g, t, width, g.Sub(total, start)), swap_last(g, inverse, rank))
        zeros_shape = g.Concat(
            g.Shape(a, start=0, end=-2),
            g.Unsqueeze(start, _int(g, [0])),
            _int(g, [block]),
            axis=0,
        )
        above = g.Expand(constant(g, 0, dtype), zeros_shape)
        return g.Concat(done, g.Concat(above, top, side, axis=-2), axis=-1)

    count = g.Div(total, width)
    factor = _blocks(g, count, step, _columns(g, padded, _int(g, 0), _int(g, 0)), "cholesky")
    factor = _columns(g, _rows(g, factor, _int(g, 0), n), _int(g, 0), n)
    pivots = _diagonal(g, factor, _positions(g, n))
    return _nan_where(g, _any(g, g.Not(g.Greater(pivots, constant(g, 0, dtype)))), factor, dtype)


def _any(g, mask):
    """Whether any of the last axis of bool `mask` is true (false when it is empty)."""
    return g.Cast(
        g.ReduceMax(g.Cast(mask, to=ir.DataType.UINT8), _int(g, [-1]), keepdims=0),
        to=ir.DataType.BOOL,
    )


def _unblocked_factor(g, a, dtype: str, rank: int):
    """Right-looking Cholesky of the lower triangle of `a`, one column per Loop step: column j
    of L is the j-th column of what remains, S[:, j], below the diagonal divided by
    sqrt(S[j, j]), that square root on the diagonal; then S -= l l^T. NaN for a matrix that is
    not positive definite."""
    lower = _triangle(g, a, True)
    remaining = g.Add(lower, swap_last(g, _triangle(g, a, True, -1), rank))
    n = _size(g, a)
    index = _positions(g, n)
    zero = constant(g, 0, dtype)

    def step(g, j, remaining, ok):
        column = g.Gather(remaining, j, axis=-1)
        d = g.Gather(column, j, axis=-1)
        root = g.Unsqueeze(g.Sqrt(d), _int(g, [-1]))
        below = g.Where(g.Greater(index, j), g.Div(column, root), zero)
        l = g.Where(g.Equal(index, j), root, below)
        update = g.Mul(g.Unsqueeze(l, _int(g, [-1])), g.Unsqueeze(l, _int(g, [-2])))
        return [g.Sub(remaining, update), g.And(ok, g.Greater(d, zero)), g.Identity(l)]

    batch_ok = g.Expand(constant(g, True, "bool"), g.Shape(a, start=0, end=-2))
    _, ok, columns = loop(
        g, n, [remaining, batch_ok], step, "cholesky", stacked=[onnx_dtype(dtype)]
    )
    # The columns, stacked first: L[..., i, j] = columns[j, ..., i] (n > 0: a block).
    factor = g.Transpose(columns, perm=[*range(1, rank - 1), rank - 1, 0])
    return _nan_where(g, g.Not(ok), factor, dtype)


def _flip(g, x, axes):
    """`x` reversed along `axes`."""
    count = len(axes)
    return g.Slice(
        x,
        _int(g, [-1] * count),
        _int(g, [np.iinfo(np.int64).min] * count),
        _int(g, axes),
        _int(g, [-1] * count),
    )


def solve_triangular(
    g, a, b, dtype: str, lower: bool, unit_diagonal: bool, nan_if_singular=True, size=None
):
    """The solution x of a x = b for the `lower` (or upper) triangle of `a` (of static size
    `size` if known; its diagonal taken as ones if `unit_diagonal`); NaN if a diagonal entry
    is zero and `nan_if_singular`, as LAPACK's trtrs reports.

    By blocks of rows: the inverses of the diagonal blocks of the padded matrix at once
    (triangular_inverse), then for the rows s:s+B, x[s:s+B] = inv_block (b[s:s+B] -
    a[s:s+B, :s] x[:s]), two MatMuls. An upper system is the lower one of `a` and `b`
    reversed."""
    block = block_size(size)
    n = _size(g, a)
    diagonal = _diagonal(g, a, _positions(g, n))
    if not lower:
        a, b = _flip(g, a, [-2, -1]), _flip(g, b, [-2])
    padded, total = _padded(g, a, n, block, unit_diagonal)
    ones = _block_ones(g, n, total, block, dtype, unit_diagonal)
    inverses = triangular_inverse(g, g.Add(_diagonal_blocks(g, padded, block), ones), block)
    b_padded = _pad_rows(g, b, total)
    width = _int(g, block)

    def step(g, k, done):
        start = g.Mul(k, width)
        end = g.Add(start, width)
        rows = _columns(g, _rows(g, padded, start, end), _int(g, 0), start)
        rhs = g.Sub(_rows(g, b_padded, start, end), g.MatMul(rows, done))
        return g.Concat(done, g.MatMul(g.Gather(inverses, k, axis=-3), rhs), axis=-2)

    count = g.Div(total, width)
    x = _blocks(g, count, step, _rows(g, b, _int(g, 0), _int(g, 0)), "substitution")
    x = _rows(g, x, _int(g, 0), n)
    if not lower:
        x = _flip(g, x, [-2])
    if unit_diagonal or not nan_if_singular:
        return x
    smallest = g.ReduceMin(g.Abs(diagonal), _int(g, [-1]), keepdims=0)
    return _nan_where(g, g.Equal(smallest, constant(g, 0, dtype)), x, dtype)


def _diagonal(g, a, index):
    """The diagonals (..., n) of the matrices a (..., n, n)."""
    columns = g.Expand(
        g.Unsqueeze(index, _int(g, [-1])),
        g.Concat(g.Shape(a, start=0, end=-1), _int(g, [1]), axis=0),
    )
    return g.Squeeze(g.GatherElements(a, columns, axis=-1), _int(g, [-1]))


def diagonal(g, a):
    """The diagonals (..., n) of the matrices `a` (..., n, n)."""
    return _diagonal(g, a, _positions(g, _size(g, a)))


def lu_factor_blocked(g, a, dtype: str, rank: int, size: int | None = None):
    """LU with partial pivoting of the matrices `a` (..., n, n) (of static size `size` if
    known), right-looking by blocks of columns as getrf: each panel of columns is eliminated
    one column per Loop step (pivot: the first largest |entry| on or below the diagonal, as
    idamax; a zero pivot skips the column, as getrf), its row swaps applied to the whole
    matrix, then U12 = L11^-1 A12 (triangular_inverse) and A22 -= L21 U12, both MatMuls.

    Returns getrf's packed L\\U (..., n, n), its pivot rows ipiv (..., n) (row k swapped with
    ipiv[k] at step k) and the permutation `perm` (..., n) of the rows of `a` that L U factors
    (a[perm] = L U).
    """
    block = block_size(size)
    n = _size(g, a)
    total = g.Mul(g.Div(g.Add(n, _int(g, block - 1)), _int(g, block)), _int(g, block))
    extra = g.Unsqueeze(g.Sub(total, n), _int(g, [0]))
    padded = pad_zeros(g, pad_zeros(g, a, -2, after=extra), -1, after=extra)
    index = _positions(g, total)
    padding = g.And(g.Equal(g.Unsqueeze(index, _int(g, [-1])), index), g.GreaterOrEqual(index, n))
    padded = g.Add(padded, g.Cast(padding, to=onnx_dtype(dtype)))  # ones: pivots of 1, no swap
    width = _int(g, block)
    columns = _int(g, np.arange(block))
    zero = constant(g, 0, dtype)
    batch = g.Shape(a, start=0, end=-2)

    def panel_step(g, j, panel, order, rows):
        column = g.Gather(panel, j, axis=-1)
        candidates = g.Where(g.Less(rows, j), constant(g, -1, dtype), g.Abs(column))
        p = g.ArgMax(candidates, axis=-1, keepdims=1)
        swap = g.Where(g.Equal(rows, j), p, g.Where(g.Equal(rows, p), j, rows))
        panel = g.GatherElements(
            panel, g.Expand(g.Unsqueeze(swap, _int(g, [-1])), g.Shape(panel)), axis=-2
        )
        order = g.GatherElements(order, swap, axis=-1)
        row = g.Gather(panel, j, axis=-2)
        pivot = g.Gather(row, j, axis=-1)
        safe = g.Where(g.Equal(pivot, zero), constant(g, 1, dtype), pivot)
        factors = g.Div(g.Gather(panel, j, axis=-1), g.Unsqueeze(safe, _int(g, [-1])))
        factors = g.Where(g.Greater(rows, j), factors, zero)
        right = g.Where(g.Greater(columns, j), row, zero)
        panel = g.Sub(
            panel, g.Mul(g.Unsqueeze(factors, _int(g, [-1])), g.Unsqueeze(right, _int(g, [-2])))
        )
        below = g.And(g.Unsqueeze(g.Greater(rows, j), _int(g, [-1])), g.Equal(columns, j))
        panel = g.Where(below, g.Unsqueeze(factors, _int(g, [-1])), panel)
        return [panel, order, g.Squeeze(p, _int(g, [-1]))]

    def block_step(g, k, m, perm):
        start = g.Mul(k, width)
        end = g.Add(start, width)
        rows = _positions(g, g.Sub(total, start))
        panel = _columns(g, _rows(g, m, start, total), start, end)
        panel, order, pivot_rows = loop(
            g,
            width,
            [panel, g.Expand(rows, g.Concat(batch, g.Shape(rows), axis=0))],
            lambda g, j, panel, order: panel_step(g, j, panel, order, rows),
            "lu_panel",
            stacked=[ir.DataType.INT64],
        )
        full_order = g.Concat(
            g.Expand(
                _positions(g, start), g.Concat(batch, g.Unsqueeze(start, _int(g, [0])), axis=0)
            ),
            g.Add(order, start),
            axis=-1,
        )
        m = g.GatherElements(
            m, g.Expand(g.Unsqueeze(full_order, _int(g, [-1])), g.Shape(m)), axis=-2
        )
        perm = g.GatherElements(perm, full_order, axis=-1)
        top = _rows(g, panel, _int(g, 0), width)
        unit_lower = g.Add(_triangle(g, top, True, -1), constant(g, np.eye(block), dtype))
        upper_right = g.MatMul(
            triangular_inverse(g, unit_lower, block),
            _columns(g, _rows(g, m, start, end), end, total),
        )
        trailing = g.Sub(
            _columns(g, _rows(g, m, end, total), end, total),
            g.MatMul(_rows(g, panel, width, g.Sub(total, start)), upper_right),
        )
        lower_rows = g.Concat(
            _columns(g, _rows(g, m, start, total), _int(g, 0), start),
            panel,
            g.Concat(upper_right, trailing, axis=-2),
            axis=-1,
        )
        m = g.Concat(_rows(g, m, _int(g, 0), start), lower_rows, axis=-2)
        return [m, perm, g.Add(pivot_rows, start)]

    perm = g.Expand(index, g.Concat(batch, g.Shape(index), axis=0))
    count = g.Div(total, width)
    m, perm, pivot_rows = loop(
        g, count, [padded, perm], block_step, "lu", stacked=[ir.DataType.INT64]
    )
    # Pivot rows stacked (blocks, block, ...): reshaped (an ONNX Runtime Loop that ran no step
    # stacks to shape (0,)), batch dims first.
    pivot_rows = g.Reshape(
        pivot_rows, g.Concat(g.Unsqueeze(total, _int(g, [0])), batch, axis=0), allowzero=1
    )
    ipiv = g.Transpose(pivot_rows, perm=[*range(1, rank - 1), 0])
    packed = _columns(g, _rows(g, m, _int(g, 0), n), _int(g, 0), n)
    first = g.Unsqueeze(n, _int(g, [0]))
    ipiv = g.Slice(ipiv, _int(g, [0]), first, _int(g, [-1]))
    perm = g.Slice(perm, _int(g, [0]), first, _int(g, [-1]))
    return packed, ipiv, perm


def _lu_solve(g, packed, perm, b, dtype, size):
    """x with a x = b from a's LU factors (`packed`, `perm`: a[perm] = L U)."""
    index = _positions(g, _size(g, packed))
    permutation = g.Cast(g.Equal(g.Unsqueeze(perm, _int(g, [-1])), index), to=onnx_dtype(dtype))
    y = solve_triangular(g, packed, g.MatMul(permutation, b), dtype, True, True, size=size)
    return solve_triangular(g, packed, y, dtype, False, False, nan_if_singular=False, size=size)


def lu_solve_system(g, a, b, dtype: str, rank: int, size: int | None = None):
    """x with a x = b by LU with partial pivoting (no check for a singular `a`), and the
    pivots (the diagonal of U)."""
    packed, _, perm = lu_factor_blocked(g, a, dtype, rank, size)
    return _lu_solve(g, packed, perm, b, dtype, size), diagonal(g, packed)


def _swap_count(g, ipiv):
    """The number of row swaps getrf made (..)."""
    steps = _positions(g, g.Squeeze(g.Shape(ipiv, start=-1), _int(g, [0])))
    moved = g.Cast(g.Not(g.Equal(ipiv, steps)), to=ir.DataType.INT64)
    return g.ReduceSum(moved, _int(g, [-1]), keepdims=0)


def _matrix(g, b, b_ndim: int):
    return g.Unsqueeze(b, _int(g, [-1])) if b_ndim == 1 else b


def _unmatrix(g, x, b_ndim: int):
    return g.Squeeze(x, _int(g, [-1])) if b_ndim == 1 else x


def _as(g, var, value, dtype):
    return value if var.type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))


def _singular(g, pivots, dtype):
    return g.Equal(g.ReduceMin(g.Abs(pivots), _int(g, [-1]), keepdims=0), constant(g, 0, dtype))


@register(Cholesky)
@register_blockwise(Cholesky)
def cholesky(g, node, a):
    """Cholesky -> the column Loop on the triangle LAPACK reads (`lower`, else upper); NaN for
    a matrix that is not positive definite."""
    dtype = node.outputs[0].type.dtype
    rank, lower = node.inputs[0].type.ndim, _core(node).lower
    size = node.inputs[0].type.shape[-1]
    factor = lower_factor(g, _as(g, node.inputs[0], a, dtype), dtype, lower, rank, size)
    return factor if lower else swap_last(g, factor, rank)


@register(SolveTriangular)
@register_blockwise(SolveTriangular)
def solve_triangular_(g, node, a, b):
    """SolveTriangular -> substitution, one row per step."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    a, b = _as(g, node.inputs[0], a, dtype), _as(g, node.inputs[1], b, dtype)
    b, size = _matrix(g, b, core.b_ndim), node.inputs[0].type.shape[-1]
    x = solve_triangular(g, a, b, dtype, core.lower, core.unit_diagonal, size=size)
    return _unmatrix(g, x, core.b_ndim)


@register(CholeskySolve)
@register_blockwise(CholeskySolve)
def cholesky_solve(g, node, c, b):
    """CholeskySolve -> two substitutions: L y = b then L^T x = y for a lower factor L
    (A = L L^T), U^T y = b then U x = y for an upper factor U (A = U^T U). Like LAPACK's potrs,
    a zero on the diagonal gives infinities or NaN, not a NaN-filled result."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    rank = node.inputs[0].type.ndim
    c, b = _as(g, node.inputs[0], c, dtype), _as(g, node.inputs[1], b, dtype)
    lower = _as_lower(g, c, core.lower, rank)
    size = node.inputs[0].type.shape[-1]
    b = _matrix(g, b, core.b_ndim)
    y = solve_triangular(g, lower, b, dtype, True, False, nan_if_singular=False, size=size)
    upper = swap_last(g, lower, rank)
    x = solve_triangular(g, upper, y, dtype, False, False, nan_if_singular=False, size=size)
    return _unmatrix(g, x, core.b_ndim)


@register(Solve)
@register_blockwise(Solve)
def solve(g, node, a, b):
    """Solve -> for assume_a="pos", Cholesky of the triangle SciPy reads and two substitutions;
    otherwise LU with partial pivoting and back substitution, of the symmetric matrix the
    triangle defines ("sym", "her"), of the band ("tridiagonal") or of `a`; NaN for a singular
    (or, for "pos", not positive definite) system."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    rank = node.inputs[0].type.ndim
    a, b = _as(g, node.inputs[0], a, dtype), _as(g, node.inputs[1], b, dtype)
    b = _matrix(g, b, core.b_ndim)
    if core.assume_a == "pos":
        size = node.inputs[0].type.shape[-1]
        factor = lower_factor(g, a, dtype, core.lower, rank, size)
        y = solve_triangular(g, factor, b, dtype, True, False, size=size)
        upper = swap_last(g, factor, rank)
        x = solve_triangular(g, upper, y, dtype, False, False, size=size)
        return _unmatrix(g, x, core.b_ndim)
    if core.assume_a in ("sym", "her"):
        a = symmetric(g, a, core.lower, rank)
    elif core.assume_a == "tridiagonal":
        a = _triangle(g, _triangle(g, a, True, 1), False, -1)
    x, pivots = lu_solve_system(g, a, b, dtype, rank, node.inputs[0].type.shape[-1])
    x = _nan_where(g, _singular(g, pivots, dtype), x, dtype)
    return _unmatrix(g, x, core.b_ndim)


@register(MatrixInverse)
@register_blockwise(MatrixInverse)
def matrix_inverse(g, node, a):
    """MatrixInverse -> LU solve against the identity; raises for a singular matrix, as
    np.linalg.inv does."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    rank, size = node.inputs[0].type.ndim, node.inputs[0].type.shape[-1]
    inverse, pivots = lu_solve_system(g, a, identity_like(g, a, dtype), dtype, rank, size)
    singular = _singular(g, pivots, dtype)
    return raise_if(g, singular, inverse, np.linalg.LinAlgError, "Singular matrix")


@register(Det)
@register_blockwise(Det)
def det(g, node, a):
    """Det -> the product of the LU pivots, negated for an odd number of row swaps."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    product = g.ReduceProd(diagonal(g, packed), _int(g, [-1]), keepdims=0)
    return g.Mul(product, _parity_sign(g, _swap_count(g, ipiv), dtype))


def _parity_sign(g, swaps, dtype):
    odd = g.Equal(g.Mod(swaps, _int(g, 2)), _int(g, 1))
    return g.Where(odd, constant(g, -1, dtype), constant(g, 1, dtype))


@register(SLogDet)
@register_blockwise(SLogDet)
def slogdet(g, node, a):
    """SLogDet -> the sign and the sum of log |pivot| of the LU pivots."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    pivots, swaps = diagonal(g, packed), _swap_count(g, ipiv)
    sign = g.Mul(
        g.ReduceProd(g.Sign(pivots), _int(g, [-1]), keepdims=0), _parity_sign(g, swaps, dtype)
    )
    logabs = g.ReduceSum(g.Log(g.Abs(pivots)), _int(g, [-1]), keepdims=0)
    return [sign, logabs]


def _inverse_permutation(g, perm):
    """q with q[..., perm[..., i]] = i."""
    index = g.Expand(_positions(g, g.Squeeze(g.Shape(perm, start=-1), _int(g, [0]))), g.Shape(perm))
    return g.ScatterElements(perm, perm, index, axis=-1)


def identity_like(g, a, dtype):
    index = _positions(g, _size(g, a))
    return g.Cast(g.Equal(g.Unsqueeze(index, _int(g, [-1])), index), to=onnx_dtype(dtype))


@register(LUFactor)
@register_blockwise(LUFactor)
def lu_factor(g, node, a):
    """LUFactor -> getrf's packed L\\U and pivot rows from the elimination; NaN where a pivot is
    exactly zero, as PyTensor gives when getrf reports it."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    failed = _any(g, g.Equal(diagonal(g, packed), constant(g, 0, dtype)))
    return [_nan_where(g, failed, packed, dtype), g.Cast(ipiv, to=onnx_dtype("int32"))]


@register(LU)
@register_blockwise(LU)
def lu(g, node, a):
    """LU -> SciPy's lu from the elimination: a = P L U with L unit lower triangular, as P,
    L, U; as p with a = L[p] U (`p_indices`); or as P L, U (`permute_l`)."""
    core = _core(node)
    dtype = node.outputs[-1].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    size = node.inputs[0].type.shape[-1]
    packed, _, perm = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    lower = g.Add(_triangle(g, packed, True, -1), identity_like(g, a, dtype))
    upper = _triangle(g, packed, False)
    rows = _inverse_permutation(g, perm)  # a[i] = (L U)[rows[i]]
    if core.permute_l:
        gather = g.Expand(g.Unsqueeze(rows, _int(g, [-1])), g.Shape(lower))
        return [g.GatherElements(lower, gather, axis=-2), upper]
    if core.p_indices:
        return [g.Cast(rows, to=onnx_dtype(node.outputs[0].type.dtype)), lower, upper]
    index = _positions(g, _size(g, a))
    p_dtype = onnx_dtype(node.outputs[0].type.dtype)
    permutation = g.Cast(g.Equal(g.Unsqueeze(rows, _int(g, [-1])), index), to=p_dtype)
    return [permutation, lower, upper]


@register(PivotToPermutations)
@register_blockwise(PivotToPermutations)
def pivot_to_permutations(g, node, pivots):
    """PivotToPermutations -> getrf's row swaps applied in order to 0..n-1, one per Loop step
    (and inverted unless `inverse`)."""
    pivots = g.Cast(pivots, to=ir.DataType.INT64)
    n = g.Squeeze(g.Shape(pivots, start=-1), _int(g, [0]))
    batch = g.Concat(g.Shape(pivots, start=0, end=-1), _int(g, [1]), axis=0)

    def step(g, i, rows):
        j = g.Unsqueeze(g.Gather(pivots, i, axis=-1), _int(g, [-1]))
        at = g.Concat(g.Expand(g.Unsqueeze(i, _int(g, [0])), batch), j, axis=-1)
        swapped = g.Concat(
            g.GatherElements(rows, j, axis=-1),
            g.Gather(rows, g.Unsqueeze(i, _int(g, [0])), axis=-1),
            axis=-1,
        )
        return [g.ScatterElements(rows, at, swapped, axis=-1)]

    (rows,) = loop(g, n, [g.Expand(_positions(g, n), g.Shape(pivots))], step, "pivots")
    return rows if _core(node).inverse else _inverse_permutation(g, rows)


@register(BlockDiagonal)
@register_blockwise(BlockDiagonal)
def block_diagonal(g, node, *matrices):
    """BlockDiagonal -> each matrix padded with zeros to the full width at its columns, the
    rows concatenated (batch dims broadcast first)."""
    dtype = node.outputs[0].type.dtype
    matrices = [_as(g, var, m, dtype) for var, m in zip(node.inputs, matrices, strict=True)]
    if node.outputs[0].type.ndim > 2:
        batches = [g.Concat(g.Shape(m, start=0, end=-2), _int(g, [1, 1]), axis=0) for m in matrices]
        matrices = [
            _expand_all(g, m, [b for j, b in enumerate(batches) if j != i])
            for i, m in enumerate(matrices)
        ]
    widths = [g.Shape(m, start=-1) for m in matrices]
    total = widths[0]
    for width in widths[1:]:
        total = g.Add(total, width)
    blocks, left = [], _int(g, [0])
    for m, width in zip(matrices, widths, strict=True):
        right = g.Sub(g.Sub(total, left), width)
        blocks.append(pad_zeros(g, m, -1, before=left, after=right))
        left = g.Add(left, width)
    return g.Concat(*blocks, axis=-2)


def _expand_all(g, value, shapes):
    for shape in shapes:
        value = g.Expand(value, shape)
    return value
