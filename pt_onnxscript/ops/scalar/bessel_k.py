"""The exponentially scaled modified Bessel function of the second kind of real order,
kve(v, x) = exp(x) K_v(x) (PyTensor's Kve; ``pt.kv`` is kve(v, x) exp(-x)), with no Loop.

kve is the integral over t >= 0 of exp(-x (cosh t - 1)) cosh(v t) (DLMF 10.32.9), whose
integrand is positive, analytic and decays doubly exponentially: the trapezoidal rule
converges geometrically in 1/h (its error is about exp(-pi^2 / h) where the integrand's scale
is 1), so 256 points per element, placed where the integrand is, give a few 1e-13 relative. The
integrand's logarithm v t - x (cosh t - 1) peaks at t* = asinh(v / x) with curvature
r = hypot(x, v); the points cover [t* - dl, t* + dr], where it has fallen by e^-40 (bounds
from cosh d - 1 >= sinh d - d), at a step of at most 1/4 and 1 / (2 sqrt(r)). The sum is
taken relative to its largest term, so it overflows only where kve does.

Below x = 1e-16 with v < 1/2, the integrand is flat out to t ~ log(2 / x), too far for 256
points: there kve is Temme's first term (x^2 smaller than the rounding),
(pi v / sin(pi v)) (gam1(v) cosh(v L) + gam2(v) L sinh(v L) / (v L)), L = log(2 / x), with
gam1 and gam2 from the Taylor series of 1 / Gamma(1 + v) (Abramowitz and Stegun 6.1.34).

Accuracy against SciPy (AMOS): 5e-13 relative at most over v in [0, 500] and x from 1e-300
to 1e9 (tests/test_scalar_bessel_k.py, benchmarks/special_accuracy.py). SciPy returns inf
for values above ~1e304 and NaN for x above ~1.07e9, for v above ~2e9 and for an infinite
x; kve here gives the finite value, its value (which tends to sqrt(pi / (2 x))), inf and 0
there. kve(v, 0) is inf, kve of a negative x is NaN, and kve(-v, x) = kve(v, x).
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.bessel import _polevl
from pt_onnxscript.ops.scalar.constants import INF, LN2, NAN, PI
from pt_onnxscript.ops.scalar.math import arcsinh, cosh, log1p, sin_float64, sinh
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

POINTS = np.arange(256.0)  # the trapezoidal rule's points per element
MAX_STEP = np.array(0.25)
PEAK_STEP = np.array(0.5)  # times 1 / sqrt(r), the width of the integrand's peak
TAIL = np.array(40.0)  # the integrand's logarithm falls by this much at the ends
TINY_X = np.array(1e-16)

# 1 / Gamma(1 + z) = sum c_k z^k (Abramowitz and Stegun 6.1.34), to k = 25: its even and odd
# coefficients, highest first, for Horner's rule in z^2.
RECIPROCAL_GAMMA = np.array(
    [
        1.0,
        0.5772156649015329,
        -0.6558780715202539,
        -0.04200263503409524,
        0.16653861138229148,
        -0.04219773455554433,
        -0.009621971527876973,
        0.0072189432466631,
        -0.0011651675918590652,
        -0.00021524167411495098,
        0.0001280502823881162,
        -2.013485478078824e-05,
        -1.2504934821426706e-06,
        1.133027231981696e-06,
        -2.056338416977607e-07,
        6.116095104481416e-09,
        5.002007644469223e-09,
        -1.18127457048702e-09,
        1.0434267116911005e-10,
        7.782263439905071e-12,
        -3.696805618642206e-12,
        5.100370287454476e-13,
        -2.0583260535665066e-14,
        -5.348122539423018e-15,
        1.2267786282382608e-15,
        -1.1812593016974588e-16,
    ]
)
EVEN_RECIPROCAL_GAMMA = RECIPROCAL_GAMMA[0::2][::-1].copy()
ODD_RECIPROCAL_GAMMA = RECIPROCAL_GAMMA[1::2][::-1].copy()


@script()
def _asinh_ratio(v: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """asinh(v / x) for v >= 0 and x > 0, also where v / x or its square overflows (ONNX
    Runtime has no float64 Asinh; where the points are centered, so a few ulp do not
    matter)."""
    one = op18.CastLike(1.0, x)
    big = v > op18.CastLike(1e8, x) * x
    near = arcsinh(op18.Where(big, one, v / x))
    far = op18.CastLike(LN2, x) + op18.Log(op18.Where(big, v, one)) - op18.Log(x)
    return op18.Where(big, far, near)


@script()
def _acosh_1p(y: DOUBLE[...]) -> DOUBLE[...]:
    """acosh(1 + y) for y >= 0 (inf for an infinite y): the ends of the points."""
    one = op18.CastLike(1.0, y)
    two = op18.CastLike(2.0, y)
    big = y > op18.CastLike(1e8, y)
    moderate = op18.Where(big, one, y)
    near = log1p(moderate + op18.Sqrt(moderate * (moderate + two)))
    far = op18.CastLike(LN2, y) + op18.Log(op18.Where(big, y, one))
    return op18.Where(big, far, near)


@script()
def _kve_by_quadrature(v: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """kve(v, x) for v >= 0 and finite x > 0 by the trapezoidal rule on 256 points."""
    zero = op18.CastLike(0.0, x)
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    tail = op18.CastLike(TAIL, x)
    points = op18.CastLike(POINTS, x)
    last = op18.CastLike(op18.Size(points) - 1, x)
    axis = op18.Constant(value_ints=[-1])
    # r = hypot(x, v), scaled against overflow.
    m = op18.Max(x, v)
    r = m * op18.Sqrt((x / m) * (x / m) + (v / m) * (v / m))
    peak = _asinh_ratio(v, x)
    right = _acosh_1p(tail / r)
    gap = x * x / (r + v)  # r - v without cancellation
    left = op18.Min(op18.Min(peak, _acosh_1p(tail / gap)), one + tail / v)
    span = left + right
    step = op18.Min(op18.CastLike(MAX_STEP, x), op18.CastLike(PEAK_STEP, x) / op18.Sqrt(r))
    step = op18.Max(step, span / last)
    start = peak - left
    t = op18.Unsqueeze(start, axis) + op18.Unsqueeze(step, axis) * points
    s = sinh(half * t)  # cosh t - 1 = 2 sinh(t / 2)^2
    vt = op18.Unsqueeze(v, axis) * t
    exponent = vt - two * op18.Unsqueeze(x, axis) * s * s
    top = op18.ReduceMax(exponent, axis, keepdims=1)
    terms = op18.Exp(exponent - top) * (one + op18.Exp(-two * vt)) * half
    # The first point has weight 1/2 where the points start at t = 0.
    first = op18.And(op18.Equal(points, zero), op18.Unsqueeze(start <= zero, axis))
    terms = op18.Where(first, half * terms, terms)
    total = op18.ReduceSum(terms, axis, keepdims=0)
    return op18.Exp(op18.Squeeze(top, axis) + op18.Log(step * total))


@script()
def _kve_small_order_tiny_x(v: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """kve(v, x) for 0 <= v < 1/2 and 0 < x < 1e-16: Temme's first term."""
    one = op18.CastLike(1.0, x)
    pi = op18.CastLike(PI, x)
    length = op18.CastLike(LN2, x) - op18.Log(x)
    square = v * v
    gam1 = -_polevl(square, op18.CastLike(ODD_RECIPROCAL_GAMMA, x))
    gam2 = _polevl(square, op18.CastLike(EVEN_RECIPROCAL_GAMMA, x))
    positive = v > op18.CastLike(0.0, x)
    angle = pi * v
    ratio = op18.Where(positive, angle / sin_float64(angle), one)
    y = v * length
    sinh_over_v = op18.Where(positive, sinh(y) / op18.Where(positive, v, one), length)  # L at 0
    return ratio * (gam1 * cosh(y) + gam2 * sinh_over_v)


