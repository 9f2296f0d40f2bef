"""Owen's T function, T(h, a) = (1 / 2 pi) integral from 0 to a of exp(-h^2 (1 + x^2) / 2) /
(1 + x^2) dx (PyTensor's Owens_t), by Patefield and Tandy's algorithm as SciPy runs it (Boost's
code, in SciPy's xsf; M. Patefield, D. Tandy, "Fast and accurate calculation of Owen's T
function", J. Statistical Software 5 (5), 2000).

T is even in h and odd in a; a > 1 maps to T(a h, 1 / a) (the paper's equation 2). For h >= 0
and 0 <= a <= 1 the plane is cut at HRANGE and ARANGE into regions, and each region has its
method and order: T1 (a series in a^2 with m terms), T2 and T3 (series in 1 / h^2, T3 with
Chebyshev-economised coefficients), T4 (a series in a^2 for large h), T5 (13-point Gauss
quadrature) or T6 (the closed form near a = 1). No Loop: a method runs (under an If) when some
element takes it, to its largest order on every element (the optimiser unrolls the fixed-count
loops), a term past an element's own order masked off by Where.
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import DOUBLE, INT64
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.constants import INF, NAN
from pt_onnxscript.ops.scalar.math import arctan2, erf, erfc, expm1
from pt_onnxscript.ops.scalar.special import _some
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

# The regions: h's interval (index into HRANGE, 14 when above all), a's (into ARANGE, 7 when
# above all), and the region's row of SELECT_METHOD, an index into ORDER and METHOD.
HRANGE = np.array([0.02, 0.06, 0.09, 0.125, 0.26, 0.4, 0.6, 1.6, 1.7, 2.33, 2.4, 3.36, 3.4, 4.8])
ARANGE = np.array([0.025, 0.09, 0.15, 0.36, 0.5, 0.9, 0.99999])
SELECT_METHOD = np.array(
    [
        [0, 0, 1, 12, 12, 12, 12, 12, 12, 12, 12, 15, 15, 15, 8],
        [0, 1, 1, 2, 2, 4, 4, 13, 13, 14, 14, 15, 15, 15, 8],
        [1, 1, 2, 2, 2, 4, 4, 14, 14, 14, 14, 15, 15, 15, 9],
        [1, 1, 2, 4, 4, 4, 4, 6, 6, 15, 15, 15, 15, 15, 9],
        [1, 2, 2, 4, 4, 5, 5, 7, 7, 16, 16, 16, 11, 11, 10],
        [1, 2, 4, 4, 4, 5, 5, 7, 7, 16, 16, 16, 11, 11, 11],
        [1, 2, 3, 3, 5, 5, 7, 7, 16, 16, 16, 16, 16, 11, 11],
        [1, 2, 3, 3, 5, 5, 17, 17, 17, 17, 16, 16, 16, 11, 11],
    ],
    dtype=np.int64,
).ravel()
ORDER = np.array([2, 3, 4, 5, 7, 10, 12, 18, 10, 20, 30, 0, 4, 7, 8, 20, 0, 0], dtype=np.float64)
METHOD = np.array([1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4, 4, 5, 6], dtype=np.int64)
T1_TERMS = 18  # the largest order of each series method
T2_TERMS = 31  # 2 m + 1 = 61 at m = 30: i = 1, 3, ..., 61
T4_TERMS = 21

# T3's coefficients, C2 of the paper.
T3_COEFFICIENTS = np.array(
    [
        1.0,
        -1.0,
        1.0,
        -0.9999999999999998,
        0.9999999999999839,
        -0.9999999999993063,
        0.9999999999797337,
        -0.9999999995749584,
        0.9999999933226235,
        -0.9999999188923242,
        0.9999992195143483,
        -0.9999939351372067,
        0.9999613559769055,
        -0.9997955636651394,
        0.9990927896296171,
        -0.9965938374119182,
        0.9891001713838613,
        -0.9700785580406933,
        0.9291143868326319,
        -0.8542058695956156,
        0.737965260330301,
        -0.585234698828374,
        0.4159977761456763,
        -0.25882108752419436,
        0.13755358251638927,
        -0.060795276632595575,
        0.021633768329987153,
        -0.005934056934551867,
        0.0011743414818332946,
        -0.0001489155613350369,
        9.072354320794358e-06,
    ]
)

# T5's 13-point Gauss quadrature (points squared, halved weights), from the paper.
T5_POINTS = np.array(
    [
        0.35082039676451715489e-02,
        0.31279042338030753740e-01,
        0.85266826283219451090e-01,
        0.16245071730812277011e00,
        0.25851196049125434828e00,
        0.36807553840697533536e00,
        0.48501092905604697475e00,
        0.60277514152618576821e00,
        0.71477884217753226516e00,
        0.81475510988760098605e00,
        0.89711029755948965867e00,
        0.95723808085944261843e00,
        0.99178832974629703586e00,
    ]
)
T5_WEIGHTS = np.array(
    [
        0.18831438115323502887e-01,
        0.18567086243977649478e-01,
        0.18042093461223385584e-01,
        0.17263829606398753364e-01,
        0.16243219975989856730e-01,
        0.14994592034116704829e-01,
        0.13535474469662088392e-01,
        0.11886351605820165233e-01,
        0.10070377242777431897e-01,
        0.81130545742299586629e-02,
        0.60419009528470238773e-02,
        0.38862217010742057883e-02,
        0.16793031084546090448e-02,
    ]
)

SQRT2 = np.array(np.sqrt(2.0))
SQRT_HALF = np.array(np.sqrt(0.5))  # Cephes' M_SQRT1_2
SQRT_2PI = np.array(np.sqrt(2.0 * np.pi))
TWO_PI = np.array(2.0 * np.pi)
NEAR = np.array(0.67)  # a > 1: T(h, a) from Phi - 1/2 below a h = 0.67, from 1 - Phi above


@script()
def _norm1(x: DOUBLE[...]) -> DOUBLE[...]:
    """erf(x / sqrt 2) / 2 = Phi(x) - 1/2."""
    return erf(x / op18.CastLike(SQRT2, x)) / op18.CastLike(2.0, x)


@script()
def _norm2(x: DOUBLE[...]) -> DOUBLE[...]:
    """erfc(x / sqrt 2) / 2 = 1 - Phi(x)."""
    return erfc(x / op18.CastLike(SQRT2, x)) / op18.CastLike(2.0, x)


@script()
def _ndtr(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes' ndtr: 1/2 + erf(x / sqrt 2) / 2 for |x / sqrt 2| < 1 / sqrt 2, else erfc's tail."""
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    y = x * op18.CastLike(SQRT_HALF, x)
    z = op18.Abs(y)
    tail = half * erfc(z)
    far = op18.Where(y > op18.CastLike(0.0, x), one - tail, tail)
    return op18.Where(z < op18.CastLike(SQRT_HALF, x), half + half * erf(y), far)


