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


def _int(op, value):
    return constant(op, value, "int64")


def _size(op, a):
    """n of the (..., n, n) matrices `a`, 0-d."""
    return op.Squeeze(op.Shape(a, start=-1), _int(op, [0]))


def _positions(op, n):
    return op.Range(_int(op, 0), n, _int(op, 1))


def _swap_last(op, a, rank: int):
    """The matrices of `a` (of rank `rank`) transposed."""
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return op.Transpose(a, perm=perm)


def _nan_where(op, failed, value, dtype):
    """NaN where `failed` (one flag per matrix of the batch), broadcast over the matrices."""
    return op.Where(op.Unsqueeze(failed, _int(op, [-1, -2])), constant(op, np.nan, dtype), value)


def _triangle(op, a, lower: bool, k: int = 0):
    """The lower (or upper) triangle of the matrices `a`, from diagonal `k` on; the other
    entries are zeros whatever they held (NaN and inf included), as LAPACK never reads them."""
    return op.Trilu(a, _int(op, k), upper=0 if lower else 1)


def symmetric(op, a, lower: bool, rank: int):
    """The symmetric matrices LAPACK's symmetric routines see: the `lower` (or upper) triangle
    of `a`, mirrored."""
    strict = _triangle(op, a, lower, -1 if lower else 1)
    return op.Add(_triangle(op, a, lower), _swap_last(op, strict, rank))


def _as_lower(op, a, lower: bool, rank: int):
    """The lower-triangular matrices that the `lower` (or upper, transposed) triangle of `a`
    holds."""
    return _triangle(op, a, True) if lower else _swap_last(op, _triangle(op, a, False), rank)


def lower_factor(op, a, dtype: str, lower: bool, rank: int):
    """Left-looking Cholesky of the symmetric matrices whose `lower` (or upper) triangle `a`
    holds: the lower factor L, column j being (a[:, j] - L L[j]^T) / sqrt(its j-th entry);
    NaN for a matrix that is not positive definite, as LAPACK's potrf reports it."""
    a = _as_lower(op, a, lower, rank)
    n = _size(op, a)
    index = _positions(op, n)
    zero = constant(op, 0, dtype)

    def step(op, j, factor, ok):
        row = op.Gather(factor, j, axis=-2)
        v = op.Sub(op.Gather(a, j, axis=-1), op.Squeeze(op.MatMul(factor, op.Unsqueeze(row, _int(op, [-1]))), _int(op, [-1])))
        d = op.Gather(v, j, axis=-1)
        root = op.Sqrt(d)
        column = op.Where(op.Greater(index, j), op.Div(v, op.Unsqueeze(root, _int(op, [-1]))), zero)
        column = op.Where(op.Equal(index, j), op.Unsqueeze(root, _int(op, [-1])), column)
        one_hot = op.Cast(op.Equal(index, j), to=onnx_dtype(dtype))
        factor = op.Add(factor, op.Mul(op.Unsqueeze(column, _int(op, [-1])), one_hot))
        return [factor, op.And(ok, op.Greater(d, zero))]

    batch_ok = op.Expand(constant(op, True, "bool"), op.Shape(a, start=0, end=-2))
    factor, ok = loop(op, n, [op.Expand(zero, op.Shape(a)), batch_ok], step, "cholesky")
    return _nan_where(op, op.Not(ok), factor, dtype)


def solve_triangular(op, a, b, dtype: str, lower: bool, unit_diagonal: bool, nan_if_singular=True):
    """Substitution, one row of x per step (top down for lower, bottom up for upper), reading
    only the `lower` (or upper) triangle of `a` and, unless `unit_diagonal`, its diagonal;
    NaN if a diagonal entry is zero and `nan_if_singular`, as LAPACK's trtrs reports."""
    n = _size(op, a)
    index = _positions(op, n)
    last = op.Sub(n, _int(op, 1))
    diagonal = _diagonal(op, a, index)
    a = _triangle(op, a, lower, (-1 if lower else 1) if unit_diagonal else 0)

    def step(op, t, x):
        i = t if lower else op.Sub(last, t)
        row = op.Gather(a, i, axis=-2)
        done = op.Squeeze(op.MatMul(op.Unsqueeze(row, _int(op, [-2])), x), _int(op, [-2]))
        value = op.Sub(op.Gather(b, i, axis=-2), done)
        if not unit_diagonal:
            value = op.Div(value, op.Unsqueeze(op.Gather(row, i, axis=-1), _int(op, [-1])))
        at_i = op.Unsqueeze(op.Equal(index, i), _int(op, [-1]))
        return [op.Where(at_i, op.Unsqueeze(value, _int(op, [-2])), x)]

    (x,) = loop(op, n, [op.Expand(constant(op, 0, dtype), op.Shape(b))], step, "substitution")
    if unit_diagonal or not nan_if_singular:
        return x
    smallest = op.ReduceMin(op.Abs(diagonal), _int(op, [-1]), keepdims=0)
    return _nan_where(op, op.Equal(smallest, constant(op, 0, dtype)), x, dtype)


