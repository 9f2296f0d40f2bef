"""PyMC's own Ops (pymc.distributions and pymc.math): the check that a matrix is positive
definite (in LKJCorr's and Wishart's log-densities), the SciPy spline of Interpolated's
density (SplineWrapper), ``pm.math.logdet`` and ``pm.math.batched_diag``, and the random
variables PyMC draws with NumPy or SciPy (ops/random.py's samplers and generator).

Loaded by the registry when a PyMC Op is first looked up (PyMC is imported by then).
"""

import math

import numpy as np
import onnx_ir as ir
from numpy.linalg import LinAlgError
from pymc.distributions.continuous import (
    InterpolatedRV,
    MoyalRV,
    RiceRV,
    SkewNormalRV,
    SkewStudentTRV,
    TruncatedNormalRV,
    WaldRV,
)
from pymc.distributions.discrete import DiscreteUniformRV
from pymc.distributions.dist_math import SplineWrapper
from pymc.distributions.multivariate import (
    MatrixNormalRV,
    PosDefMatrix,
    StickBreakingWeightsRV,
    WishartRV,
)
from pymc.math import BatchedDiag, LogDet
from pytensor.graph.basic import Constant
from pytensor.tensor.basic import alloc_diag
from scipy.interpolate import UnivariateSpline, splev

from pt_onnxscript.ops import basic
from pt_onnxscript.ops.common import any_of, broadcast_shape, constant, ints, raise_if
from pt_onnxscript.ops.decompositions import NOT_FINITE, _non_finite
from pt_onnxscript.ops.linalg import (
    diagonal,
    lower_factor,
    lu_factor_blocked,
    square_matrices,
    swap_last,
)
from pt_onnxscript.ops.random import (
    F64,
    Stream,
    _f64,
    _finite,
    _float,
    _int64,
    _result,
    _scipy_domain,
    _scipy_scale_check,
    _support_shape,
    beta_draws,
    integers_between,
    log_standard_gamma,
    univariate,
    wald,
)
from pt_onnxscript.ops.scalar.math import expm1, log1p
from pt_onnxscript.ops.scalar.special import erfcinv, erfcx, log1mexp
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.scripted import inline
from pt_onnxscript.types import onnx_dtype

# SciPy's message for a matrix its factorizations refuse.
NOT_SQUARE = "Input array is expected to be square"
LOGDET_NOT_SQUARE = (
    "LogDet of a non-square matrix (PyMC's sum of the log singular values) is not translated"
)


def _raise_if_not_finite(g, x, exc_type: type[Exception], message: str):
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
    x = square_matrices(g, node.inputs[0], x, ValueError, NOT_SQUARE)
    x = _raise_if_not_finite(g, x, ValueError, NOT_FINITE)
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
    x = square_matrices(g, node.inputs[0], x, NotImplementedError, LOGDET_NOT_SQUARE)
    x = _raise_if_not_finite(g, x, ValueError, f"Failed to compute logdet ({NOT_FINITE})")
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
    if not isinstance(node.op.spline, UnivariateSpline):
        name = type(node.op.spline).__name__
        return f"a SplineWrapper of a {name} (translated: SciPy's UnivariateSpline, as PyMC makes)"
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
    t, c, k = node.op.spline._eval_args  # the (knots, coefficients, degree) splev reads
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


# ---------------------------------------------------------------- random variables
# Each is the textbook transformation SciPy's or NumPy's sampler makes, of ops/random.py's
# uniforms and normals, with the parameter checks that raise there.


@univariate(SkewNormalRV, lanes=2)
def skewnormal(g, s, mu, sigma, alpha):
    """mu + sigma z, SciPy's skewnorm: z = d x0 + sqrt(1 - d^2) x1 for normals x0, x1 and
    d = alpha / sqrt(1 + alpha^2), negated where x0 < 0."""
    x0, x1 = s.normal(g, 0, lane=0), s.normal(g, 0, lane=1)
    d = g.Div(alpha, g.Sqrt(g.Add(_f64(g, 1.0), g.Mul(alpha, alpha))))
    rest = g.Sqrt(g.Sub(_f64(g, 1.0), g.Mul(d, d)))
    z = g.Add(g.Mul(d, x0), g.Mul(rest, x1))
    z = g.Where(g.GreaterOrEqual(x0, _f64(g, 0.0)), z, g.Neg(z))
    return g.Add(mu, g.Mul(sigma, z)), _scipy_scale_check(
        g, sigma, "skewnorm", g.Not(_finite(g, alpha))
    )


