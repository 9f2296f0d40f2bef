"""Linear algebra ONNX lacks, as Loops over columns of vectorised work.

Cholesky (left-looking, one column per step), triangular solves (one row per step), and LU
with partial pivoting (one elimination step per column) for Solve, MatrixInverse, Det and
SLogDet: n Loop iterations of O(n^2) batched work each. Every translation works on the last
two dims, so Blockwise versions run one Loop for the whole batch. Failures follow PyTensor:
NaN where it gives NaN (Cholesky and solves of non-positive-definite or singular systems),
LinAlgError where it raises (inverting a singular matrix: a failure guard in the model).
"""

import numpy as np
import onnx_ir as ir

from pt_onnxscript.ops.common import constant, loop, raise_if
from pt_onnxscript.registry import register, register_blockwise
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.decomposition.cholesky import Cholesky
    from pytensor.tensor.linalg.inverse import MatrixInverse
    from pytensor.tensor.linalg.solvers.general import Solve
    from pytensor.tensor.linalg.solvers.psd import CholeskySolve
    from pytensor.tensor.linalg.solvers.triangular import SolveTriangular
    from pytensor.tensor.linalg.summary import Det, SLogDet
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.nlinalg import Det, MatrixInverse, SLogDet
    from pytensor.tensor.slinalg import Cholesky, CholeskySolve, Solve, SolveTriangular


def _core(node):
    """The linalg Op of `node`, a Blockwise node or not."""
    return getattr(node.op, "core_op", node.op)


def _int(g, value):
    return constant(g, value, "int64")


def _size(g, a):
    """n of the (..., n, n) matrices `a`, 0-d."""
    return g.Squeeze(g.Shape(a, start=-1), _int(g, [0]))


def _positions(g, n):
    return g.Range(_int(g, 0), n, _int(g, 1))


def _swap_last(g, a, rank: int):
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
    return g.Add(_triangle(g, a, lower), _swap_last(g, strict, rank))


def _as_lower(g, a, lower: bool, rank: int):
    """The lower-triangular matrices that the `lower` (or upper, transposed) triangle of `a`
    holds."""
    return _triangle(g, a, True) if lower else _swap_last(g, _triangle(g, a, False), rank)


def lower_factor(g, a, dtype: str, lower: bool, rank: int):
    """Left-looking Cholesky of the symmetric matrices whose `lower` (or upper) triangle `a`
    holds: the lower factor L, column j being (a[:, j] - L L[j]^T) / sqrt(its j-th entry);
    NaN for a matrix that is not positive definite, as LAPACK's potrf reports it."""
    a = _as_lower(g, a, lower, rank)
    n = _size(g, a)
    index = _positions(g, n)
    zero = constant(g, 0, dtype)

    def step(g, j, factor, ok):
        row = g.Gather(factor, j, axis=-2)
        v = g.Sub(
            g.Gather(a, j, axis=-1),
            g.Squeeze(g.MatMul(factor, g.Unsqueeze(row, _int(g, [-1]))), _int(g, [-1])),
        )
        d = g.Gather(v, j, axis=-1)
        root = g.Sqrt(d)
        column = g.Where(g.Greater(index, j), g.Div(v, g.Unsqueeze(root, _int(g, [-1]))), zero)
        column = g.Where(g.Equal(index, j), g.Unsqueeze(root, _int(g, [-1])), column)
        one_hot = g.Cast(g.Equal(index, j), to=onnx_dtype(dtype))
        factor = g.Add(factor, g.Mul(g.Unsqueeze(column, _int(g, [-1])), one_hot))
        return [factor, g.And(ok, g.Greater(d, zero))]

    batch_ok = g.Expand(constant(g, True, "bool"), g.Shape(a, start=0, end=-2))
    factor, ok = loop(g, n, [g.Expand(zero, g.Shape(a)), batch_ok], step, "cholesky")
    return _nan_where(g, g.Not(ok), factor, dtype)


