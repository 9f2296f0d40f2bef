"""Functions of a matrix: the exponential."""

import numpy as np
import onnx_ir as ir

from pt_onnxscript.ops.common import constant, ints, loop
from pt_onnxscript.ops.linalg import (
    identity_like,
    lu_solve_system,
    square_float_check,
    square_matrices,
)
from pt_onnxscript.registry import register, register_blockwise, register_check
from pt_onnxscript.types import onnx_dtype

try:  # PyTensor 3
    from pytensor.tensor.linalg.products import Expm
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.slinalg import Expm

# Higham (2005), "The scaling and squaring method for the matrix exponential revisited":
# the [13/13] Padé approximant's coefficients, and the 1-norm up to which it is accurate to
# double precision's unit roundoff.
PADE_13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
THETA_13 = 5.371920351148152
# More squarings than any finite float64 matrix needs (its 1-norm is below 2**1024): an
# infinite norm stops there, with a non-finite result.
MOST_SQUARINGS = 1100


def _one_norm(g, a, dtype):
    """max_j sum_i |a_ij| of each matrix of `a` (..), 0 for an empty matrix."""
    columns = g.ReduceSum(g.Abs(a), ints(g, [-2]), keepdims=0)
    return g.Max(g.ReduceMax(columns, ints(g, [-1]), keepdims=0), constant(g, 0, dtype))


def _squarings(g, norm, dtype):
    """s = max(0, ceil(log2(norm / theta_13))) per matrix, in `dtype`; 0 for a NaN norm."""
    theta = constant(g, THETA_13, dtype)
    needed = g.Ceil(g.Div(g.Log(g.Div(norm, theta)), constant(g, np.log(2.0), dtype)))
    capped = g.Min(needed, constant(g, MOST_SQUARINGS, dtype))
    return g.Where(g.Greater(norm, theta), capped, constant(g, 0, dtype))


def expm(g, a, dtype: str, rank: int, size: int | None = None):
    """exp(a) of each matrix of `a`: scaling by 2**-s, the [13/13] Padé approximant, s
    squarings (a matrix of a batch stops squaring at its own s)."""
    c = [constant(g, b, dtype) for b in PADE_13]
    s = _squarings(g, _one_norm(g, a, dtype), dtype)
    per_matrix = g.Unsqueeze(s, ints(g, [-1, -2]))
    a = g.Mul(a, g.Pow(constant(g, 2, dtype), g.Neg(per_matrix)))
    eye = identity_like(g, a, dtype)
    a2 = g.MatMul(a, a)
    a4 = g.MatMul(a2, a2)
    a6 = g.MatMul(a4, a2)

    def combination(*terms):
        total = g.Mul(c[terms[0][0]], terms[0][1])
        for k, power in terms[1:]:
            total = g.Add(total, g.Mul(c[k], power))
        return total

    inner_u = g.MatMul(a6, combination((13, a6), (11, a4), (9, a2)))
    u = g.MatMul(a, g.Add(inner_u, combination((7, a6), (5, a4), (3, a2), (1, eye))))
    inner_v = g.MatMul(a6, combination((12, a6), (10, a4), (8, a2)))
    v = g.Add(inner_v, combination((6, a6), (4, a4), (2, a2), (0, eye)))
    r, _ = lu_solve_system(g, g.Sub(v, u), g.Add(v, u), dtype, rank, size)
    every = g.Concat(g.Reshape(s, ints(g, [-1])), constant(g, [0], dtype), axis=0)
    count = g.Cast(g.ReduceMax(every, keepdims=0), to=ir.DataType.INT64)

    def square(g, k, x):
        more = g.Less(g.Cast(k, to=onnx_dtype(dtype)), per_matrix)
        return [g.Where(more, g.MatMul(x, x), x)]

    (result,) = loop(g, count, [r], square, "expm")
    return result


register_check(Expm)(square_float_check)


@register(Expm)
@register_blockwise(Expm)
def expm_(g, node, a):
    """Expm -> scaling and squaring with the [13/13] Padé approximant (Higham 2005), SciPy's
    method for matrices of large norm; SciPy picks a lower degree for small ones, which agrees
    to rounding."""
    dtype = node.outputs[0].type.dtype
    var = node.inputs[0]
    a = square_matrices(g, var, a)
    a = a if var.type.dtype == dtype else g.Cast(a, to=onnx_dtype(dtype))
    return expm(g, a, dtype, var.type.ndim, var.type.shape[-1])
