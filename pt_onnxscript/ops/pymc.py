"""PyMC's own Ops (pymc.distributions and pymc.math): the check that a matrix is positive
definite (in LKJCorr's and Wishart's log-densities), the SciPy spline of Interpolated's
density (SplineWrapper), ``pm.math.logdet`` and ``pm.math.batched_diag``.

Loaded by the registry when a PyMC Op is first looked up (PyMC is imported by then).
"""

import math

import numpy as np
import onnx_ir as ir
from pymc.distributions.dist_math import SplineWrapper
from pymc.distributions.multivariate import PosDefMatrix
from pymc.math import BatchedDiag, LogDet
from pytensor.tensor.basic import alloc_diag
from scipy.interpolate import splev

from pt_onnxscript.ops import basic
from pt_onnxscript.ops.common import any_of, constant, ints, raise_if
from pt_onnxscript.ops.decompositions import NOT_FINITE, _non_finite
from pt_onnxscript.ops.linalg import diagonal, lower_factor, lu_factor_blocked
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.types import onnx_dtype

# SciPy's message for a matrix its factorizations refuse.
NOT_SQUARE = "Input array is expected to be square"
LOGDET_NOT_SQUARE = (
    "LogDet of a non-square matrix (PyMC's sum of the log singular values) is not translated"
)


def _square(g, node, x, exc_type: type[Exception], message: str):
    """x, made to raise ``exc_type(message)`` when its last two dims differ (refused at export
    when they are known to)."""
    rows, columns = node.inputs[0].type.shape[-2:]
    if rows is not None and rows == columns:
        return x
    shape = g.Shape(x, start=-2)
    differ = g.Not(g.Equal(g.ReduceMin(shape, keepdims=0), g.ReduceMax(shape, keepdims=0)))
    return raise_if(g, [differ], x, exc_type, message)


def _finite(g, x, exc_type: type[Exception], message: str):
    """x, made to raise ``exc_type(message)`` when an entry is NaN or infinite."""
    return raise_if(g, [_non_finite(g, x)], x, exc_type, message)


@register_check(PosDefMatrix)
def _static_square(node):
    """SciPy's ValueError at export for a matrix known not to be square."""
    rows, columns = node.inputs[0].type.shape[-2:]
    if None not in (rows, columns) and rows != columns:
        raise ValueError(f"{NOT_SQUARE} but has the shape {(rows, columns)} ({node})")


def _factor_dtype(var) -> str:
    """The dtype LAPACK factors `var` in, as SciPy picks it: float32 stays, the rest (other
    floats, integers, bools) is float64."""
    return "float32" if var.type.dtype == "float32" else "float64"


@register(PosDefMatrix)
def pos_def_matrix(g, node, x):
    """PosDefMatrix -> whether the Cholesky factorisation of the upper triangle succeeds
    (SciPy's ``cholesky(x)``, which PyMC calls, reads that triangle): no pivot of the factor
    is NaN. A non-square input or one with a NaN or infinite entry raises SciPy's ValueError,
    which PyMC's Op passes on."""
    dtype = _factor_dtype(node.inputs[0])
    if node.inputs[0].type.dtype != dtype:
        x = g.Cast(x, to=onnx_dtype(dtype))
    x = _finite(g, _square(g, node, x, ValueError, NOT_SQUARE), ValueError, NOT_FINITE)
    factor = lower_factor(g, x, dtype, False, 2, node.inputs[0].type.shape[-1])
    return g.Not(any_of(g, g.IsNaN(diagonal(g, factor))))


@register_check(LogDet)
def _check_logdet(node):
    """A float matrix: PyMC's Op gives a float log |det| the matrix's dtype, truncating it for
    an integer one. A non-square one is refused: NumPy's SVD, which PyMC calls, gives a sum
    over its min(m, n) singular values, which LU does not."""
    dtype = node.inputs[0].type.dtype
    if not dtype.startswith("float"):
        return (
            f"LogDet of a {dtype} matrix (PyMC's Op truncates log |det| to the matrix's "
            "dtype): cast it to a float dtype first"
        )
    rows, columns = node.inputs[0].type.shape[-2:]
    if None not in (rows, columns) and rows != columns:
        return (
            f"LogDet of a non-square ({rows} x {columns}) matrix (PyMC's sum of the log "
            "singular values)"
        )
    return None