@univariate(WaldRV, lanes=2)
def shifted_wald(g, s, mu, lam, alpha):
    """NumPy's wald(mu, lam) + alpha."""
    draws, checks = wald(g, s, mu, lam)
    return g.Add(draws, alpha), checks


@univariate(RiceRV, lanes=2)
def rice(g, s, b, sigma):
    """sigma |(b / sqrt(2) + x0, b / sqrt(2) + x1)| for normals x0, x1 (SciPy's rice)."""
    centre = g.Mul(b, _f64(g, 1 / np.sqrt(2)))
    x0 = g.Add(centre, s.normal(g, 0, lane=0))
    x1 = g.Add(centre, s.normal(g, 0, lane=1))
    radius = g.Sqrt(g.Add(g.Mul(x0, x0), g.Mul(x1, x1)))
    negative_b = g.Not(g.GreaterOrEqual(b, _f64(g, 0.0)))
    return g.Mul(sigma, radius), _scipy_scale_check(g, sigma, "rice", negative_b)


@univariate(MoyalRV)
def moyal(g, s, mu, sigma):
    """mu - sigma log(x^2) for a normal x (SciPy's -log of a gamma(1/2, scale=2) draw, which
    is x^2)."""
    x = s.normal(g, 0)
    return g.Sub(mu, g.Mul(sigma, g.Log(g.Mul(x, x)))), _scipy_scale_check(g, sigma, "moyal")


@univariate(SkewStudentTRV, lanes=6)
def skew_student_t(g, s, a, b, mu, sigma):
    """mu + sigma (2 d - 1) sqrt(a + b) / (2 sqrt(d (1 - d))) for a beta(a, b) draw d (SciPy's
    jf_skew_t)."""
    d = beta_draws(g, s, a, b)
    one = _f64(g, 1.0)
    top = g.Mul(g.Sub(g.Mul(_f64(g, 2.0), d), one), g.Sqrt(g.Add(a, b)))
    bottom = g.Mul(_f64(g, 2.0), g.Sqrt(g.Mul(d, g.Sub(one, d))))
    zero = _f64(g, 0.0)
    bad_shapes = g.Or(g.Not(g.Greater(a, zero)), g.Not(g.Greater(b, zero)))
    draws = g.Add(mu, g.Mul(sigma, g.Div(top, bottom)))
    return draws, _scipy_scale_check(g, sigma, "jf_skew_t", bad_shapes)


@register(DiscreteUniformRV)
def discrete_uniform(g, node, rng, size, lower, upper):
    """DiscreteUniformRV -> SciPy's randint(lower, upper + 1): the integers lower .. upper."""
    lower, upper = _int64(g, node.inputs[2], lower), _int64(g, node.inputs[3], upper)
    past = g.Add(upper, ints(g, 1))
    return integers_between(g, node, rng, size, lower, past, (ValueError, _scipy_domain("randint")))


# The log of the standard normal CDF, and its inverse (SciPy's log_ndtr and ndtri_exp), for
# truncated normal draws in the tails: float64 values.
_SQRT_HALF = 1 / np.sqrt(2)


def _log_normal_tail(g, x, scaled=None):
    """log Phi(-|x|) = log(erfcx(|x| / sqrt(2)) / 2) - x^2 / 2: no underflow however far
    (`scaled`: that erfcx, where the caller has it)."""
    if scaled is None:
        scaled = inline(g, erfcx, g.Mul(g.Abs(x), _f64(g, _SQRT_HALF)))
    return g.Sub(g.Log(g.Mul(_f64(g, 0.5), scaled)), g.Mul(_f64(g, 0.5), g.Mul(x, x)))


def _log_normal_cdfs(g, x):
    """log Phi(x) and log Phi(-x), both from one tail: log Phi(-|x|), and log1p(-Phi(-|x|))
    on the other side."""
    tail = _log_normal_tail(g, x)
    other = inline(g, log1mexp, tail)
    negative = g.LessOrEqual(x, _f64(g, 0.0))
    return g.Where(negative, tail, other), g.Where(negative, other, tail)