def _diagonal(op, a, index):
    """The diagonals (..., n) of the matrices a (..., n, n)."""
    columns = op.Expand(
        op.Unsqueeze(index, _int(op, [-1])),
        op.Concat(op.Shape(a, start=0, end=-1), _int(op, [1]), axis=0),
    )
    return op.Squeeze(op.GatherElements(a, columns, axis=-1), _int(op, [-1]))


def lu_eliminate(op, a, b, dtype: str):
    """Gaussian elimination with partial pivoting (LAPACK's getrf order) on [a | b].

    Returns U, the eliminated b, the pivots (..., n) and the number of row swaps (...).
    """
    n = _size(op, a)
    index = _positions(op, n)
    zero = constant(op, 0, dtype)
    columns = op.Squeeze(op.Shape(a, start=-1), _int(op, [0]))
    augmented = op.Concat(a, b, axis=-1)

    def step(op, k, m, swaps, pivots):
        column = op.Gather(m, k, axis=-1)
        candidates = op.Where(op.Less(index, k), constant(op, -1, dtype), op.Abs(column))
        p = op.ArgMax(candidates, axis=-1, keepdims=1)
        order = op.Where(op.Equal(index, k), p, op.Where(op.Equal(index, p), k, index))
        m = op.GatherElements(m, op.Expand(op.Unsqueeze(order, _int(op, [-1])), op.Shape(m)), axis=-2)
        swaps = op.Add(swaps, op.Cast(op.Squeeze(op.Not(op.Equal(p, k)), _int(op, [-1])), to=ir.DataType.INT64))
        row = op.Gather(m, k, axis=-2)
        pivot = op.Gather(row, k, axis=-1)
        # A zero pivot means a zero column below it: like getrf, skip the elimination.
        safe = op.Where(op.Equal(pivot, zero), constant(op, 1, dtype), pivot)
        factors = op.Div(op.Gather(m, k, axis=-1), op.Unsqueeze(safe, _int(op, [-1])))
        factors = op.Where(op.Greater(index, k), factors, zero)
        m = op.Sub(m, op.Mul(op.Unsqueeze(factors, _int(op, [-1])), op.Unsqueeze(row, _int(op, [-2]))))
        pivots = op.Add(pivots, op.Mul(op.Cast(op.Equal(index, k), to=onnx_dtype(dtype)), op.Unsqueeze(pivot, _int(op, [-1]))))
        return [m, swaps, pivots]

    batch = op.Shape(a, start=0, end=-2)
    m, swaps, pivots = loop(
        op, n,
        [augmented, op.Expand(_int(op, 0), batch), op.Mul(_diagonal(op, a, index), zero)],
        step, "lu",
    )
    upper = op.Slice(m, _int(op, [0]), op.Reshape(columns, _int(op, [1])), _int(op, [-1]))
    rest = op.Slice(m, op.Reshape(columns, _int(op, [1])), _int(op, [np.iinfo(np.int64).max]), _int(op, [-1]))
    return upper, rest, pivots, swaps


def _matrix(op, b, b_ndim: int):
    return op.Unsqueeze(b, _int(op, [-1])) if b_ndim == 1 else b


def _unmatrix(op, x, b_ndim: int):
    return op.Squeeze(x, _int(op, [-1])) if b_ndim == 1 else x


def _as(op, var, value, dtype):
    return value if var.type.dtype == dtype else op.Cast(value, to=onnx_dtype(dtype))


def _singular(op, pivots, dtype):
    return op.Equal(op.ReduceMin(op.Abs(pivots), _int(op, [-1]), keepdims=0), constant(op, 0, dtype))


@register(Cholesky)
@register_blockwise(Cholesky)
def cholesky(op, node, a):
    """Cholesky -> the column Loop on the triangle LAPACK reads (`lower`, else upper); NaN for
    a matrix that is not positive definite."""
    dtype = node.outputs[0].type.dtype
    rank, lower = node.inputs[0].type.ndim, _core(node).lower
    factor = lower_factor(op, _as(op, node.inputs[0], a, dtype), dtype, lower, rank)
    return factor if lower else _swap_last(op, factor, rank)


