"""Linear algebra ONNX lacks, by blocks whose bulk runs in MatMul.

Cholesky, triangular solves and LU with partial pivoting (for Solve, MatrixInverse, Det,
SLogDet, LU, LUFactor, and NumPy's tensorinv and tensorsolve) work on matrices padded to a
multiple of the block size, one Loop step per block (Cholesky: per panel of two blocks):
triangular solves multiply by the inverses of the diagonal blocks (all computed at once by
doubling), Cholesky's diagonal blocks are factored by four unrolled nodes per column (six for
a batch), LU's panels take one Loop step per column. Every translation works on the last two
dims, so Blockwise versions run one Loop for the whole batch. Failures follow PyTensor: NaN
where it gives NaN (Cholesky and solves of non-positive-definite or singular systems,
lu_factor with a zero pivot), LinAlgError where it raises (inverting a singular matrix: a
failure guard in the model).
"""

import math

import numpy as np
import onnx_ir as ir

from pt_onnxscript.ops.common import (
    INT64_MAX,
    INT64_MIN,
    any_last,
    branch,
    constant,
    input_dim_name,
    ints,
    known_size,
    loop,
    pad_zeros,
    raise_if,
    range_to,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.constructors import BlockDiagonal
    from pytensor.tensor.linalg.decomposition.cholesky import Cholesky
    from pytensor.tensor.linalg.decomposition.lu import LU, LUFactor, PivotToPermutations
    from pytensor.tensor.linalg.inverse import MatrixInverse, TensorInv
    from pytensor.tensor.linalg.solvers.general import Solve
    from pytensor.tensor.linalg.solvers.lstsq import TensorSolve
    from pytensor.tensor.linalg.solvers.psd import CholeskySolve
    from pytensor.tensor.linalg.solvers.triangular import SolveTriangular
    from pytensor.tensor.linalg.summary import Det, SLogDet
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.nlinalg import Det, MatrixInverse, SLogDet, TensorInv, TensorSolve
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


NOT_SQUARE = "Last 2 dimensions of the array must be square"


def square_matrices(g, var, a, exc_type: type[Exception] = np.linalg.LinAlgError, message=None):
    """`a` (the matrices (..., m, n) of `var`), made to raise ``exc_type(message)`` (NumPy's
    LinAlgError by default) where m != n: LU pads and factors an m x n matrix as if it were
    n x n, so det, slogdet and inv of a tall one gave a value where PyTensor raises. No check
    where the two are known equal (static, or one graph input's symbolic dim); a matrix
    known not to be square is refused at export (`square_check`)."""
    rows, columns = (known_size(var, a, d) for d in (-2, -1))
    if rows is not None and rows == columns:
        return a
    names = {input_dim_name(g, var, a, d) for d in (-2, -1)}
    if len(names) == 1 and None not in names:
        return a
    shape = g.Shape(a, start=-2)
    differ = g.Not(g.Equal(g.ReduceMin(shape, keepdims=0), g.ReduceMax(shape, keepdims=0)))
    return raise_if(g, [differ], a, exc_type, message or NOT_SQUARE)


def square_check(node):
    """register_check for the Ops of square matrices: a sentence for a matrix known not to be
    square."""
    rows, columns = node.inputs[0].type.shape[-2:]
    if None not in (rows, columns) and rows != columns:
        name = type(_core(node)).__name__
        return f"{name} of a {rows} x {columns} matrix (it takes square matrices)"
    return None


def square_float_check(node):
    """register_check for the Ops of square matrices computed in float arithmetic only:
    square_check's sentence, then float_output_check's."""
    return square_check(node) or float_output_check(node)


register_check(
    Cholesky, SolveTriangular, CholeskySolve, Solve, MatrixInverse, Det, SLogDet, LU, LUFactor
)(square_check)


def _size(g, a):
    """n of the (..., n, n) matrices `a`, 0-d."""
    return g.Squeeze(g.Shape(a, start=-1), ints(g, [0]))


def swap_last(g, a, rank: int):
    """The matrices of `a` (of rank `rank`) transposed."""
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return g.Transpose(a, perm=perm)


def _nan_where(g, failed, value, dtype):
    """NaN where `failed` (one flag per matrix of the batch), broadcast over the matrices: a
    product with 1 or NaN per matrix, which keeps every other value exactly (-0 and inf
    included) and costs ONNX Runtime half a Where with a broadcast condition."""
    scale = g.Where(failed, constant(g, np.nan, dtype), constant(g, 1, dtype))
    return g.Mul(value, g.Unsqueeze(scale, ints(g, [-1, -2])))


def _triangle(g, a, lower: bool, k: int = 0):
    """The lower (or upper) triangle of the matrices `a`, from diagonal `k` on; the other
    entries are zeros whatever they held (NaN and inf included), as LAPACK never reads them."""
    return g.Trilu(a, ints(g, k), upper=0 if lower else 1)


def symmetric(g, a, lower: bool, rank: int):
    """The symmetric matrices LAPACK's symmetric routines see: the `lower` (or upper) triangle
    of `a`, mirrored."""
    strict = _triangle(g, a, lower, -1 if lower else 1)
    return g.Add(_triangle(g, a, lower), swap_last(g, strict, rank))


def _as_lower(g, a, lower: bool, rank: int):
    """The lower-triangular matrices that the `lower` (or upper, transposed) triangle of `a`
    holds."""
    return _triangle(g, a, True) if lower else swap_last(g, _triangle(g, a, False), rank)


# The largest block of Cholesky, LU and the triangular solves: matrices are padded (with an
# identity) to a multiple of the block size, blocks of columns (rows) are updated by MatMul,
# the diagonal blocks' triangular inverses come from log2(block) batched MatMul steps, and
# Cholesky's diagonal blocks are factored by a few unrolled nodes per column.
BLOCK = 32


def block_size(size: int | None) -> int:
    """The block size for matrices of static size `size` (None: unknown): a power of 2, at
    most BLOCK."""
    if size is None or size >= BLOCK:
        return BLOCK
    return 1 << max(size - 1, 0).bit_length()


# The blocks LU and Cholesky take for matrices of symbolic size n, each for n up to it (see
# by_block_size).
SMALL_BLOCKS = (4, 16)


def by_block_size(g, a, size: int | None, build, dtypes, kind: str):
    """The list of values (of `dtypes`) ``build(g, block, whole)`` returns for the matrices
    `a` (..., n, n), with the block for their size (`whole`: the block holds all n): for a
    static `size`, the size itself up to BLOCK (one block, nothing padded), its block_size
    above; for a symbolic one, the smallest of SMALL_BLOCKS and BLOCK that holds n, chosen at
    run time by nested Ifs. The blocked algorithms pad n to a multiple of the block and
    unroll a block's columns: a 3 x 3 matrix of symbolic size, padded to one block of BLOCK,
    ran ~8x the nodes it needs (LU ~25 per column, Cholesky ~5), and a Loop of one step; a
    static 20 x 20 one, padded to 32, 1.6x."""
    if size is not None:
        if size <= BLOCK:
            return build(g, max(size, 1), True)
        return build(g, block_size(size), False)
    n = _size(g, a)

    def tiers(g, blocks):
        if not blocks:
            return build(g, BLOCK, False)
        block, *larger = blocks
        results = g.If(
            g.LessOrEqual(n, ints(g, block)),
            then_branch=branch(g, kind, lambda g: build(g, block, True), dtypes),
            else_branch=branch(g, kind, lambda g: tiers(g, larger), dtypes),
            _outputs=len(dtypes),
        )
        return list(results) if len(dtypes) > 1 else [results]

    return tiers(g, [block for block in SMALL_BLOCKS if block < BLOCK])


def _top_left(g, x, n):
    """x[..., :n, :n] for 0-d int64 `n`."""
    first = g.Unsqueeze(n, ints(g, [0]))
    return g.Slice(x, ints(g, [0, 0]), g.Concat(first, first, axis=0), ints(g, [-2, -1]))


def _rows(g, x, start, end):
    """x[..., start:end, :] for 0-d int64 `start` and `end`."""
    return g.Slice(
        x, g.Unsqueeze(start, ints(g, [0])), g.Unsqueeze(end, ints(g, [0])), ints(g, [-2])
    )


def _columns(g, x, start, end):
    """x[..., start:end] for 0-d int64 `start` and `end`."""
    return g.Slice(
        x, g.Unsqueeze(start, ints(g, [0])), g.Unsqueeze(end, ints(g, [0])), ints(g, [-1])
    )


def _triangular_blocks(g, a, n, count, block: int, dtype: str, unit_diagonal: bool):
    """The `count` diagonal `block` x `block` blocks (..., count, block, block) of the lower
    triangle of the matrices `a` (..., n, n) (its strict lower triangle and ones on the
    diagonal if `unit_diagonal`), the last one completed past row n by an identity; gathered
    from `a` (n x block entries), so the rest of `a` is never read."""
    rows = range_to(g, n)
    starts = g.Mul(g.Div(rows, ints(g, block)), ints(g, block))
    columns = g.Min(  # past n only above the diagonal, which Trilu clears
        g.Add(g.Unsqueeze(starts, ints(g, [-1])), ints(g, np.arange(block))),
        g.Sub(n, ints(g, 1)),
    )
    batch = g.Shape(a, start=0, end=-2)
    columns = g.Expand(
        columns, g.Concat(batch, g.Unsqueeze(n, ints(g, [0])), ints(g, [block]), axis=0)
    )
    blocks = g.GatherElements(a, columns, axis=-1)  # (..., n, block): row i's block row
    # The rows past n, up to count x block, are the identity's (not a Where after the Trilu:
    # that is a pass over all the blocks).
    total = g.Mul(count, ints(g, block))
    eye = constant(g, np.eye(block), dtype)
    past = g.Gather(eye, g.Mod(g.Range(n, total, ints(g, 1)), ints(g, block)), axis=0)
    past = g.Expand(past, g.Concat(batch, g.Shape(past), axis=0))
    blocks = g.Concat(blocks, past, axis=-2)
    shape = g.Concat(batch, g.Unsqueeze(count, ints(g, [0])), ints(g, [block, block]), axis=0)
    blocks = _triangle(g, g.Reshape(blocks, shape, allowzero=1), True, -1 if unit_diagonal else 0)
    return g.Add(blocks, eye) if unit_diagonal else blocks


def _doubling_entries(block: int) -> np.ndarray:
    """The positions in a flattened `block` x `block` matrix of its diagonal, then of the
    blocks C that each doubling step of triangular_inverse joins, row by row."""
    entries = [i * (block + 1) for i in range(block)]
    size = 1
    while size < block:
        for p in range(block // (2 * size)):
            top = 2 * p * size
            entries += [
                (top + size + r) * block + top + c for r in range(size) for c in range(size)
            ]
        size *= 2
    return np.array(entries, np.int64)


def triangular_inverse(g, t, block: int):
    """The inverses of lower-triangular matrices `t` (..., block, block), `block` a power of 2,
    by doubling: from the 1 x 1 diagonal blocks' inverses, each step inverts blocks twice as
    large, [[A, 0], [C, D]]^-1 = [[A^-1, 0], [-D^-1 C A^-1, D^-1]], for all of them at once.
    The diagonal and every step's C are read from `t` by one Gather."""
    batch = g.Shape(t, start=0, end=-2)
    entries = g.Gather(
        g.Reshape(t, g.Concat(batch, ints(g, [block * block]), axis=0), allowzero=1),
        ints(g, _doubling_entries(block)),
        axis=-1,
    )
    diagonal = g.Slice(entries, ints(g, [0]), ints(g, [block]), ints(g, [-1]))
    inverse = g.Unsqueeze(g.Reciprocal(diagonal), ints(g, [-1, -2]))  # (..., block, 1, 1)
    joined = g.Neg(g.Slice(entries, ints(g, [block]), ints(g, [INT64_MAX]), ints(g, [-1])))  # -C
    size, offset = 1, 0
    while size < block:
        pairs = block // (2 * size)
        shape = g.Concat(batch, ints(g, [pairs, size, size]), axis=0)
        end = offset + pairs * size * size
        minus_c = g.Reshape(
            g.Slice(joined, ints(g, [offset]), ints(g, [end]), ints(g, [-1])),
            shape,
            allowzero=1,
        )
        offset = end
        a_inv = g.Slice(inverse, ints(g, [0]), ints(g, [block]), ints(g, [-3]), ints(g, [2]))
        d_inv = g.Slice(inverse, ints(g, [1]), ints(g, [block]), ints(g, [-3]), ints(g, [2]))
        if size == 1:  # not MatMul: ONNX Runtime runs one GEMM per 1 x 1 matrix, ~0.2 us each
            corner = g.Mul(g.Mul(d_inv, minus_c), a_inv)
        else:
            corner = g.MatMul(g.MatMul(d_inv, minus_c), a_inv)
        zeros = g.Expand(g.CastLike(ints(g, 0), t), shape)
        top = g.Concat(a_inv, zeros, axis=-1)
        bottom = g.Concat(corner, d_inv, axis=-1)
        inverse = g.Concat(top, bottom, axis=-2)
        size *= 2
    return g.Squeeze(inverse, ints(g, [-3]))


def _blocks(g, count, step, initial, kind: str):
    """A Loop over `count` blocks, ``done = step(g, k, done)`` for each: `done` grows by the
    block's rows (columns) from `initial`."""

    def body(g, k, done):
        return [step(g, k, done)]

    (result,) = loop(g, count, [initial], body, kind)
    return result


# Cholesky's panels: PANEL_BLOCKS blocks of columns per Loop step, factored one after the
# other in the step's unrolled body (4 blocks: ~10% faster at n = 1000, twice the nodes to
# export).
PANEL_BLOCKS = 2


def lower_factor(g, a, dtype: str, lower: bool, rank: int, size: int | None = None):
    """Cholesky of the symmetric matrices whose `lower` (or upper) triangle `a` holds (of
    static size `size` if known): the lower factor L, NaN for a matrix that is not positive
    definite (a pivot not > 0), as LAPACK's potrf reports it.

    Left-looking by panels of W columns, one Loop step each, on the matrices padded with an
    identity to a multiple of W: the step for the columns s:s+W carries the rows of L below
    them, R = L[s:, :s], computes T = A[s:, s:s+W] - R R[:W]^T (a MatMul) and factors it by
    blocks of B columns (_panel_factor); L's rows s:s+W are then finished and are the step's
    scan output, so no step copies more of L than R. B is what by_block_size gives, W is
    PANEL_BLOCKS blocks; a matrix one block holds is that block, factored with no Loop, and
    one of static size that one panel holds is that panel, its last block the columns left
    (nothing padded, no Loop)."""
    # The triangle potrf reads, as a lower one. The entries above its diagonal are never read:
    # each diagonal block is mirrored from its lower triangle (_block_factor).
    a = a if lower else swap_last(g, a, rank)
    n = _size(g, a)

    def by_blocks(g, block, whole: bool):  # the factor of `a` padded with an identity
        if whole:  # one block, no Loop
            t = _padded_panel(g, a, n, ints(g, block), ints(g, 0), block)
            return [_block_factor(g, t, rank, block)]
        if size is not None and size <= block * PANEL_BLOCKS:  # one panel, no Loop
            batch = g.Shape(a, start=0, end=-2)
            return [_panel_factor(g, a, dtype, rank, block, size, batch, whole=True)]
        return [_cholesky_panels(g, a, n, dtype, rank, block, block * PANEL_BLOCKS)]

    (padded,) = by_block_size(g, a, size, by_blocks, [onnx_dtype(dtype)], "cholesky")
    factor = _top_left(g, padded, n)
    pivots = _diagonal(g, factor, range_to(g, n))
    return _nan_where(
        g, any_last(g, g.Not(g.Greater(pivots, constant(g, 0, dtype)))), factor, dtype
    )


def _cholesky_panels(g, a, n, dtype: str, rank: int, block: int, panel: int):
    """The lower Cholesky factor (unchecked) of the lower triangles of `a` (..., n, n), padded
    with an identity to a multiple of `panel`: by panels of `panel` columns, one Loop step
    each, factored by blocks of `block`."""
    batch = g.Shape(a, start=0, end=-2)
    total = g.Mul(g.Div(g.Add(n, ints(g, panel - 1)), ints(g, panel)), ints(g, panel))
    width = ints(g, panel)
    top = ints(g, 0)

    def step(g, k, below):
        start = g.Mul(k, width)
        t = g.Sub(
            _padded_panel(g, a, n, total, start, panel),
            g.MatMul(below, swap_last(g, _rows(g, below, top, width), rank)),
        )
        columns = _panel_factor(g, t, dtype, rank, block, panel, batch)
        right = g.Unsqueeze(g.Sub(g.Sub(total, start), width), ints(g, [0]))
        zeros = g.Expand(constant(g, 0, dtype), g.Concat(batch, ints(g, [panel]), right, axis=0))
        finished = g.Concat(
            _rows(g, below, top, width), _rows(g, columns, top, width), zeros, axis=-1
        )
        below = g.Concat(_rows(g, below, width, total), _rows(g, columns, width, total), axis=-1)
        return [below, finished]

    count = g.Div(total, width)
    first = g.Unsqueeze(total, ints(g, [0]))
    initial = g.Expand(constant(g, 0, dtype), g.Concat(batch, first, ints(g, [0]), axis=0))
    _, rows = loop(g, count, [initial], step, "cholesky", stacked=[onnx_dtype(dtype)])
    return stacked_rows(g, rows, count, batch, panel, first, rank)


def _padded_panel(g, a, n, total, start, width: int):
    """The columns start:start+width, rows start: of the matrices `a` (..., n, n) padded to
    total x total with an identity (zeros, ones on the diagonal past n): only the panel is
    copied, never the whole matrix."""
    begin = g.Concat(g.Unsqueeze(start, ints(g, [0])), g.Unsqueeze(start, ints(g, [0])), axis=0)
    end = g.Add(start, ints(g, width))
    part = g.Slice(
        a,
        begin,
        g.Concat(ints(g, [INT64_MAX]), g.Unsqueeze(end, ints(g, [0])), axis=0),
        ints(g, [-2, -1]),
    )
    part = pad_zeros(g, part, -2, after=g.Unsqueeze(g.Sub(total, n), ints(g, [0])))
    missing = g.Max(g.Sub(end, n), ints(g, 0))
    part = pad_zeros(g, part, -1, after=g.Unsqueeze(missing, ints(g, [0])))
    rows = range_to(g, g.Sub(total, start))
    past = g.Unsqueeze(g.GreaterOrEqual(rows, g.Sub(n, start)), ints(g, [-1]))
    ones = g.And(g.Equal(g.Unsqueeze(rows, ints(g, [-1])), ints(g, np.arange(width))), past)
    return g.Add(part, g.CastLike(ones, part))


def stacked_rows(g, x, count, batch, height: int, columns, rank: int):
    """The matrices (..., count height, C) whose blocks of `height` rows a Loop stacked as its
    scan output `x` (count, ..., height, C), C given by the 1-element `columns`; with
    `columns` None, the vectors (..., count height) of blocks (count, ..., height) (an ONNX
    Runtime Loop that ran no step stacks to shape (0,))."""
    first = ints(g, [0])
    tail = [] if columns is None else [columns]
    shape = g.Concat(g.Unsqueeze(count, first), batch, ints(g, [height]), *tail, axis=0)
    x = g.Reshape(x, shape, allowzero=1)
    x = g.Transpose(x, perm=[*range(1, rank - 1), 0, rank - 1, *([rank] if tail else [])])
    rows = g.Unsqueeze(g.Mul(count, ints(g, height)), first)
    return g.Reshape(x, g.Concat(batch, rows, *tail, axis=0), allowzero=1)


def _panel_factor(g, t, dtype: str, rank: int, block: int, width: int, batch, whole=False):
    """The columns L[s:, s:s+width] of a Cholesky factor from the updated panel T = A[s:,
    s:s+width] - L[s:, :s] L[s:s+width, :s]^T (at least `width` rows), left-looking by blocks of
    `block` columns, unrolled: each block's columns updated by those before it (a MatMul), its
    top `block` rows factored (_block_factor), the rows below multiplied by the inverse of that
    factor (triangular_inverse), transposed. With `whole`, T is a whole matrix (`width` rows):
    its last block, the columns left (any number), has no rows below to solve for."""
    done = None
    for s in range(0, width, block):
        size = min(block, width - s)
        part = g.Slice(t, ints(g, [s, s]), ints(g, [INT64_MAX, s + size]), ints(g, [-2, -1]))
        if done is not None:
            below = g.Slice(done, ints(g, [s]), ints(g, [INT64_MAX]), ints(g, [-2]))
            top_rows = g.Slice(below, ints(g, [0]), ints(g, [size]), ints(g, [-2]))
            part = g.Sub(part, g.MatMul(below, swap_last(g, top_rows, rank)))
        top = _block_factor(
            g, g.Slice(part, ints(g, [0]), ints(g, [size]), ints(g, [-2])), rank, size
        )
        if whole and s + size == width:
            columns = top
        else:
            inverse = triangular_inverse(g, top, block)
            side = g.MatMul(
                g.Slice(part, ints(g, [block]), ints(g, [INT64_MAX]), ints(g, [-2])),
                swap_last(g, inverse, rank),
            )
            columns = g.Concat(top, side, axis=-2)
        if done is None:
            done = columns
        else:
            above = g.Expand(constant(g, 0, dtype), g.Concat(batch, ints(g, [s, size]), axis=0))
            done = g.Concat(done, g.Concat(above, columns, axis=-2), axis=-1)
    return done


def _block_factor(g, a, rank: int, block: int):
    """Right-looking Cholesky of the lower triangle of the `block` x `block` matrices `a`,
    unrolled, four nodes per column: with S what remains (symmetric), its row j, r = S[j, :],
    and pivot p = r[j]; then S -= r^T (r / p) (a Gemm). Row j is sqrt(p) times L's column j
    (a row, not a column: ONNX Runtime copies a row at once, a column entry by entry), so L is
    R^T with R's rows divided by the square roots of their pivots. R's entries left of the
    diagonal are rounding residues of the updates and are zeroed at the end; NaN or inf
    where a pivot is not > 0 (the caller checks L's diagonal)."""
    remaining = symmetric(g, a, True, rank)
    rows, pivots = [], []
    for j in range(block):
        row = g.Slice(remaining, ints(g, [j]), ints(g, [j + 1]), ints(g, [-2]))  # (..., 1, B)
        pivots.append(g.Slice(row, ints(g, [j]), ints(g, [j + 1]), ints(g, [-1])))
        rows.append(row)
        if j + 1 < block:
            scaled = g.Div(row, pivots[-1])
            if rank == 2:
                remaining = g.Gemm(scaled, row, remaining, alpha=-1.0, transA=1)
            else:
                remaining = g.Sub(remaining, g.MatMul(swap_last(g, scaled, rank), row))
    if block > 1:
        rows, pivots = [g.Concat(*rows, axis=-2)], [g.Concat(*pivots, axis=-2)]
    factor = swap_last(g, g.Div(rows[0], g.Sqrt(pivots[0])), rank)
    return _triangle(g, factor, True)


def _flip(g, x, axes):
    """`x` reversed along `axes`."""
    count = len(axes)
    return g.Slice(
        x,
        ints(g, [-1] * count),
        ints(g, [INT64_MIN] * count),
        ints(g, axes),
        ints(g, [-1] * count),
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
    reversed; a matrix of static size one block holds is x = inv_block b, with no Loop.

    A symbolic size takes BLOCK, not by_block_size's small blocks: with their Loop inside an
    If's branch, a solve with n right-hand sides at n = 1000 took 77 ms against 68 ms
    (interleaved), and each If cost ~6 us (~6% of a 1-rhs solve at n = 30), for ~30 us
    gained at n = 3."""
    n = _size(g, a)
    diagonal = _diagonal(g, a, range_to(g, n))
    if not lower:
        a, b = _flip(g, a, [-2, -1]), _flip(g, b, [-2])
    whole = size is not None and size <= BLOCK
    x = _substitution(g, a, b, n, dtype, unit_diagonal, block_size(size), whole)
    if not lower:
        x = _flip(g, x, [-2])
    if unit_diagonal or not nan_if_singular:
        return x
    smallest = g.ReduceMin(g.Abs(diagonal), ints(g, [-1]), keepdims=0)
    return _nan_where(g, g.Equal(smallest, constant(g, 0, dtype)), x, dtype)


def _substitution(g, a, b, n, dtype: str, unit_diagonal: bool, block: int, whole: bool):
    """x with a x = b for the lower triangle of the matrices `a` (..., n, n), by blocks of
    `block` rows (`whole`: one block holds n)."""
    count = ints(g, 1) if whole else g.Div(g.Add(n, ints(g, block - 1)), ints(g, block))
    inverses = triangular_inverse(
        g, _triangular_blocks(g, a, n, count, block, dtype, unit_diagonal), block
    )
    if whole:
        m = g.Unsqueeze(n, ints(g, [0]))
        inverse = g.Slice(
            g.Squeeze(inverses, ints(g, [-3])),
            ints(g, [0, 0]),
            g.Concat(m, m, axis=0),
            ints(g, [-2, -1]),
        )
        return g.MatMul(inverse, b)
    width = ints(g, block)

    def step(g, k, done):
        start = g.Mul(k, width)
        end = g.Add(start, width)  # past n for the last block: Slice stops at n
        rows = g.Slice(  # a[..., start:end, :start]
            a,
            g.Concat(g.Unsqueeze(start, ints(g, [0])), ints(g, [0]), axis=0),
            g.Concat(g.Unsqueeze(end, ints(g, [0])), g.Unsqueeze(start, ints(g, [0])), axis=0),
            ints(g, [-2, -1]),
        )
        rhs = g.Sub(_rows(g, b, start, end), g.MatMul(rows, done))
        m = g.Unsqueeze(g.Sub(g.Min(end, n), start), ints(g, [0]))
        inverse = g.Slice(
            g.Gather(inverses, k, axis=-3),
            ints(g, [0, 0]),
            g.Concat(m, m, axis=0),
            ints(g, [-2, -1]),
        )
        return g.Concat(done, g.MatMul(inverse, rhs), axis=-2)

    return _blocks(g, count, step, _rows(g, b, ints(g, 0), ints(g, 0)), "substitution")


def _diagonal(g, a, index):
    """The diagonals (..., n) of the matrices a (..., n, n)."""
    columns = g.Expand(
        g.Unsqueeze(index, ints(g, [-1])),
        g.Concat(g.Shape(a, start=0, end=-1), ints(g, [1]), axis=0),
    )
    return g.Squeeze(g.GatherElements(a, columns, axis=-1), ints(g, [-1]))


def diagonal(g, a):
    """The diagonals (..., n) of the matrices `a` (..., n, n)."""
    return _diagonal(g, a, range_to(g, _size(g, a)))


def lu_factor_blocked(g, a, dtype: str, rank: int, size: int | None = None):
    """LU with partial pivoting of the matrices `a` (..., n, n) (of static size `size` if
    known) by `_lu_blocks`, or by `_lu_panel_only` where one block holds n, with the block for
    that size (`by_block_size`); both factor `a` padded to a multiple of the block, and the
    first n rows (and columns) of what they return are a's factors."""
    dtypes = [onnx_dtype(dtype), ir.DataType.INT64, ir.DataType.INT64]

    def by_blocks(g, block, whole: bool):
        return (_lu_panel_only if whole else _lu_blocks)(g, a, dtype, rank, block)

    packed, ipiv, perm = by_block_size(g, a, size, by_blocks, dtypes, "lu")
    n = _size(g, a)
    first = g.Unsqueeze(n, ints(g, [0]))
    ipiv = g.Slice(ipiv, ints(g, [0]), first, ints(g, [-1]))
    perm = g.Slice(perm, ints(g, [0]), first, ints(g, [-1]))
    return _top_left(g, packed, n), ipiv, perm


def _padded_for_lu(g, a, n, total, unit, batch):
    """`a` (..., n, n) padded to (..., total, total), total - n at most the size of the
    identity `unit`: the rows past n are zeros and an identity (pivots of 1, no swap), built
    apart from `a`, so no pass over the whole matrix makes them."""
    extra = g.Unsqueeze(g.Sub(total, n), ints(g, [0]))
    ones = g.Slice(unit, ints(g, [0, 0]), g.Concat(extra, extra, axis=0))
    below = pad_zeros(g, ones, -1, before=g.Unsqueeze(n, ints(g, [0])))
    below = g.Expand(below, g.Concat(batch, g.Shape(below), axis=0))
    return g.Concat(pad_zeros(g, a, -1, after=extra), below, axis=-2)


def _lu_panel_only(g, a, dtype: str, rank: int, block: int):
    """LU as `_lu_blocks` gives it for matrices `a` (..., n, n) that one block holds (n <=
    `block`): their padding to block x block (the size of what it returns) is one panel,
    eliminated by `_lu_panel` with no Loop and no trailing matrix."""
    n = _size(g, a)
    batch = g.Shape(a, start=0, end=-2)
    unit = constant(g, np.eye(block), dtype)
    padded = _padded_for_lu(g, a, n, ints(g, block), unit, batch)
    packed, order, ipiv = _lu_panel(g, padded, dtype, block, batch, rank)
    return packed, ipiv, g.Squeeze(order, ints(g, [-1]))


def _lu_blocks(g, a, dtype: str, rank: int, block: int):
    """LU with partial pivoting of the matrices `a` (..., n, n), right-looking by blocks of
    `block` columns as getrf, one Loop step per block: the block's
    panel of columns is eliminated column by column (_lu_panel), its row swaps applied to the
    rest of the rows (the finished L columns to their left included, as laswp), then U12 =
    L11^-1 A12 (triangular_inverse) and A22 -= L21 U12, both MatMuls. The trailing matrix A22
    is what the next step carries; the block's finished rows of L\\U are the step's scan
    output.

    Returns, for `a` padded with an identity to (..., N, N), N a multiple of `block`: getrf's
    packed L\\U (..., N, N), its pivot rows ipiv (..., N) (row k swapped with ipiv[k] at step
    k) and the permutation `perm` (..., N) of the rows that L U factors (a[perm] = L U).
    """
    n = _size(g, a)
    total = g.Mul(g.Div(g.Add(n, ints(g, block - 1)), ints(g, block)), ints(g, block))
    batch = g.Shape(a, start=0, end=-2)
    unit = constant(g, np.eye(block), dtype)
    padded = _padded_for_lu(g, a, n, total, unit, batch)
    index = range_to(g, total)
    top = ints(g, [0])
    width = ints(g, [block])
    end = ints(g, [INT64_MAX])

    def block_step(g, k, trailing, left, rows):
        """`trailing`: A22 (..., H, H) in the rows' current order; `left`: the finished L
        columns of those rows (..., H, k block); `rows`: their rows in `a` (..., H, 1)."""
        panel = g.Slice(trailing, top, width, ints(g, [-1]))
        panel, order, pivot_rows = _lu_panel(g, panel, dtype, block, batch, rank)

        # The rows in the panel's order, gathered apart: the block's rows (finished by this
        # step) and the rows below them (the next step's), so no step copies the trailing
        # matrix or L's columns once more to split them.
        pivoted = g.Slice(order, top, width, ints(g, [-2]))
        below = g.Slice(order, width, end, ints(g, [-2]))
        right = g.Slice(trailing, width, end, ints(g, [-1]))
        rows = g.GatherElements(rows, order, axis=-2)
        l11 = g.Add(_triangle(g, g.Slice(panel, top, width, ints(g, [-2])), True, -1), unit)
        u12 = g.MatMul(triangular_inverse(g, l11, block), take_rows(g, right, pivoted, rank))
        l21 = g.Slice(panel, width, end, ints(g, [-2]))
        right = take_rows(g, right, below, rank)
        if rank == 2:
            trailing = g.Gemm(l21, u12, right, alpha=-1.0)
        else:
            trailing = g.Sub(right, g.MatMul(l21, u12))
        finished = g.Concat(
            take_rows(g, left, pivoted, rank),
            g.Slice(panel, top, width, ints(g, [-2])),
            u12,
            axis=-1,
        )
        left = g.Concat(take_rows(g, left, below, rank), l21, axis=-1)
        start = g.Mul(k, ints(g, block))
        return [
            trailing,
            left,
            g.Slice(rows, width, end, ints(g, [-2])),
            finished,
            g.Slice(rows, top, width, ints(g, [-2])),
            g.Add(pivot_rows, start),
        ]

    rows = g.Expand(
        g.Unsqueeze(index, ints(g, [-1])), g.Concat(batch, g.Shape(index), ints(g, [1]), axis=0)
    )
    count = g.Div(total, ints(g, block))
    int64 = ir.DataType.INT64
    *_, finished, perm, pivot_rows = loop(
        g,
        count,
        [padded, _columns(g, padded, ints(g, 0), ints(g, 0)), rows],
        block_step,
        "lu",
        stacked=[onnx_dtype(dtype), int64, int64],
    )
    packed = stacked_rows(g, finished, count, batch, block, g.Unsqueeze(total, top), rank)
    perm = stacked_rows(g, perm, count, batch, block, None, rank)  # each step's (..., block, 1)
    ipiv = stacked_rows(g, pivot_rows, count, batch, block, None, rank)
    return packed, ipiv, perm


def take_rows(g, x, rows, rank: int):
    """The rows `rows` (..., H, 1) of the matrices `x` (..., N, W) of rank `rank`, batch dims
    alike: one Gather (GatherND over batches), no index tensor of x's size."""
    if rank == 2:
        return g.Gather(x, g.Squeeze(rows, ints(g, [-1])), axis=0)
    return g.GatherND(x, rows, batch_dims=rank - 2)


def _lu_panel(g, panel, dtype: str, block: int, batch, rank: int):
    """getf2 on the panels (..., H, block), H >= block, unrolled, with its row swaps kept as
    a permutation until the end (so no step copies the panel to swap two rows): `order`, the
    row at each position. For each column j, the pivot is the first largest |entry| (NaN
    counted as inf, as OpenBLAS's idamax) at positions j on (the column read in position
    order, so ArgMax's first is idamax's); its position is swapped with position j, the
    multipliers of the rows not yet pivoted are their entries divided by it (a zero pivot
    skips the column, as getrf; the pivoted rows' are set to 0) and their rank-1 update is
    subtracted from the columns right of j. Returns the eliminated panels in position order,
    the order of their rows (..., H, 1) (the row at position i came from row order[i]) and the
    pivot positions (..., block).

    The work is on the panels transposed, (..., block, H): a column is then a contiguous row
    (ONNX Runtime slices an (H, 1) column out of an (H, block) panel element by element, ~20 us
    for H = 1000, and broadcasts a 0-d scalar against a column one element per call; rows
    have neither cost). One Where per column meets a whole column (ONNX Runtime's Where costs
    ~5x an arithmetic node); the scalars are (1, 1) all the same."""

    def scalar(value, dtype):
        return constant(g, np.full((1, 1), value), dtype)

    panel = swap_last(g, panel, rank)
    height = g.Shape(panel, start=-1)
    rows = g.Unsqueeze(range_to(g, g.Squeeze(height, ints(g, [0]))), ints(g, [0]))  # (1, H)
    rows = g.Expand(rows, g.Concat(batch, g.Shape(rows), axis=0))
    order = rows
    pivot_index = g.Concat(batch, ints(g, [block, 1]), axis=0)
    one_index = g.Concat(batch, ints(g, [1, 1]), axis=0)
    zeros = g.Expand(scalar(0, dtype), g.Concat(batch, ints(g, [1, block]), axis=0))
    zero = scalar(0, dtype)
    columns = np.arange(block)[:, None]
    multipliers, pivot_rows = [], []
    for j in range(block):
        at_j = scalar(j, "int64") if rank == 2 else g.Expand(scalar(j, "int64"), one_index)
        column = g.Slice(panel, ints(g, [j]), ints(g, [j + 1]), ints(g, [-2]))  # (..., 1, H)
        unpivoted = g.Slice(
            g.GatherElements(column, order, axis=-1),
            ints(g, [j]),
            ints(g, [INT64_MAX]),
            ints(g, [-1]),
        )
        size = g.Abs(unpivoted)
        size = g.Where(g.IsNaN(size), scalar(np.inf, dtype), size)
        at_q = g.Add(g.ArgMax(size, axis=-1, keepdims=1), at_j)  # (..., 1, 1): its position
        q = g.GatherElements(order, at_q, axis=-1)  # the pivot's row
        order = g.ScatterElements(
            order,
            g.Concat(at_j, at_q, axis=-1),
            g.Concat(q, g.GatherElements(order, at_j, axis=-1), axis=-1),
            axis=-1,
        )
        row = g.GatherElements(panel, g.Expand(q, pivot_index), axis=-1)  # (..., block, 1)
        pivot = g.Slice(row, ints(g, [j]), ints(g, [j + 1]), ints(g, [-2]))
        safe = g.Where(g.Equal(pivot, zero), scalar(1, dtype), pivot)
        factors = g.ScatterElements(  # 0 for the pivoted rows
            g.Div(column, safe),
            g.Slice(order, ints(g, [0]), ints(g, [j + 1]), ints(g, [-1])),
            g.Slice(zeros, ints(g, [0]), ints(g, [j + 1]), ints(g, [-1])),
            axis=-1,
        )
        if j + 1 < block:
            right = g.Where(constant(g, columns > j, "bool"), row, zero)
            if rank == 2:
                panel = g.Gemm(right, factors, panel, alpha=-1.0)
            else:
                panel = g.Sub(panel, g.Mul(right, factors))
        multipliers.append(factors)
        pivot_rows.append(at_q)
    # Row r, pivoted at step position[r] (or not: position >= block), holds U's entries from
    # that column on and the multipliers before it.
    position = g.ScatterElements(order, order, rows, axis=-1)
    lower = g.Concat(*multipliers, axis=-2) if block > 1 else multipliers[0]
    packed = g.Where(g.LessOrEqual(position, ints(g, columns)), panel, lower)
    packed = g.GatherElements(packed, g.Expand(order, g.Shape(packed)), axis=-1)
    ipiv = g.Squeeze(g.Concat(*pivot_rows, axis=-1), ints(g, [-2]))
    return swap_last(g, packed, rank), swap_last(g, order, rank), ipiv


def _lu_solve(g, packed, perm, b, dtype, size):
    """x with a x = b from a's LU factors (`packed`, `perm`: a[perm] = L U)."""
    # b[perm], batch dims broadcast (Expand broadcasts both ways).
    rows = g.Expand(g.Unsqueeze(perm, ints(g, [-1])), g.Shape(b))
    permuted = g.GatherElements(g.Expand(b, g.Shape(rows)), rows, axis=-2)
    y = solve_triangular(g, packed, permuted, dtype, True, True, size=size)
    return solve_triangular(g, packed, y, dtype, False, False, nan_if_singular=False, size=size)


def lu_solve_system(g, a, b, dtype: str, rank: int, size: int | None = None):
    """x with a x = b by LU with partial pivoting (no check for a singular `a`), and the
    pivots (the diagonal of U)."""
    packed, _, perm = lu_factor_blocked(g, a, dtype, rank, size)
    return _lu_solve(g, packed, perm, b, dtype, size), diagonal(g, packed)


def _swap_count(g, ipiv):
    """The number of row swaps getrf made (..)."""
    steps = range_to(g, g.Squeeze(g.Shape(ipiv, start=-1), ints(g, [0])))
    moved = g.Cast(g.Not(g.Equal(ipiv, steps)), to=ir.DataType.INT64)
    return g.ReduceSum(moved, ints(g, [-1]), keepdims=0)


def _matrix(g, b, b_ndim: int):
    return g.Unsqueeze(b, ints(g, [-1])) if b_ndim == 1 else b


def _unmatrix(g, x, b_ndim: int):
    return g.Squeeze(x, ints(g, [-1])) if b_ndim == 1 else x


def _as(g, var, value, dtype):
    return value if var.type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))


def _singular(g, pivots, dtype):
    return g.Equal(g.ReduceMin(g.Abs(pivots), ints(g, [-1]), keepdims=0), constant(g, 0, dtype))


@register(Cholesky)
@register_blockwise(Cholesky)
def cholesky(g, node, a):
    """Cholesky -> the column Loop on the triangle LAPACK reads (`lower`, else upper); NaN for
    a matrix that is not positive definite."""
    dtype = node.outputs[0].type.dtype
    rank, lower = node.inputs[0].type.ndim, _core(node).lower
    size = node.inputs[0].type.shape[-1]
    a = square_matrices(g, node.inputs[0], a, ValueError, "Input array is expected to be square")
    factor = lower_factor(g, _as(g, node.inputs[0], a, dtype), dtype, lower, rank, size)
    return factor if lower else swap_last(g, factor, rank)


@register(SolveTriangular)
@register_blockwise(SolveTriangular)
def solve_triangular_(g, node, a, b):
    """SolveTriangular -> substitution, one row per step."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    a = square_matrices(g, node.inputs[0], a, ValueError, "expected square matrix")
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
    c = square_matrices(g, node.inputs[0], c, ValueError, "The factored matrix c is not square.")
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
    a = square_matrices(g, node.inputs[0], a, ValueError, "Expected square matrix")
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
    a = _as(g, node.inputs[0], square_matrices(g, node.inputs[0], a), dtype)
    rank, size = node.inputs[0].type.ndim, node.inputs[0].type.shape[-1]
    return _solve_or_raise(g, a, identity_like(g, a, dtype), dtype, rank, size)


_SINGULAR = "Singular matrix"


def _solve_or_raise(g, a, b, dtype: str, rank: int, size: int | None):
    """x with a x = b by LU with partial pivoting; LinAlgError("Singular matrix") for a
    singular `a`, as NumPy's inv and solve raise."""
    x, pivots = lu_solve_system(g, a, b, dtype, rank, size)
    return raise_if(g, _singular(g, pivots, dtype), x, np.linalg.LinAlgError, _SINGULAR)


@register_check(TensorInv)
def _check_tensorinv(node):
    ind, shape = node.op.ind, node.inputs[0].type.shape
    if ind <= 0:
        return f"tensorinv with ind={ind} (NumPy's tensorinv needs a positive ind)"
    rows, columns = shape[ind:], shape[:ind]
    if None not in shape and math.prod(rows) != math.prod(columns):
        return (
            f"tensorinv(a, {ind}) of a tensor of shape {shape}, not square: "
            f"prod(shape[{ind}:]) is {math.prod(rows)}, prod(shape[:{ind}]) is "
            f"{math.prod(columns)}"
        )
    declared = node.outputs[0].type.shape
    result = rows + columns
    if any(d is not None and r is not None and d != r for d, r in zip(declared, result)):
        return (
            f"tensorinv(a, {ind}) of a tensor of shape {shape}: its result has shape "
            f"{result}, but PyTensor types its result as {declared}, like its input, and its "
            "own backends fail too; declare a's shape with None for its sizes"
        )
    return float_output_check(node)


@register(TensorInv)
def tensorinv(g, node, a):
    """TensorInv -> np.linalg.tensorinv: `a` as the square matrix of prod(shape[ind:]) rows,
    inverted by LU and shaped shape[ind:] + shape[:ind]; LinAlgError for a tensor that is not
    square in that sense (NumPy's words) or is singular. An empty tensor gives its empty
    inverse (NumPy's reshape to (0, -1) refuses it)."""
    dtype = node.outputs[0].type.dtype
    ind, shape = node.op.ind, node.inputs[0].type.shape
    a = _as(g, node.inputs[0], a, dtype)
    rows = g.ReduceProd(g.Shape(a, start=ind), keepdims=1)
    columns = g.ReduceProd(g.Shape(a, end=ind), keepdims=1)
    not_square = g.Not(g.Equal(rows, columns))
    a = raise_if(g, not_square, a, np.linalg.LinAlgError, NOT_SQUARE)
    matrix = g.Reshape(a, g.Concat(rows, columns, axis=0), allowzero=1)
    size = None if None in shape[ind:] else math.prod(shape[ind:])
    inverse = _solve_or_raise(g, matrix, identity_like(g, matrix, dtype), dtype, 2, size)
    result_shape = g.Concat(g.Shape(a, start=ind), g.Shape(a, end=ind), axis=0)
    return g.Reshape(inverse, result_shape, allowzero=1)


def _tensorsolve_order(ndim: int, axes) -> list[int]:
    """The axes of `a` as np.linalg.tensorsolve orders them: those in `axes` moved to the end,
    in their order."""
    order = list(range(ndim))
    for k in axes or ():
        order.remove(k)
        order.insert(ndim, k)
    return order


@register_check(TensorSolve)
def _check_tensorsolve(node):
    a, b = node.inputs
    axes = node.op.axes
    if axes is not None and (
        len(set(axes)) != len(axes) or not all(0 <= k < a.type.ndim for k in axes)
    ):
        return f"tensorsolve with axes={axes} (distinct axes of a, from 0 to {a.type.ndim - 1})"
    if a.type.ndim - b.type.ndim != 2:
        return (
            f"tensorsolve of a {a.type.ndim}-d a and a {b.type.ndim}-d b: PyTensor types its "
            f"result as a matrix, and NumPy's has a.ndim - b.ndim = "
            f"{a.type.ndim - b.type.ndim} dims, so PyTensor's own backends fail too"
        )
    return float_output_check(node)


@register(TensorSolve)
def tensorsolve(g, node, a, b):
    """TensorSolve -> np.linalg.tensorsolve: `a` with the axes in `axes` moved to the end,
    reshaped to the square matrix of prod(a.shape[b.ndim:]) columns, solved by LU against b
    raveled, the solution shaped as a's last two dims; LinAlgError for an `a` that is not
    square in that sense (NumPy's words) or is singular, ValueError for a `b` of another
    size."""
    dtype = node.outputs[0].type.dtype
    a_var, b_var = node.inputs
    a, b = _as(g, a_var, a, dtype), _as(g, b_var, b, dtype)
    order = _tensorsolve_order(a_var.type.ndim, node.op.axes)
    if order != sorted(order):
        a = g.Transpose(a, perm=order)
    unknowns = g.Shape(a, start=-2)
    count = g.ReduceProd(unknowns, keepdims=1)
    not_square = g.Not(g.Equal(g.Size(a), g.Squeeze(g.Mul(count, count), ints(g, [0]))))
    a = raise_if(g, not_square, a, np.linalg.LinAlgError, _NOT_SQUARE_SOLVE)
    mismatched = g.Not(g.Equal(g.Size(b), g.Squeeze(count, ints(g, [0]))))
    b = raise_if(g, mismatched, b, ValueError, _B_SIZE)
    matrix = g.Reshape(a, g.Concat(count, count, axis=0), allowzero=1)
    rhs = g.Reshape(b, g.Concat(count, ints(g, [1]), axis=0), allowzero=1)
    static = [a_var.type.shape[k] for k in order[-2:]]
    size = None if None in static else math.prod(static)
    x = _solve_or_raise(g, matrix, rhs, dtype, 2, size)
    return g.Reshape(x, unknowns, allowzero=1)


_NOT_SQUARE_SOLVE = (
    "Input arrays must satisfy the requirement prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim])"
)
_B_SIZE = "b must have as many entries as the solution has unknowns, prod(a.shape[b.ndim:])"


@register(Det)
@register_blockwise(Det)
def det(g, node, a):
    """Det -> the product of the LU pivots, negated for an odd number of row swaps; +0.0 for
    a singular matrix, as NumPy's sign * exp(log |det|)."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], square_matrices(g, node.inputs[0], a), dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    product = g.ReduceProd(diagonal(g, packed), ints(g, [-1]), keepdims=0)
    return _unsigned_zero(g, g.Mul(product, _parity_sign(g, _swap_count(g, ipiv), dtype)), dtype)


def _unsigned_zero(g, x, dtype):
    """x with -0.0 made +0.0 (-0.0 + 0.0 is +0.0; every other value is unchanged)."""
    return g.Add(x, constant(g, 0, dtype))


def _parity_sign(g, swaps, dtype):
    odd = g.Equal(g.Mod(swaps, ints(g, 2)), ints(g, 1))
    return g.Where(odd, constant(g, -1, dtype), constant(g, 1, dtype))


@register(SLogDet)
@register_blockwise(SLogDet)
def slogdet(g, node, a):
    """SLogDet -> the sign and the sum of log |pivot| of the LU pivots."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], square_matrices(g, node.inputs[0], a), dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    pivots, swaps = diagonal(g, packed), _swap_count(g, ipiv)
    sign = g.Mul(
        g.ReduceProd(g.Sign(pivots), ints(g, [-1]), keepdims=0), _parity_sign(g, swaps, dtype)
    )
    sign = _unsigned_zero(g, sign, dtype)  # NumPy's sign of a singular matrix: +0.0
    logabs = g.ReduceSum(g.Log(g.Abs(pivots)), ints(g, [-1]), keepdims=0)
    return [sign, logabs]


def _inverse_permutation(g, perm):
    """q with q[..., perm[..., i]] = i."""
    index = g.Expand(range_to(g, g.Squeeze(g.Shape(perm, start=-1), ints(g, [0]))), g.Shape(perm))
    return g.ScatterElements(perm, perm, index, axis=-1)


def identity_like(g, a, dtype):
    index = range_to(g, _size(g, a))
    return g.Cast(g.Equal(g.Unsqueeze(index, ints(g, [-1])), index), to=onnx_dtype(dtype))


# PyTensor's LU and LUFactor declare square matrices (signatures (m,m)->..., outputs typed
# with the input's shape, Numba's results of a non-square one of the wrong shapes); its
# Python backend calls SciPy, which factors m x n ones.
_LU_NOT_SQUARE = (
    NotImplementedError,
    (
        "LU of a non-square matrix is not translated: PyTensor's LU and LUFactor declare "
        "square matrices ((m,m) signatures), and SciPy's m x n factors are only its Python "
        "backend's"
    ),
)


@register(LUFactor)
@register_blockwise(LUFactor)
def lu_factor(g, node, a):
    """LUFactor -> getrf's packed L\\U and pivot rows from the elimination; NaN where a pivot is
    exactly zero, as PyTensor gives when getrf reports it. Square matrices only (below)."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], square_matrices(g, node.inputs[0], a, *_LU_NOT_SQUARE), dtype)
    size = node.inputs[0].type.shape[-1]
    packed, ipiv, _ = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    failed = any_last(g, g.Equal(diagonal(g, packed), constant(g, 0, dtype)))
    return [_nan_where(g, failed, packed, dtype), g.Cast(ipiv, to=onnx_dtype("int32"))]


@register(LU)
@register_blockwise(LU)
def lu(g, node, a):
    """LU -> SciPy's lu from the elimination: a = P L U with L unit lower triangular, as P,
    L, U; as p with a = L[p] U (`p_indices`); or as P L, U (`permute_l`)."""
    core = _core(node)
    dtype = node.outputs[-1].type.dtype
    a = _as(g, node.inputs[0], square_matrices(g, node.inputs[0], a, *_LU_NOT_SQUARE), dtype)
    size = node.inputs[0].type.shape[-1]
    packed, _, perm = lu_factor_blocked(g, a, dtype, node.inputs[0].type.ndim, size)
    lower = g.Add(_triangle(g, packed, True, -1), identity_like(g, a, dtype))
    upper = _triangle(g, packed, False)
    rows = _inverse_permutation(g, perm)  # a[i] = (L U)[rows[i]]
    if core.permute_l:
        gather = g.Expand(g.Unsqueeze(rows, ints(g, [-1])), g.Shape(lower))
        return [g.GatherElements(lower, gather, axis=-2), upper]
    if core.p_indices:
        return [g.Cast(rows, to=onnx_dtype(node.outputs[0].type.dtype)), lower, upper]
    index = range_to(g, _size(g, a))
    p_dtype = onnx_dtype(node.outputs[0].type.dtype)
    permutation = g.Cast(g.Equal(g.Unsqueeze(rows, ints(g, [-1])), index), to=p_dtype)
    return [permutation, lower, upper]


@register(PivotToPermutations)
@register_blockwise(PivotToPermutations)
def pivot_to_permutations(g, node, pivots):
    """PivotToPermutations -> getrf's row swaps applied in order to 0..n-1, one per Loop step
    (and inverted unless `inverse`)."""
    pivots = g.Cast(pivots, to=ir.DataType.INT64)
    n = g.Squeeze(g.Shape(pivots, start=-1), ints(g, [0]))
    batch = g.Concat(g.Shape(pivots, start=0, end=-1), ints(g, [1]), axis=0)

    def step(g, i, rows):
        j = g.Unsqueeze(g.Gather(pivots, i, axis=-1), ints(g, [-1]))
        at = g.Concat(g.Expand(g.Unsqueeze(i, ints(g, [0])), batch), j, axis=-1)
        swapped = g.Concat(
            g.GatherElements(rows, j, axis=-1),
            g.Gather(rows, g.Unsqueeze(i, ints(g, [0])), axis=-1),
            axis=-1,
        )
        return [g.ScatterElements(rows, at, swapped, axis=-1)]

    (rows,) = loop(g, n, [g.Expand(range_to(g, n), g.Shape(pivots))], step, "pivots")
    return rows if _core(node).inverse else _inverse_permutation(g, rows)


@register(BlockDiagonal)
@register_blockwise(BlockDiagonal)
def block_diagonal(g, node, *matrices):
    """BlockDiagonal -> each matrix padded with zeros to the full width at its columns, the
    rows concatenated (batch dims broadcast first)."""
    dtype = node.outputs[0].type.dtype
    matrices = [_as(g, var, m, dtype) for var, m in zip(node.inputs, matrices, strict=True)]
    if node.outputs[0].type.ndim > 2:
        batches = [g.Concat(g.Shape(m, start=0, end=-2), ints(g, [1, 1]), axis=0) for m in matrices]
        matrices = [
            _expand_all(g, m, [b for j, b in enumerate(batches) if j != i])
            for i, m in enumerate(matrices)
        ]
    widths = [g.Shape(m, start=-1) for m in matrices]
    total = widths[0]
    for width in widths[1:]:
        total = g.Add(total, width)
    blocks, left = [], ints(g, [0])
    for m, width in zip(matrices, widths, strict=True):
        right = g.Sub(g.Sub(total, left), width)
        blocks.append(pad_zeros(g, m, -1, before=left, after=right))
        left = g.Add(left, width)
    return g.Concat(*blocks, axis=-2)


def _expand_all(g, value, shapes):
    for shape in shapes:
        value = g.Expand(value, shape)
    return value