def _inverse_log_normal_cdf(g, y):
    """x with log Phi(x) = y <= 0: sqrt(2) erfcinv(2 q) for q = -expm1(y) < 1/2, -sqrt(2)
    erfcinv(2 e^y) down to y = -700 (erfcinv is accurate in its tail), and below (e^y
    underflows) the asymptotic x = -sqrt(-2 y - log(-2 y) - log(2 pi)), refined by three
    Newton steps on log Phi(x) = y (slope sqrt(2 / pi) / erfcx(-x / sqrt(2)))."""
    upper = g.Greater(y, _f64(g, -np.log(2.0)))
    twice = g.Mul(_f64(g, 2.0), g.Where(upper, g.Neg(inline(g, expm1, y)), g.Exp(y)))
    root = g.Mul(_f64(g, np.sqrt(2)), inline(g, erfcinv, twice))
    moderate = g.Where(upper, root, g.Neg(root))
    far = g.Mul(_f64(g, -2.0), g.Min(y, _f64(g, -700.0)))  # -2 y, clipped where unused
    x = g.Neg(g.Sqrt(g.Sub(g.Sub(far, g.Log(far)), _f64(g, np.log(2 * np.pi)))))
    for _ in range(3):  # x < 0 here: log Phi(x) is the tail at |x|
        scaled = inline(g, erfcx, g.Mul(x, _f64(g, -_SQRT_HALF)))
        log_cdf = _log_normal_tail(g, x, scaled)
        step = g.Mul(g.Sub(log_cdf, y), g.Mul(scaled, _f64(g, np.sqrt(np.pi / 2))))
        x = g.Sub(x, step)
    return g.Where(g.Less(y, _f64(g, -700.0)), x, moderate)


def _log_add(g, u, v):
    """log(e^u + e^v)."""
    top = g.Max(u, v)
    return g.Add(top, inline(g, log1p, g.Exp(g.Neg(g.Abs(g.Sub(u, v))))))


@univariate(TruncatedNormalRV)
def truncated_normal(g, s, mu, sigma, lower, upper):
    """mu + sigma x, x SciPy's truncnorm ppf of a uniform q, in logs (so that intervals far in
    a tail keep their draws): for a = (lower - mu) / sigma < 0, log Phi(x) = log(Phi(a) + q m)
    with m = Phi(b) - Phi(a); else the mirror image, from the right end with 1 - q. log m as
    SciPy's _log_gauss_mass: from the log CDFs of the ends on the side of 0 the interval lies
    (log Phi(b) + log1mexp(log Phi(a) - log Phi(b)), or mirrored), log1p(-Phi(a) - Phi(-b))
    for an interval around 0."""
    a, b = g.Div(g.Sub(lower, mu), sigma), g.Div(g.Sub(upper, mu), sigma)
    log_a, log_not_a = _log_normal_cdfs(g, a)  # log Phi(a), log Phi(-a)
    log_b, log_not_b = _log_normal_cdfs(g, b)
    zero = _f64(g, 0.0)
    left_mass = g.Add(log_b, inline(g, log1mexp, g.Sub(log_a, log_b)))
    right_mass = g.Add(log_not_a, inline(g, log1mexp, g.Sub(log_not_b, log_not_a)))
    central = inline(g, log1p, g.Neg(g.Add(g.Exp(log_a), g.Exp(log_not_b))))
    mass = g.Where(g.Greater(a, zero), right_mass, central)
    mass = g.Where(g.LessOrEqual(b, zero), left_mass, mass)
    q = s.uniform(g, 0)
    from_left = _log_add(g, log_a, g.Add(g.Log(q), mass))
    from_right = _log_add(g, log_not_b, g.Add(inline(g, log1p, g.Neg(q)), mass))
    is_left = g.Less(a, zero)
    x = _inverse_log_normal_cdf(g, g.Where(is_left, from_left, from_right))
    x = g.Where(is_left, x, g.Neg(x))
    checks = _scipy_scale_check(g, sigma, "truncnorm", g.Not(g.Less(a, b)))
    return g.Add(mu, g.Mul(sigma, x)), checks