@register(LogDet)
def log_det(g, node, x):
    """LogDet -> the sum of log |pivot| of the LU factors (of every matrix, for a stack of
    them, as PyMC's sum over NumPy's batched SVD): log |det x|. An exactly singular matrix
    gives -inf, where the SVD's rounding leaves a tiny singular value and a large negative
    finite sum. A NaN or infinite entry raises PyMC's ValueError (NumPy's SVD does not
    converge)."""
    dtype = node.outputs[0].type.dtype
    rank = node.inputs[0].type.ndim
    x = _square(g, node, x, NotImplementedError, LOGDET_NOT_SQUARE)
    x = _finite(g, x, ValueError, f"Failed to compute logdet ({NOT_FINITE})")
    packed, _, _ = lu_factor_blocked(g, x, dtype, rank, node.inputs[0].type.shape[-1])
    logs = g.Log(g.Abs(diagonal(g, packed)))
    return g.ReduceSum(g.Reshape(logs, ints(g, [-1])), ints(g, [0]), keepdims=0)


@register(BatchedDiag)
def batched_diag(g, node, diagonals):
    """BatchedDiag -> the (b, n, n) matrices with the rows of `diagonals` (b, n) on their
    diagonals: AllocDiag's translation, as ``pt.diag`` of each row would give them."""
    as_alloc_diag = alloc_diag(node.inputs[0], offset=0, axis1=1, axis2=2).owner
    return basic.alloc_diag(g, as_alloc_diag, diagonals)


# UnivariateSpline's `ext` modes (what it gives outside its knots' span) and its error there.
EXTRAPOLATE, ZEROS, RAISE, CONST = range(4)
OUT_OF_DOMAIN = "Found x value not in the domain"


@register_check(SplineWrapper)
def _check_spline(node):
    dtype = node.inputs[0].type.dtype
    if not dtype.startswith("float"):
        return (
            f"a SciPy spline of {dtype} points (PyMC's Op truncates its float values to that "
            "dtype): cast them to a float dtype first"
        )
    return None


@register(SplineWrapper)
def spline(g, node, x):
    """SplineWrapper -> the spline's polynomial pieces, evaluated at each point: the piece of
    the knot interval t[l] <= x < t[l+1] (the last one at its right end; the end pieces
    continue outside, as FITPACK's splev), with its Taylor coefficients at t[l] taken from
    SciPy's splev at export, by Horner's rule. Outside the knots' span, the spline's `ext`:
    extrapolated, 0, SciPy's ValueError, or the value at the nearer end. SciPy evaluates in
    float64, and so does this; float32 points get float32 values, as PyMC's Op casts them."""
    dtype = node.outputs[0].type.dtype
    t, c, k = node.op.spline._eval_args
    ext = node.op.spline.ext
    starts = t[k : len(t) - k - 1]  # the left ends of the knot intervals, t[k] the first
    taylor = np.stack([splev(starts, (t, c, k), der=m) / math.factorial(m) for m in range(k + 1)])
    first, last = t[k], t[len(t) - k - 1]
    points = x if dtype == "float64" else g.Cast(x, to=onnx_dtype("float64"))
    if ext in (ZEROS, RAISE):
        outside = g.Or(
            g.Less(points, constant(g, first, "float64")),
            g.Greater(points, constant(g, last, "float64")),
        )
    if ext == RAISE:
        points = raise_if(g, [outside], points, ValueError, OUT_OF_DOMAIN)
    if ext == CONST:
        points = g.Clip(points, constant(g, first, "float64"), constant(g, last, "float64"))
    # The piece: the last one, less one for each interval start past x (none for a NaN point:
    # FITPACK's search ends on the last piece, which a spline of degree 0 gives it).
    after = g.Greater(constant(g, starts[1:], "float64"), g.Unsqueeze(points, ints(g, [-1])))
    past = g.ReduceSum(g.Cast(after, to=ir.DataType.INT64), ints(g, [-1]), keepdims=0)
    piece = g.Sub(ints(g, len(starts) - 1), past)
    offset = g.Sub(points, g.Gather(constant(g, starts, "float64"), piece, axis=0))
    value = g.Gather(constant(g, taylor[k], "float64"), piece, axis=0)
    for m in range(k - 1, -1, -1):
        value = g.Add(
            g.Mul(value, offset), g.Gather(constant(g, taylor[m], "float64"), piece, axis=0)
        )
    if ext == ZEROS:
        value = g.Where(outside, constant(g, 0, "float64"), value)
    if ext == EXTRAPOLATE and k > 0:
        # At +-inf: NaN, where FITPACK's B-spline recursion gives NaN or +-inf by the signs
        # of the end coefficients (inf - inf, or not).
        value = g.Where(g.IsInf(points), constant(g, np.nan, "float64"), value)
    return value if dtype == "float64" else g.Cast(value, to=onnx_dtype(dtype))