@script()
def kve(v: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """kve(v, x) = exp(x) K_v(x) of real order v (module docstring)."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    inf = op18.CastLike(INF, x)
    nan = op18.CastLike(NAN, x)
    order = op18.Abs(v)
    finite_x = op18.And(x > zero, x < inf)
    finite_v = order < inf
    xs = op18.Where(finite_x, x, one)
    vs = op18.Where(finite_v, order, one)
    quadrature = _kve_by_quadrature(vs, xs)
    tiny = op18.And(xs < op18.CastLike(TINY_X, x), vs < op18.CastLike(0.5, x))
    small = _kve_small_order_tiny_x(
        op18.Where(tiny, vs, zero), op18.Where(tiny, xs, op18.CastLike(TINY_X, x))
    )
    result = op18.Where(tiny, small, quadrature)
    result = op18.Where(finite_v, result, inf)
    result = op18.Where(op18.Equal(x, inf), op18.Where(finite_v, zero, nan), result)
    result = op18.Where(op18.Equal(x, zero), inf, result)
    unordered = op18.Or(op18.IsNaN(v), op18.IsNaN(x))
    return op18.Where(op18.Or(unordered, x < zero), nan, result)


@register_scalar(psm.Kve)
def bessel_k(g, node, v, x):
    """Kve -> the scripted float64 algorithm, rounded once to the output dtype."""
    return inline_in_float64(g, node, kve, v, x)