@script()
def _t1(h: DOUBLE[...], a: DOUBLE[...], m: DOUBLE[...]) -> DOUBLE[...]:
    """T1: atan(a) / 2 pi + the sum over j = 1 .. m of d_j a^(2j - 1) / (2 pi (2j - 1))."""
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    hs = op18.CastLike(-0.5, h) * h * h
    square = a * a
    aj = a / op18.CastLike(TWO_PI, h)
    dj = expm1(hs)
    gj = hs * op18.Exp(hs)
    total = arctan2(a, one) / op18.CastLike(TWO_PI, h)
    for i in range(T1_TERMS):
        j = op18.CastLike(i, h) + one
        total = op18.Where(j <= m, total + dj * aj / (two * j - one), total)
        aj = aj * square
        dj = gj - dj
        gj = gj * (hs / (j + one))
    return total


@script()
def _t2(h: DOUBLE[...], a: DOUBLE[...], ah: DOUBLE[...], m: DOUBLE[...]) -> DOUBLE[...]:
    """T2: exp(-h^2 / 2) / sqrt(2 pi) times the sum over i = 1, 3, .., 2m + 1 of z_i, a series in
    1 / h^2."""
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    half = op18.CastLike(0.5, h)
    sqrt_2pi = op18.CastLike(SQRT_2PI, h)
    hs = h * h
    square = -a * a
    y = one / hs
    vi = a * op18.Exp(-half * ah * ah) / sqrt_2pi
    z = (_ndtr(ah) - half) / h
    total = op18.CastLike(0.0, h) * h
    last = two * m + one
    for k in range(T2_TERMS):
        i = two * op18.CastLike(k, h) + one
        total = op18.Where(i <= last, total + z, total)
        z = y * (vi - i * z)
        vi = vi * square
    return total * (op18.Exp(-half * hs) / sqrt_2pi)