@register(MatrixNormalRV)
def matrix_normal(g, node, rng, size, mu, rowchol, colchol):
    """mu + rowchol z colchol^T for a standard normal matrix z (PyMC's rng_fn)."""
    mu, rowchol, colchol = (
        _float(g, var, x) for var, x in zip(node.inputs[2:], (mu, rowchol, colchol), strict=True)
    )

    def batch():  # the parameters' batch dims, broadcast
        return broadcast_shape(g, [g.Shape(x, end=-2) for x in (mu, rowchol, colchol)])

    core = g.Concat(g.Shape(rowchol, start=-1), g.Shape(colchol, start=-1), axis=0)
    s = Stream(g, rng, _support_shape(g, node, size, batch, core))
    column_factor = swap_last(g, colchol, node.inputs[4].type.ndim)
    draws = g.Add(mu, g.MatMul(rowchol, g.MatMul(s.normal(g, 0), column_factor)))
    return s.next_state, _result(g, node, draws, [])


@register_check(StickBreakingWeightsRV)
def _constant_k(node):
    """PyMC's error at export for a constant negative K (the draw's shape would be negative)."""
    k = node.inputs[3]
    if isinstance(k, Constant) and np.any(k.data < 0):
        raise ValueError(f"K needs to be positive. ({node})")


@register(StickBreakingWeightsRV)
def stick_breaking_weights(g, node, rng, size, alpha, k):
    """PyMC's rng_fn: K draws beta(1, alpha), the weights beta_j prod_{i<j} (1 - beta_i), and
    1 - their sum last."""
    alpha = _float(g, node.inputs[2], alpha)
    k = g.Reshape(_int64(g, node.inputs[3], k), ints(g, [1]))
    shape = _support_shape(g, node, size, lambda: g.Shape(alpha), g.Add(k, ints(g, 1)))
    count = g.Max(k, ints(g, [0]))  # a negative K raises below, not in a shape before
    s = Stream(
        g, rng, g.Concat(g.Slice(shape, ints(g, [0]), ints(g, [-1])), count, axis=0), lanes=6
    )
    alpha = g.Unsqueeze(alpha, ints(g, [-1]))
    betas = beta_draws(g, s, g.Expand(_f64(g, 1.0), g.Shape(alpha)), alpha)
    # sum over i < j of log(1 - beta_i): -inf after a beta of 1.0 (a cumulative sum less the
    # term itself would be -inf - -inf, NaN, there)
    before = g.CumSum(g.Log(g.Sub(_f64(g, 1.0), betas)), ints(g, -1), exclusive=1)
    weights = g.Mul(g.Exp(before), betas)
    rest = g.Sub(_f64(g, 1.0), g.ReduceSum(weights, ints(g, [-1]), keepdims=1))
    draws = g.Concat(weights, rest, axis=-1)
    checks = [
        (g.Less(k, ints(g, 0)), ValueError, "K needs to be positive."),
        (g.Not(g.Greater(alpha, _f64(g, 0.0))), ValueError, "b <= 0"),
    ]
    return s.next_state, _result(g, node, draws, checks)