def solve_triangular(g, a, b, dtype: str, lower: bool, unit_diagonal: bool, nan_if_singular=True):
    """Substitution, one row of x per step (top down for lower, bottom up for upper), reading
    only the `lower` (or upper) triangle of `a` and, unless `unit_diagonal`, its diagonal;
    NaN if a diagonal entry is zero and `nan_if_singular`, as LAPACK's trtrs reports."""
    n = _size(g, a)
    index = _positions(g, n)
    last = g.Sub(n, _int(g, 1))
    diagonal = _diagonal(g, a, index)
    a = _triangle(g, a, lower, (-1 if lower else 1) if unit_diagonal else 0)

    def step(g, t, x):
        i = t if lower else g.Sub(last, t)
        row = g.Gather(a, i, axis=-2)
        done = g.Squeeze(g.MatMul(g.Unsqueeze(row, _int(g, [-2])), x), _int(g, [-2]))
        value = g.Sub(g.Gather(b, i, axis=-2), done)
        if not unit_diagonal:
            value = g.Div(value, g.Unsqueeze(g.Gather(row, i, axis=-1), _int(g, [-1])))
        at_i = g.Unsqueeze(g.Equal(index, i), _int(g, [-1]))
        return [g.Where(at_i, g.Unsqueeze(value, _int(g, [-2])), x)]

    (x,) = loop(g, n, [g.Expand(constant(g, 0, dtype), g.Shape(b))], step, "substitution")
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


def lu_eliminate(g, a, b, dtype: str):
    """Gaussian elimination with partial pivoting (LAPACK's getrf order) on [a | b].

    Returns U, the eliminated b, the pivots (..., n) and the number of row swaps (...).
    """
    n = _size(g, a)
    index = _positions(g, n)
    zero = constant(g, 0, dtype)
    columns = g.Squeeze(g.Shape(a, start=-1), _int(g, [0]))
    augmented = g.Concat(a, b, axis=-1)

    def step(g, k, m, swaps, pivots):
        column = g.Gather(m, k, axis=-1)
        candidates = g.Where(g.Less(index, k), constant(g, -1, dtype), g.Abs(column))
        p = g.ArgMax(candidates, axis=-1, keepdims=1)
        order = g.Where(g.Equal(index, k), p, g.Where(g.Equal(index, p), k, index))
        m = g.GatherElements(m, g.Expand(g.Unsqueeze(order, _int(g, [-1])), g.Shape(m)), axis=-2)
        swaps = g.Add(
            swaps, g.Cast(g.Squeeze(g.Not(g.Equal(p, k)), _int(g, [-1])), to=ir.DataType.INT64)
        )
        row = g.Gather(m, k, axis=-2)
        pivot = g.Gather(row, k, axis=-1)
        # A zero pivot means a zero column below it: like getrf, skip the elimination.
        safe = g.Where(g.Equal(pivot, zero), constant(g, 1, dtype), pivot)
        factors = g.Div(g.Gather(m, k, axis=-1), g.Unsqueeze(safe, _int(g, [-1])))
        factors = g.Where(g.Greater(index, k), factors, zero)
        m = g.Sub(m, g.Mul(g.Unsqueeze(factors, _int(g, [-1])), g.Unsqueeze(row, _int(g, [-2]))))
        pivots = g.Add(
            pivots,
            g.Mul(
                g.Cast(g.Equal(index, k), to=onnx_dtype(dtype)), g.Unsqueeze(pivot, _int(g, [-1]))
            ),
        )
        return [m, swaps, pivots]

    batch = g.Shape(a, start=0, end=-2)
    m, swaps, pivots = loop(
        g,
        n,
        [augmented, g.Expand(_int(g, 0), batch), g.Mul(_diagonal(g, a, index), zero)],
        step,
        "lu",
    )
    upper = g.Slice(m, _int(g, [0]), g.Reshape(columns, _int(g, [1])), _int(g, [-1]))
    rest = g.Slice(
        m, g.Reshape(columns, _int(g, [1])), _int(g, [np.iinfo(np.int64).max]), _int(g, [-1])
    )
    return upper, rest, pivots, swaps


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
    factor = lower_factor(g, _as(g, node.inputs[0], a, dtype), dtype, lower, rank)
    return factor if lower else _swap_last(g, factor, rank)