@script()
def _t3(h: DOUBLE[...], a: DOUBLE[...], ah: DOUBLE[...]) -> DOUBLE[...]:
    """T3: T2's series with Chebyshev-economised coefficients, 31 terms."""
    two = op18.CastLike(2.0, h)
    one = op18.CastLike(1.0, h)
    sqrt_2pi = op18.CastLike(SQRT_2PI, h)
    coefficients = op18.CastLike(T3_COEFFICIENTS, h)
    square = a * a
    hh = h * h
    y = one / hh
    vi = a * op18.Exp(-ah * ah / two) / sqrt_2pi
    zi = _norm1(ah) / h
    total = op18.CastLike(0.0, h) * h
    for i in range(op18.Size(coefficients)):
        total = total + zi * op18.Gather(coefficients, i)
        zi = y * ((two * op18.CastLike(i, h) + one) * zi - vi)
        vi = vi * square
    return total * (op18.Exp(-hh / two) / sqrt_2pi)


@script()
def _t4(h: DOUBLE[...], a: DOUBLE[...], m: DOUBLE[...]) -> DOUBLE[...]:
    """T4: the sum over i = 1, 3, .., 2m + 1 of a_i y_i, a series in a^2 for large h."""
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    hh = h * h
    naa = -a * a
    ai = a * op18.Exp(-hh * (one - naa) / two) / op18.CastLike(TWO_PI, h)
    yi = one + op18.CastLike(0.0, h) * h
    total = ai * yi
    last = two * m + one
    for k in range(T4_TERMS - 1):
        i = two * op18.CastLike(k, h) + op18.CastLike(3.0, h)
        yi = (one - hh * yi) / i
        ai = ai * naa
        total = op18.Where(i <= last, total + ai * yi, total)
    return total


@script()
def _t5(h: DOUBLE[...], a: DOUBLE[...]) -> DOUBLE[...]:
    """T5: a times the 13-point Gauss quadrature of exp(-h^2 r / 2) / r, r = 1 + a^2 x_i."""
    one = op18.CastLike(1.0, h)
    points = op18.CastLike(T5_POINTS, h)
    weights = op18.CastLike(T5_WEIGHTS, h)
    nhh = op18.CastLike(-0.5, h) * h * h
    square = a * a
    total = op18.CastLike(0.0, h) * h
    for i in range(op18.Size(points)):
        r = one + square * op18.Gather(points, i)
        total = total + op18.Gather(weights, i) * op18.Exp(nhh * r) / r
    return total * a


@script()
def _t6(h: DOUBLE[...], a: DOUBLE[...]) -> DOUBLE[...]:
    """T6: (1 - Phi(h)) Phi(h) / 2 - r exp(-(1 - a) h^2 / 2r) / 2 pi, r = atan2(1 - a, 1 + a)."""
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    zero = op18.CastLike(0.0, h)
    normh = _norm2(h)
    y = one - a
    r = arctan2(y, one + a)
    result = normh * (one - normh) / two
    rs = op18.Where(op18.Equal(r, zero), one, r)
    correction = r * op18.Exp(-y * h * h / (two * rs)) / op18.CastLike(TWO_PI, h)
    return op18.Where(op18.Equal(r, zero), result, result - correction)


