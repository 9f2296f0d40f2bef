"""The Sylvester equation A X + X B = C (SolveSylvester), and so the continuous Lyapunov
equation and the bilinear method of the discrete one, whose PyTensor graphs call it.

PyTensor solves it by two real Schur decompositions and LAPACK's trsyl. Here it is the
Kronecker form (A kron I_n + I_m kron B^T) vec(X) = vec(C) (row-major vec), solved by the
blocked LU of ops/linalg.py: exact, batched, O((m n)^3) work in MatMul, so meant for the
small systems state-space models have; systems with m n above KRONECKER_LIMIT are refused
(a static size at export, a symbolic one when the model runs), as the (m n)^2 matrix would
not fit in memory.
"""

from pt_onnxscript.ops.common import ints, raise_if
from pt_onnxscript.ops.linalg import _as, _nan_where, _singular, lu_solve_system, swap_last
from pt_onnxscript.registry import register, register_blockwise, register_check

try:  # PyTensor 3
    from pytensor.tensor.linalg.solvers.linear_control import SolveSylvester
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.linear_control import SolveSylvester

# The largest m n solved in Kronecker form: a 4096 x 4096 float64 matrix is 128 MiB.
KRONECKER_LIMIT = 4096


def _sizes(node):
    """m and n (None where symbolic) of A X + X B = C."""
    c = node.inputs[2].type.shape
    return c[-2], c[-1]


@register_check(SolveSylvester)
def _check_size(node):
    m, n = _sizes(node)
    if m is not None and n is not None and m * n > KRONECKER_LIMIT:
        return (
            f"solve_sylvester of {m} x {n} systems: the Kronecker form this export solves needs "
            f"a {m * n} x {m * n} matrix (at most {KRONECKER_LIMIT}); PyTensor's Schur method "
            "(real Schur decomposition, trsyl) has no ONNX translation yet"
        )
    return None


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


@register(SolveSylvester)
@register_blockwise(SolveSylvester)
def solve_sylvester(g, node, a, b, c):
    """SolveSylvester -> (A kron I_n + I_m kron B^T) vec(X) = vec(C) by LU; NaN where that
    system is singular (A and -B share an eigenvalue: LAPACK's trsyl perturbs it instead)."""
    dtype = node.outputs[0].type.dtype
    a, b, c = (_as(g, var, x, dtype) for var, x in zip(node.inputs, (a, b, c), strict=True))
    rank = max(var.type.ndim for var in node.inputs)
    m = g.Shape(c, start=-2, end=-1)
    n = g.Shape(c, start=-1)
    size = g.Mul(m, n)
    too_large = g.Greater(g.Squeeze(size, ints(g, [0])), ints(g, KRONECKER_LIMIT))
    message = (
        f"solve_sylvester: m n above {KRONECKER_LIMIT}, too large for the Kronecker form this "
        "export solves"
    )
    a = raise_if(g, too_large, a, ValueError, message)  # before the large matrix is built
    system = g.Add(
        _kron_identity(g, a, n, left=True),
        _kron_identity(g, swap_last(g, b, node.inputs[1].type.ndim), m, left=False),
    )
    rhs = g.Reshape(
        c, g.Concat(g.Shape(c, start=0, end=-2), size, ints(g, [1]), axis=0), allowzero=1
    )
    x, pivots = lu_solve_system(g, system, rhs, dtype, rank, None)
    x = _nan_where(g, _singular(g, pivots, dtype), x, dtype)  # as Solve does
    # (..., m, n): x's batch dims (the broadcast of the inputs'), then c's matrix dims.
    shape = g.Concat(g.Shape(x, start=0, end=-2), g.Shape(c, start=-2), axis=0)
    return g.Reshape(x, shape, allowzero=1)