@register(SolveTriangular)
@register_blockwise(SolveTriangular)
def solve_triangular_(g, node, a, b):
    """SolveTriangular -> substitution, one row per step."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    a, b = _as(g, node.inputs[0], a, dtype), _as(g, node.inputs[1], b, dtype)
    x = solve_triangular(g, a, _matrix(g, b, core.b_ndim), dtype, core.lower, core.unit_diagonal)
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
    y = solve_triangular(
        g, lower, _matrix(g, b, core.b_ndim), dtype, True, False, nan_if_singular=False
    )
    x = solve_triangular(
        g, _swap_last(g, lower, rank), y, dtype, False, False, nan_if_singular=False
    )
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
        factor = lower_factor(g, a, dtype, core.lower, rank)
        y = solve_triangular(g, factor, b, dtype, True, False)
        x = solve_triangular(g, _swap_last(g, factor, rank), y, dtype, False, False)
        return _unmatrix(g, x, core.b_ndim)
    if core.assume_a in ("sym", "her"):
        a = symmetric(g, a, core.lower, rank)
    elif core.assume_a == "tridiagonal":
        a = _triangle(g, _triangle(g, a, True, 1), False, -1)
    upper, c, pivots, _ = lu_eliminate(g, a, b, dtype)
    x = solve_triangular(g, upper, c, dtype, False, False)
    x = _nan_where(g, _singular(g, pivots, dtype), x, dtype)
    return _unmatrix(g, x, core.b_ndim)


@register(MatrixInverse)
@register_blockwise(MatrixInverse)
def matrix_inverse(g, node, a):
    """MatrixInverse -> LU solve against the identity; raises for a singular matrix, as
    np.linalg.inv does."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    index = _positions(g, _size(g, a))
    identity = g.Cast(g.Equal(g.Unsqueeze(index, _int(g, [-1])), index), to=onnx_dtype(dtype))
    identity = g.Expand(identity, g.Shape(a))
    upper, c, pivots, _ = lu_eliminate(g, a, identity, dtype)
    inverse = solve_triangular(g, upper, c, dtype, False, False)
    return raise_if(
        g, _singular(g, pivots, dtype), inverse, np.linalg.LinAlgError, "Singular matrix"
    )


@register(Det)
@register_blockwise(Det)
def det(g, node, a):
    """Det -> the product of the LU pivots, negated for an odd number of row swaps."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    _, _, pivots, swaps = lu_eliminate(
        g, a, g.Slice(a, _int(g, [0]), _int(g, [0]), _int(g, [-1])), dtype
    )
    product = g.ReduceProd(pivots, _int(g, [-1]), keepdims=0)
    return g.Mul(product, _parity_sign(g, swaps, dtype))


def _parity_sign(g, swaps, dtype):
    odd = g.Equal(g.Mod(swaps, _int(g, 2)), _int(g, 1))
    return g.Where(odd, constant(g, -1, dtype), constant(g, 1, dtype))


@register(SLogDet)
@register_blockwise(SLogDet)
def slogdet(g, node, a):
    """SLogDet -> the sign and the sum of log |pivot| of the LU pivots."""
    dtype = node.outputs[0].type.dtype
    a = _as(g, node.inputs[0], a, dtype)
    _, _, pivots, swaps = lu_eliminate(
        g, a, g.Slice(a, _int(g, [0]), _int(g, [0]), _int(g, [-1])), dtype
    )
    sign = g.Mul(
        g.ReduceProd(g.Sign(pivots), _int(g, [-1]), keepdims=0), _parity_sign(g, swaps, dtype)
    )
    logabs = g.ReduceSum(g.Log(g.Abs(pivots)), _int(g, [-1]), keepdims=0)
    return [sign, logabs]