@script()
def _dispatch(h: DOUBLE[...], a: DOUBLE[...], ah: DOUBLE[...]) -> DOUBLE[...]:
    """T(h, a) for finite h >= 0 and 0 <= a <= 1, ah = a h: each element by its region's method."""
    zero = op18.CastLike(0.0, h)
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    axis = op18.Constant(value_ints=[-1])
    above_h = op18.Unsqueeze(h, axis) > op18.CastLike(HRANGE, h)
    above_a = op18.Unsqueeze(a, axis) > op18.CastLike(ARANGE, h)
    h_index = op18.ReduceSum(op18.Cast(above_h, to=INT64.dtype), axis, keepdims=0)
    a_index = op18.ReduceSum(op18.Cast(above_a, to=INT64.dtype), axis, keepdims=0)
    index = op18.Gather(SELECT_METHOD, a_index * op18.Constant(value_int=15) + h_index)
    m = op18.Gather(op18.CastLike(ORDER, h), index)
    method = op18.Cast(op18.Gather(METHOD, index), to=DOUBLE.dtype)
    # Each method runs (If) only when some element takes it, on every element (safe where
    # it is not the element's method).
    hs = op18.Where(op18.Equal(h, zero), one, h)
    by_t1 = op18.Equal(method, one)
    if _some(by_t1):
        result = _t1(h, a, m)
    else:
        result = op18.Identity(h)  # taken by no element
    by_t2 = op18.Equal(method, two)
    if _some(by_t2):
        t2 = _t2(hs, a, ah, m)
    else:
        t2 = op18.Identity(h)
    result = op18.Where(by_t2, t2, result)
    by_t3 = op18.Equal(method, op18.CastLike(3.0, h))
    if _some(by_t3):
        t3 = _t3(hs, a, ah)
    else:
        t3 = op18.Identity(h)
    result = op18.Where(by_t3, t3, result)
    by_t4 = op18.Equal(method, op18.CastLike(4.0, h))
    if _some(by_t4):
        t4 = _t4(h, a, m)
    else:
        t4 = op18.Identity(h)
    result = op18.Where(by_t4, t4, result)
    by_t5 = op18.Equal(method, op18.CastLike(5.0, h))
    if _some(by_t5):
        t5 = _t5(h, a)
    else:
        t5 = op18.Identity(h)
    result = op18.Where(by_t5, t5, result)
    by_t6 = op18.Equal(method, op18.CastLike(6.0, h))
    if _some(by_t6):
        t6 = _t6(h, a)
    else:
        t6 = op18.Identity(h)
    result = op18.Where(by_t6, t6, result)
    at_one = _norm2(-h) * _norm2(h) / two
    result = op18.Where(op18.Equal(a, one), at_one, result)
    result = op18.Where(op18.Equal(a, zero), zero, result)
    return op18.Where(op18.Equal(h, zero), arctan2(a, one) / op18.CastLike(TWO_PI, h), result)


@script()
def owens_t(h: DOUBLE[...], a: DOUBLE[...]) -> DOUBLE[...]:
    """T(h, a) (module docstring): T(-h, a) = T(h, a), T(h, -a) = -T(h, a), and for |a| > 1
    T(h, a) from T(|a| h, 1 / |a|) and the normal distribution at h and |a| h."""
    zero = op18.CastLike(0.0, h)
    one = op18.CastLike(1.0, h)
    two = op18.CastLike(2.0, h)
    inf = op18.CastLike(INF, h)
    h_abs = op18.Abs(h)
    a_abs = op18.Abs(a)
    finite = op18.And(h_abs < inf, a_abs < inf)
    hf = op18.Where(finite, h_abs, zero)
    af = op18.Where(finite, a_abs, zero)
    ah = af * hf
    small = af <= one
    inverse = one / op18.Where(small, one, af)
    swapped = _dispatch(
        op18.Where(small, hf, ah), op18.Where(small, af, inverse), op18.Where(small, ah, hf)
    )
    # The remap of |a| > 1 (four normal integrals) runs (If) only when some element needs it.
    if _some(op18.Not(small)):
        near = ah <= op18.CastLike(NEAR, h)
        norm1_h = _norm1(hf)
        norm1_ah = _norm1(ah)
        norm2_h = _norm2(hf)
        norm2_ah = _norm2(ah)
        below = op18.CastLike(0.25, h) - norm1_h * norm1_ah - swapped
        above = (norm2_h + norm2_ah) / two - norm2_h * norm2_ah - swapped
        result = op18.Where(small, swapped, op18.Where(near, below, above))
    else:
        result = op18.Identity(swapped)
    result = op18.Where(op18.Equal(h_abs, inf), zero, result)
    by_infinite_a = op18.Equal(a_abs, inf)
    if _some(by_infinite_a):
        limit = op18.CastLike(0.5, h) * _norm2(h_abs)
    else:
        limit = op18.Identity(h)  # taken by no element
    result = op18.Where(by_infinite_a, limit, result)
    signed = op18.Where(a >= zero, result, -result)
    unordered = op18.Or(op18.IsNaN(h), op18.IsNaN(a))
    return op18.Where(unordered, op18.CastLike(NAN, h), signed)


@register_scalar(psm.Owens_t)
def owens_t_(g, node, h, a):
    """Owens_t -> the scripted float64 algorithm, rounded once to the output dtype."""
    return inline_in_float64(g, node, owens_t, h, a)