@register(WishartRV)
def wishart(g, node, rng, size, nu, scale):
    """(L A)(L A)^T, SciPy's Bartlett decomposition: L the Cholesky factor of `scale`, A lower
    triangular with sqrt(chi2(nu - i)) = sqrt(2 G), G a gamma(nu - i) / 2 draw, on row i of
    its diagonal and standard normals below; nu truncated to an integer, as PyMC's rng_fn
    does."""
    nu = g.Cast(g.Cast(_float(g, node.inputs[2], nu), to=ir.DataType.INT64), to=F64)
    scale = _float(g, node.inputs[3], scale)
    rank = node.inputs[3].type.ndim
    zero = _f64(g, 0.0)

    def batch():  # the parameters' batch dims, broadcast
        return broadcast_shape(g, [g.Shape(nu), g.Shape(scale, end=-2)])

    dim = g.Shape(scale, start=-1)
    s = Stream(g, rng, _support_shape(g, node, size, batch, g.Concat(dim, dim, axis=0)), lanes=4)
    index = g.Cast(g.Range(ints(g, 0), g.Squeeze(dim, ints(g, [0])), ints(g, 1)), to=F64)
    row, column = g.Unsqueeze(index, ints(g, [-1])), index
    nu = g.Unsqueeze(g.Unsqueeze(nu, ints(g, [-1])), ints(g, [-1]))
    # Every entry draws a gamma of shape (nu - i) / 2, used on the diagonal only: 1 elsewhere
    # and where nu is too small (that raises below).
    shape = g.Mul(g.Sub(nu, row), _f64(g, 0.5))
    on_diagonal = g.Equal(row, column)
    shape = g.Where(g.And(on_diagonal, g.Greater(shape, zero)), shape, _f64(g, 1.0))
    log_gamma = log_standard_gamma(g, s, g.Expand(shape, s.shape), lane=1)
    diagonal_entries = g.Exp(g.Mul(_f64(g, 0.5), g.Add(log_gamma, _f64(g, np.log(2.0)))))
    below = g.Where(g.Greater(row, column), s.normal(g, 0), zero)
    a = g.Where(on_diagonal, diagonal_entries, below)
    factor = g.MatMul(
        lower_factor(g, scale, "float64", True, rank, node.inputs[3].type.shape[-1]), a
    )
    draws = g.MatMul(factor, swap_last(g, factor, node.outputs[1].type.ndim))
    size_of = g.Cast(g.Squeeze(dim, ints(g, [0])), to=F64)
    checks = [
        (
            g.LessOrEqual(nu, g.Sub(size_of, _f64(g, 1.0))),
            ValueError,
            "Degrees of freedom must be greater than the dimension of scale matrix minus 1.",
        ),
        (g.IsNaN(factor), LinAlgError, "leading minor of the array is not positive definite"),
    ]
    return s.next_state, _result(g, node, draws, checks)


@register_check(InterpolatedRV)
def _unbatched_points(node):
    if any(d != 1 for var in node.inputs[2:] for d in var.type.shape[:-1]):
        return "Interpolated draws for batched points (PyMC's rng_fn raises NotImplementedError)"
    return None


@register(InterpolatedRV)
def interpolated(g, node, rng, size, x, pdf, cdf):
    """PyMC's _interpolated_argcdf of a uniform p: on the segment i with cdf[i] < p <=
    cdf[i + 1], where the density is linear, x[i] + t with cdf[i] + pdf[i] t + slope t^2 / 2
    = p, by the quadratic's root (p - cdf[i]) / pdf[i] where |slope| <= 1e-8 (0 where
    |pdf[i]| <= 1e-8, as there)."""
    x, pdf, cdf = (
        g.Reshape(_float(g, var, v), ints(g, [-1]))
        for var, v in zip(node.inputs[2:], (x, pdf, cdf), strict=True)
    )
    s = Stream(g, rng, _support_shape(g, node, size, lambda: ints(g, []), ints(g, [])))
    p = s.uniform(g, 0)
    below = g.Less(cdf, g.Unsqueeze(p, ints(g, [-1])))
    count = g.ReduceSum(g.Cast(below, to=ir.DataType.INT64), ints(g, [-1]), keepdims=0)
    last = g.Sub(g.Shape(x), ints(g, [2]))  # the last segment (PyMC's would index past it)
    index = g.Min(g.Max(g.Sub(count, ints(g, 1)), ints(g, 0)), g.Squeeze(last, ints(g, [0])))
    after = g.Add(index, ints(g, 1))
    x0, f0, c0 = (g.Gather(v, index, axis=0) for v in (x, pdf, cdf))
    slope = g.Div(g.Sub(g.Gather(pdf, after, axis=0), f0), g.Sub(g.Gather(x, after, axis=0), x0))
    rest = g.Sub(p, c0)
    tiny = _f64(g, 1e-8)
    flat = g.Where(g.LessOrEqual(g.Abs(f0), tiny), _f64(g, 0.0), g.Div(rest, f0))
    root = g.Sqrt(g.Add(g.Mul(f0, f0), g.Mul(g.Mul(_f64(g, 2.0), slope), rest)))
    curved = g.Div(g.Sub(root, f0), slope)
    draws = g.Add(x0, g.Where(g.LessOrEqual(g.Abs(slope), tiny), flat, curved))
    return s.next_state, _result(g, node, draws, [])