@register(SolveTriangular)
@register_blockwise(SolveTriangular)
def solve_triangular_(op, node, a, b):
    """SolveTriangular -> substitution, one row per step."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    a, b = _as(op, node.inputs[0], a, dtype), _as(op, node.inputs[1], b, dtype)
    x = solve_triangular(op, a, _matrix(op, b, core.b_ndim), dtype, core.lower, core.unit_diagonal)
    return _unmatrix(op, x, core.b_ndim)


@register(CholeskySolve)
@register_blockwise(CholeskySolve)
def cholesky_solve(op, node, c, b):
    """CholeskySolve -> two substitutions: L y = b then L^T x = y for a lower factor L
    (A = L L^T), U^T y = b then U x = y for an upper factor U (A = U^T U). Like LAPACK's potrs,
    a zero on the diagonal gives infinities or NaN, not a NaN-filled result."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    rank = node.inputs[0].type.ndim
    c, b = _as(op, node.inputs[0], c, dtype), _as(op, node.inputs[1], b, dtype)
    lower = _as_lower(op, c, core.lower, rank)
    y = solve_triangular(op, lower, _matrix(op, b, core.b_ndim), dtype, True, False, nan_if_singular=False)
    x = solve_triangular(op, _swap_last(op, lower, rank), y, dtype, False, False, nan_if_singular=False)
    return _unmatrix(op, x, core.b_ndim)


@register(Solve)
@register_blockwise(Solve)
def solve(op, node, a, b):
    """Solve -> for assume_a="pos", Cholesky of the triangle SciPy reads and two substitutions;
    otherwise LU with partial pivoting and back substitution, of the symmetric matrix the
    triangle defines ("sym", "her"), of the band ("tridiagonal") or of `a`; NaN for a singular
    (or, for "pos", not positive definite) system."""
    dtype = node.outputs[0].type.dtype
    core = _core(node)
    rank = node.inputs[0].type.ndim
    a, b = _as(op, node.inputs[0], a, dtype), _as(op, node.inputs[1], b, dtype)
    b = _matrix(op, b, core.b_ndim)
    if core.assume_a == "pos":
        factor = lower_factor(op, a, dtype, core.lower, rank)
        y = solve_triangular(op, factor, b, dtype, True, False)
        x = solve_triangular(op, _swap_last(op, factor, rank), y, dtype, False, False)
        return _unmatrix(op, x, core.b_ndim)
    if core.assume_a in ("sym", "her"):
        a = symmetric(op, a, core.lower, rank)
    elif core.assume_a == "tridiagonal":
        a = _triangle(op, _triangle(op, a, True, 1), False, -1)
    upper, c, pivots, _ = lu_eliminate(op, a, b, dtype)
    x = solve_triangular(op, upper, c, dtype, False, False)
    x = _nan_where(op, _singular(op, pivots, dtype), x, dtype)
    return _unmatrix(op, x, core.b_ndim)


@register(MatrixInverse)
@register_blockwise(MatrixInverse)
def matrix_inverse(op, node, a):
    """MatrixInverse -> LU solve against the identity; raises for a singular matrix, as
    np.linalg.inv does."""
    dtype = node.outputs[0].type.dtype
    a = _as(op, node.inputs[0], a, dtype)
    index = _positions(op, _size(op, a))
    identity = op.Cast(op.Equal(op.Unsqueeze(index, _int(op, [-1])), index), to=onnx_dtype(dtype))
    identity = op.Expand(identity, op.Shape(a))
    upper, c, pivots, _ = lu_eliminate(op, a, identity, dtype)
    inverse = solve_triangular(op, upper, c, dtype, False, False)
    return raise_if(op, _singular(op, pivots, dtype), inverse, np.linalg.LinAlgError, "Singular matrix")


@register(Det)
@register_blockwise(Det)
def det(op, node, a):
    """Det -> the product of the LU pivots, negated for an odd number of row swaps."""
    dtype = node.outputs[0].type.dtype
    a = _as(op, node.inputs[0], a, dtype)
    _, _, pivots, swaps = lu_eliminate(op, a, op.Slice(a, _int(op, [0]), _int(op, [0]), _int(op, [-1])), dtype)
    product = op.ReduceProd(pivots, _int(op, [-1]), keepdims=0)
    return op.Mul(product, _parity_sign(op, swaps, dtype))


def _parity_sign(op, swaps, dtype):
    odd = op.Equal(op.Mod(swaps, _int(op, 2)), _int(op, 1))
    return op.Where(odd, constant(op, -1, dtype), constant(op, 1, dtype))


@register(SLogDet)
@register_blockwise(SLogDet)
def slogdet(op, node, a):
    """SLogDet -> the sign and the sum of log |pivot| of the LU pivots."""
    dtype = node.outputs[0].type.dtype
    a = _as(op, node.inputs[0], a, dtype)
    _, _, pivots, swaps = lu_eliminate(op, a, op.Slice(a, _int(op, [0]), _int(op, [0]), _int(op, [-1])), dtype)
    sign = op.Mul(op.ReduceProd(op.Sign(pivots), _int(op, [-1]), keepdims=0), _parity_sign(op, swaps, dtype))
    logabs = op.ReduceSum(op.Log(op.Abs(pivots)), _int(op, [-1]), keepdims=0)
    return [sign, logabs]
