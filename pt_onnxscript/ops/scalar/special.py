"""Special functions ONNX lacks, for PyMC's log-densities: gammaln, gamma, digamma, trigamma,
erfcx, erfinv, erfcinv, log1mexp.

Each is SciPy's algorithm (Cephes, Boost) written as a scripted onnxscript function in
float64, its loops unrolled into the few steps their domains need. float32 and integer
inputs compute in float64 and round once to the output dtype, as SciPy's float32 loops do.
Inexact constants come from float64 NumPy arrays (a Python float literal would be a float32
constant).
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import BOOL, DOUBLE, INT64
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import cast_inputs_to_output, constant, inline_in_float64
from pt_onnxscript.ops.scalar.constants import EULER, INF, MAXGAM, NAN, PI
from pt_onnxscript.ops.scalar.math import (
    erf,
    erfc,
    erfc_tail_exponent,
    expm1,
    log1p,
    split_high,
    tan_float64,
)
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

# Cephes lgam's three-term Stirling series (x >= 1000), psi's and gamma's thresholds, and
# the tail below which erfcinv takes the asymptotic start.
LGAM_SHORT = np.array(
    [7.9365079365079365079365e-4, -2.7777777777777777777778e-3, 0.0833333333333333333333]
)
PSI_SERIES_MAX = np.array(1.0e17)
GAMMA_TINY = np.array(1.0e-9)
ERFCINV_TINY = np.array(1.0e-10)

LOGPI = np.array(1.14472988584940017414)
LS2PI = np.array(0.91893853320467274178)  # log(sqrt(2 pi))
MAXLGM = np.array(2.556348e305)
LOG_HALF = np.array(np.log(0.5))
HALF_ULP_OF_ONE = np.array(2.0**-54)  # below it, 1 - x rounds to 1

# Cephes lgam: A for Stirling's series, B/C for lgamma on [2, 3).
LGAM_A = np.array(
    [
        8.11614167470508450300e-4,
        -5.95061904284301438324e-4,
        7.93650340457716943945e-4,
        -2.77777777730099687205e-3,
        8.33333333333331927722e-2,
    ]
)
LGAM_B = np.array(
    [
        -1.37825152569120859100e3,
        -3.88016315134637840924e4,
        -3.31612992738871184744e5,
        -1.16237097492762307383e6,
        -1.72173700820839662146e6,
        -8.53555664245765465627e5,
    ]
)
LGAM_C = np.array(
    [
        -3.51815701436523470549e2,
        -1.70642106651881159223e4,
        -2.20528590553854454839e5,
        -1.13933444367982507207e6,
        -2.53252307177582951285e6,
        -2.01889141433532773231e6,
    ]
)
STEPS_10 = np.arange(1.0, 11.0)  # the recurrences' steps down, as one axis
STEPS_8 = np.arange(1.0, 9.0)


@script()
def _some(mask: BOOL[...]) -> BOOL:
    """True if some element of `mask` is (False for an empty one): a branch only some inputs
    need runs only for them."""
    count = op18.ReduceSum(op18.Cast(mask, to=INT64.dtype), keepdims=0)
    return count > op18.Constant(value_int=0)


# sin(t) = t * sum_k SIN[k] t^(2k) for |t| <= pi/2 (Taylor, truncation below 1e-18).
SIN_TAYLOR = np.array(
    [(-1.0) ** k / float(np.prod(np.arange(1, 2 * k + 2, dtype=float))) for k in range(11)]
)


@script()
def _lgamma_positive(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes lgam for x > 0: the recurrence onto [2, 3) below 13, Stirling's series above."""
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    a = op18.CastLike(LGAM_A, x)
    b = op18.CastLike(LGAM_B, x)
    c = op18.CastLike(LGAM_C, x)
    # Each branch runs (If) only when some element takes it.
    below = x < op18.CastLike(13.0, x)
    if _some(below):
        # Below 13: z = (x-1)(x-2)...(u) for u in [2, 3), or 1/x (1/(x(x+1))) below 2 (1). The
        # up to 10 steps down (while u >= 3: u -= 1, z *= u) as one product over the step axis.
        small = op18.Min(x, op18.CastLike(13.0, x))
        shifted = op18.Unsqueeze(small, op18.Constant(value_ints=[-1])) - op18.CastLike(STEPS_10, x)
        down = shifted >= two
        last = op18.Constant(value_ints=[-1])
        z = op18.ReduceProd(op18.Where(down, shifted, one), last, keepdims=0)
        u = small - op18.ReduceSum(op18.CastLike(down, x), last, keepdims=0)
        below_two = u < two
        z = op18.Where(below_two, z / u, z)
        u = op18.Where(below_two, u + one, u)
        below_two = u < two
        z = op18.Where(below_two, z / u, z)
        u = op18.Where(below_two, u + one, u)
        p = u - two
        bp = ((((b[0] * p + b[1]) * p + b[2]) * p + b[3]) * p + b[4]) * p + b[5]
        cp = (((((p + c[0]) * p + c[1]) * p + c[2]) * p + c[3]) * p + c[4]) * p + c[5]
        recurrence = op18.Log(z) + p * bp / cp
    else:
        recurrence = op18.Identity(x)  # taken by no element
    if _some(op18.Not(below)):
        # Stirling: (x - 1/2) log x - x + log sqrt(2 pi) + series(1/x^2) / x.
        q = (x - op18.CastLike(0.5, x)) * op18.Log(x) - x + op18.CastLike(LS2PI, x)
        r = one / (x * x)
        series = (((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]
        s = op18.CastLike(LGAM_SHORT, x)
        short = (s[0] * r + s[1]) * r + s[2]
        stirling = op18.Where(x >= op18.CastLike(1000.0, x), q + short / x, q + series / x)
        stirling = op18.Where(x > op18.CastLike(1.0e8, x), q, stirling)
        stirling = op18.Where(x > op18.CastLike(MAXLGM, x), op18.CastLike(INF, x), stirling)
    else:
        stirling = op18.Identity(x)  # taken by no element
    return op18.Where(below, recurrence, stirling)


@script()
def _sin_small(t: DOUBLE[...]) -> DOUBLE[...]:
    """sin(t) for |t| <= pi/2 by its Taylor series, accurate to the last bits near 0."""
    k = op18.CastLike(SIN_TAYLOR, t)
    s = t * t
    poly = k[10]
    for i in range(10):
        poly = poly * s + k[9 - i]
    return t * poly


@script()
def gammaln(x: DOUBLE[...]) -> DOUBLE[...]:
    """log|Gamma(x)|: Cephes lgam, with log(pi / |x sin(pi x)|) - lgamma(-x) below 0; inf at
    the poles (0 and the negative integers)."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    half = op18.CastLike(0.5, x)
    q = op18.Abs(x)
    positive = _lgamma_positive(op18.Where(op18.Equal(q, zero), one, q))
    negative = x < zero
    if _some(negative):  # the reflection (and the negative poles) where x < 0
        p = op18.Floor(q)
        z = q - p
        z = op18.Where(z > half, p + one - q, z)
        sine = q * _sin_small(op18.CastLike(PI, x) * z)
        reflected = op18.CastLike(LOGPI, x) - op18.Log(sine) - positive
        # Where x + 1 rounds to 1, Cephes' recurrence is log(1 / |x|); the reflection's
        # x sin(pi x) would underflow.
        reflected = op18.Where(q < op18.CastLike(HALF_ULP_OF_ONE, x), op18.Log(one / q), reflected)
        pole = op18.And(negative, op18.Equal(p, q))
        result = op18.Where(pole, op18.CastLike(INF, x), op18.Where(negative, reflected, positive))
    else:
        result = op18.Identity(positive)
    result = op18.Where(op18.Equal(x, zero), op18.CastLike(INF, x), result)
    return op18.Where(op18.IsInf(x), op18.CastLike(INF, x), result)


# Boost's digamma on [1, 2] (SciPy's digamma_imp_1_2) and SciPy's asymptotic series.
PSI_Y = np.array(np.float32(0.99558162689208984))
PSI_ROOT1 = np.array(1569415565.0 / 1073741824.0)
PSI_ROOT2 = np.array((381566830.0 / 1073741824.0) / 1073741824.0)
PSI_ROOT3 = np.array(0.9016312093258695918615325266959189453125e-19)
PSI_P = np.array(
    [
        -0.0020713321167745952,
        -0.045251321448739056,
        -0.28919126444774784,
        -0.65031853770896507,
        -0.32555031186804491,
        0.25479851061131551,
    ]
)
PSI_Q = np.array(
    [
        -0.55789841321675513e-6,
        0.0021284987017821144,
        0.054151797245674225,
        0.43593529692665969,
        1.4606242909763515,
        2.0767117023730469,
        1.0,
    ]
)
PSI_A = np.array(
    [
        8.33333333333333333333e-2,
        -2.10927960927960927961e-2,
        7.57575757575757575758e-3,
        -4.16666666666666666667e-3,
        3.96825396825396825397e-3,
        -8.33333333333333333333e-3,
        8.33333333333333333333e-2,
    ]
)


def _harmonic_minus_euler() -> np.ndarray:
    """psi(n) for n = 0..10 as SciPy computes it at small positive integers (psi(0) unused)."""
    values = [np.nan]
    for n in range(1, 11):
        y = 0.0
        for i in range(1, n):
            y += 1.0 / i
        values.append(y - float(EULER))
    return np.array(values)


PSI_AT_INTEGERS = _harmonic_minus_euler()


@script()
def psi(x: DOUBLE[...]) -> DOUBLE[...]:
    """SciPy's digamma: reflection below 0, harmonic sums at 1..10, the recurrence onto [1, 2]
    below 10 with Boost's rational fit there, the asymptotic series above."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    ten = op18.CastLike(10.0, x)
    negative = x < zero
    # The reflection where x < 0 (w = 1 - x there), then the recurrence moves w onto [1, 2]:
    # below 1 once up (y -= 1/w), below 10 up to 8 times down (while 2 < w < 10: w -= 1,
    # y += 1/w), the steps down as one sum over the step axis.
    if _some(negative):
        r = x - op18.Ceil(x)
        pi = op18.CastLike(PI, x)
        reflection = op18.Where(negative, -pi / tan_float64(pi * r), zero)
        w = op18.Where(negative, one - x, x)
        y = op18.Where(w < one, reflection - one / w, reflection)
    else:
        w = op18.Identity(x)
        y = op18.Where(x < one, -one / x, zero)
    w = op18.Where(w < one, w + one, w)
    shifted = op18.Unsqueeze(w, op18.Constant(value_ints=[-1])) - op18.CastLike(STEPS_8, x)
    down = op18.And(op18.Unsqueeze(w < ten, op18.Constant(value_ints=[-1])), shifted > one)
    last = op18.Constant(value_ints=[-1])
    y = y + op18.ReduceSum(op18.Where(down, one / shifted, zero), last, keepdims=0)
    w = w - op18.ReduceSum(op18.CastLike(down, x), last, keepdims=0)
    # Each branch runs (If) only when some element takes it.
    near = w <= two
    if _some(near):
        p = op18.CastLike(PSI_P, x)
        q = op18.CastLike(PSI_Q, x)
        s = w - one
        ps = ((((p[0] * s + p[1]) * s + p[2]) * s + p[3]) * s + p[4]) * s + p[5]
        qs = (((((q[0] * s + q[1]) * s + q[2]) * s + q[3]) * s + q[4]) * s + q[5]) * s + q[6]
        g = w - op18.CastLike(PSI_ROOT1, x)
        g = g - op18.CastLike(PSI_ROOT2, x)
        g = g - op18.CastLike(PSI_ROOT3, x)
        near_root = g * op18.CastLike(PSI_Y, x) + g * (ps / qs)
    else:
        near_root = op18.Identity(w)  # taken by no element
    if _some(op18.Not(near)):
        a = op18.CastLike(PSI_A, x)
        z = one / (w * w)
        series = a[0] * z + a[1]
        series = z * (((((series * z + a[2]) * z + a[3]) * z + a[4]) * z + a[5]) * z + a[6])
        series = op18.Where(w < op18.CastLike(PSI_SERIES_MAX, x), series, zero)
        asymptotic = op18.Log(w) - op18.CastLike(0.5, x) / w - series
    else:
        asymptotic = op18.Identity(w)  # taken by no element
    result = y + op18.Where(near, near_root, asymptotic)
    # Integers: harmonic sums up to 10 (exact table), poles at 0 and below.
    integer = op18.Equal(x, op18.Floor(x))
    tabled = op18.And(integer, op18.And(x > zero, x <= ten))
    if _some(tabled):
        index = op18.Where(op18.IsNaN(x), zero, op18.Min(op18.Max(x, zero), ten))
        table = op18.Gather(op18.CastLike(PSI_AT_INTEGERS, x), op18.Cast(index, to=INT64.dtype))
        exact = op18.Where(tabled, table, result)
    else:
        exact = op18.Identity(result)
    result = op18.Where(op18.And(integer, negative), op18.CastLike(NAN, x), exact)
    # -1/x is SciPy's pole: -inf at +0.0, +inf at -0.0.
    result = op18.Where(op18.Equal(x, zero), -one / x, result)
    result = op18.Where(op18.Equal(x, op18.CastLike(INF, x)), x, result)
    return op18.Where(op18.Equal(x, op18.CastLike(-INF, x)), op18.CastLike(NAN, x), result)


ERFCX_ASYMPTOTIC = np.array([1.0, -0.5, 0.75, -1.875, 6.5625, -29.53125, 162.421875, -1055.7421875])
INV_SQRT_PI = np.array(1 / np.sqrt(np.pi))


@script()
def erfcx(x: DOUBLE[...]) -> DOUBLE[...]:
    """exp(x^2) erfc(x): fdlibm's erfc tail without its exp(-x^2) for 1.25 <= x < 28, the
    asymptotic series above, exp(x^2) erfc(x) below with x^2 split so exp sees it exactly."""
    one = op18.CastLike(1.0, x)
    c = op18.CastLike(ERFCX_ASYMPTOTIC, x)
    a = op18.Max(x, op18.CastLike(1.25, x))
    s = one / (a * a)
    r_s = erfc_tail_exponent(a)
    tail = op18.Exp(r_s - op18.CastLike(0.5625, x)) / a
    # 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - ...): 8 terms are exact to the last bit from 28.
    series = (
        (((((c[7] * s + c[6]) * s + c[5]) * s + c[4]) * s + c[3]) * s + c[2]) * s + c[1]
    ) * s + c[0]
    asymptotic = op18.CastLike(INV_SQRT_PI, x) * series / a
    far = op18.Where(a < op18.CastLike(28.0, x), tail, asymptotic)
    # exp(x^2) = exp(h^2) exp((x - h)(x + h)), h = x rounded to 24 bits so h^2 is exact.
    b = op18.Min(op18.Abs(x), op18.CastLike(27.0, x))
    hb = split_high(b)
    exp_square = op18.Exp(hb * hb) * op18.Exp((b - hb) * (b + hb))
    exp_square = op18.Where(op18.Abs(x) > op18.CastLike(27.0, x), op18.CastLike(INF, x), exp_square)
    near = exp_square * erfc(x)
    return op18.Where(x < op18.CastLike(1.25, x), near, far)


@script()
def log1mexp(x: DOUBLE[...]) -> DOUBLE[...]:
    """PyTensor's log(1 - exp(x)): log1p(-exp(x)) below log(1/2), log(-expm1(x)) above. The
    first is -0.0 where exp(x) is 0, so it goes last in the Where (which keeps -0.0 there)."""
    return op18.Where(
        x >= op18.CastLike(LOG_HALF, x),
        op18.Log(op18.Neg(expm1(x))),
        log1p(op18.Neg(op18.Exp(x))),
    )


TRIGAMMA_B = np.array([1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6])
PI_SQUARED = np.array(np.pi**2)


@script()
def trigamma(x: DOUBLE[...]) -> DOUBLE[...]:
    """SciPy's polygamma(1, x): the recurrence psi1(w) = 1/w^2 + psi1(w + 1) up to w >= 10, then
    the asymptotic series; pi^2 / sin^2(pi x) - psi1(1 - x) below 0; inf at the poles."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    half = op18.CastLike(0.5, x)
    ten = op18.CastLike(10.0, x)
    b = op18.CastLike(TRIGAMMA_B, x)
    negative = x <= zero
    w = op18.Where(negative, one - x, x)
    total = zero
    for k in range(10):
        small = w < ten
        total = total + op18.Where(small, one / (w * w), zero)
        w = op18.Where(small, w + one, w)
    z = one / w
    z2 = z * z
    tail = (
        (((((b[6] * z2 + b[5]) * z2 + b[4]) * z2 + b[3]) * z2 + b[2]) * z2 + b[1]) * z2 + b[0]
    ) * z2
    positive = total + (z + half * z2 + z * tail)
    r = x - op18.Round(x)
    sine = _sin_small(op18.CastLike(PI, x) * r)
    reflected = op18.CastLike(PI_SQUARED, x) / (sine * sine) - positive
    result = op18.Where(negative, reflected, positive)
    pole = op18.Or(
        op18.And(negative, op18.Equal(x, op18.Floor(x))), op18.Equal(x, -op18.CastLike(INF, x))
    )
    return op18.Where(pole, op18.CastLike(INF, x), result)


# Cephes gamma: P/Q on [2, 3), Stirling's STIR from 33 on.
GAMMA_P = np.array(
    [
        1.60119522476751861407e-4,
        1.19135147006586384913e-3,
        1.04213797561761569935e-2,
        4.76367800457137231464e-2,
        2.07448227648435975150e-1,
        4.94214826801497100753e-1,
        9.99999999999999996796e-1,
    ]
)
GAMMA_Q = np.array(
    [
        -2.31581873324120129819e-5,
        5.39605580493303397842e-4,
        -4.45641913851797240494e-3,
        1.18139785222060435552e-2,
        3.58236398605498653373e-2,
        -2.34591795718243348568e-1,
        7.14304917030273074085e-2,
        1.00000000000000000320e0,
    ]
)
GAMMA_STIR = np.array(
    [
        7.87311395793093628397e-4,
        -2.29549961613378126380e-4,
        -2.68132617805781232825e-3,
        3.47222221605458667310e-3,
        8.33333333333482257126e-2,
    ]
)
SQRT_TWO_PI = np.array(2.50662827463100050242)
MAXSTIR = np.array(143.01608)


@script()
def _stirling_gamma(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes stirf, for 33 <= x: sqrt(2 pi) x^(x - 1/2) e^-x (1 + STIR(1/x) / x)."""
    one = op18.CastLike(1.0, x)
    half = op18.CastLike(0.5, x)
    c = op18.CastLike(GAMMA_STIR, x)
    w = one / x
    w = one + w * ((((c[0] * w + c[1]) * w + c[2]) * w + c[3]) * w + c[4])
    y = op18.Exp(x)
    v = op18.Pow(x, half * x - op18.CastLike(0.25, x))
    large = v * (v / y)
    y = op18.Where(x > op18.CastLike(MAXSTIR, x), large, op18.Pow(x, x - half) / y)
    return op18.CastLike(SQRT_TWO_PI, x) * y * w


@script()
def gamma(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes gamma (SciPy's): below |x| = 33 the recurrence onto [2, 3) and P/Q there;
    Stirling above, with the reflection for negative x; SciPy's values at the poles."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    three = op18.CastLike(3.0, x)
    tiny = op18.CastLike(GAMMA_TINY, x)
    pc = op18.CastLike(GAMMA_P, x)
    qc = op18.CastLike(GAMMA_Q, x)
    q = op18.Abs(x)
    near = op18.Where(q < op18.CastLike(33.0, x), x, two)
    # One recurrence step per iteration: down while u >= 3, up (dividing) while u < 2.
    z = one
    u = near
    small = op18.Less(q, zero)  # all False: set where |u| < 1e-9 stops the recurrence
    for k in range(40):
        down = u >= three
        up = op18.And(u < two, op18.Not(small))
        small = op18.Or(small, op18.And(up, op18.Abs(u) < tiny))
        up = op18.And(up, op18.Not(small))
        u = op18.Where(down, u - one, u)
        z = op18.Where(down, z * u, z)
        z = op18.Where(up, z / u, z)
        u = op18.Where(up, u + one, u)
    t = u - two
    pt_ = (((((pc[0] * t + pc[1]) * t + pc[2]) * t + pc[3]) * t + pc[4]) * t + pc[5]) * t + pc[6]
    qt = (
        (((((qc[0] * t + qc[1]) * t + qc[2]) * t + qc[3]) * t + qc[4]) * t + qc[5]) * t + qc[6]
    ) * t + qc[7]
    recurrence = op18.Where(op18.Equal(u, two), z, z * pt_ / qt)
    at_small = z / ((one + op18.CastLike(EULER, x) * u) * u)
    recurrence = op18.Where(small, at_small, recurrence)
    recurrence = op18.Where(op18.Equal(u, zero), op18.CastLike(NAN, x), recurrence)
    # |x| >= 33: Stirling, reflected below 0.
    stirling = _stirling_gamma(op18.Max(q, op18.CastLike(33.0, x)))
    stirling = op18.Where(q > op18.CastLike(MAXGAM, x), op18.CastLike(INF, x), stirling)
    p = op18.Floor(q)
    frac = q - p
    frac = op18.Where(frac > op18.CastLike(0.5, x), q - (p + one), frac)
    sine = q * _sin_small(op18.CastLike(PI, x) * frac)
    odd = op18.Equal(p - two * op18.Floor(p / two), one)
    sign = op18.Where(odd, one, -one)
    reflected = sign * (op18.CastLike(PI, x) / (op18.Abs(sine) * stirling))
    reflected = op18.Where(op18.Equal(p, q), op18.CastLike(NAN, x), reflected)
    far = op18.Where(x < zero, reflected, stirling)
    result = op18.Where(q < op18.CastLike(33.0, x), recurrence, far)
    result = op18.Where(op18.Equal(x, -op18.CastLike(INF, x)), op18.CastLike(NAN, x), result)
    return op18.Where(op18.Equal(x, zero), one / x, result)


# Giles, "Approximating the erfinv function" (GPU Gems 2010), single precision: a first guess
# that Halley's iteration on erf or erfc refines to double precision.
GILES_CENTRAL = np.array(
    [
        2.81022636e-08,
        3.43273939e-07,
        -3.5233877e-06,
        -4.39150654e-06,
        0.00021858087,
        -0.00125372503,
        -0.00417768164,
        0.246640727,
        1.50140941,
    ]
)
GILES_TAIL = np.array(
    [
        -0.000200214257,
        0.000100950558,
        0.00134934322,
        -0.00367342844,
        0.00573950773,
        -0.0076224613,
        0.00943887047,
        1.00167406,
        2.83297682,
    ]
)
TWO_OVER_SQRT_PI = np.array(2 / np.sqrt(np.pi))


@script()
def _erfinv_guess(y: DOUBLE[...], w: DOUBLE[...]) -> DOUBLE[...]:
    """Giles' erfinv(y), w = -log((1 - y)(1 + y)) computed by the caller without cancellation."""
    c = op18.CastLike(GILES_CENTRAL, y)
    t = op18.CastLike(GILES_TAIL, y)
    u = w - op18.CastLike(2.5, y)
    central = (
        ((((((c[0] * u + c[1]) * u + c[2]) * u + c[3]) * u + c[4]) * u + c[5]) * u + c[6]) * u
        + c[7]
    ) * u + c[8]
    v = op18.Sqrt(w) - op18.CastLike(3.0, y)
    tail = (
        ((((((t[0] * v + t[1]) * v + t[2]) * v + t[3]) * v + t[4]) * v + t[5]) * v + t[6]) * v
        + t[7]
    ) * v + t[8]
    return op18.Where(w < op18.CastLike(5.0, y), central, tail) * y


@script()
def _gauss(x: DOUBLE[...]) -> DOUBLE[...]:
    """2/sqrt(pi) exp(-x^2), with x^2 split so that exp sees it exactly."""
    h = split_high(x)
    return op18.CastLike(TWO_OVER_SQRT_PI, x) * op18.Exp(-h * h) * op18.Exp((h - x) * (h + x))


SQRT_PI = np.array(np.sqrt(np.pi))
HALF_SQRT_PI = np.array(np.sqrt(np.pi) / 2)
TINY = np.array(np.finfo(np.float64).tiny)  # the smallest normal float64


@script()
def erfcinv(z: DOUBLE[...]) -> DOUBLE[...]:
    """SciPy's erfcinv: for z near 1, Giles' guess refined by Halley's iteration on
    erf(x) = 1 - z; in the tails, Newton's iteration on log erfc(x) = log z (erfc keeps its
    relative accuracy there) from Giles' guess, or from the asymptotic
    x = sqrt(-log(z x sqrt(pi))) below 1e-10 (for subnormal z, a fixed point of erfc's
    asymptotic form instead of Newton's steps); erfcinv(2 - z) = -erfcinv(z)."""
    zero = op18.CastLike(0.0, z)
    one = op18.CastLike(1.0, z)
    two = op18.CastLike(2.0, z)
    upper = z > one
    # SciPy's -ndtri(t / 2) / sqrt(2) halves t, which rounds where t is subnormal: t takes
    # that rounding (doubling is exact), and is solved for to the last bit from there.
    half = op18.CastLike(0.5, z)
    t = op18.Where(upper, two - z, z) * half * two
    y = one - t
    central = t > op18.CastLike(0.5, z)
    w = -op18.Log(t * (two - t))
    x = _erfinv_guess(y, w)
    root = op18.Sqrt(-op18.Log(t))
    far = op18.Sqrt(-op18.Log(t * root * op18.CastLike(SQRT_PI, z)))
    far = op18.Sqrt(-op18.Log(t * far * op18.CastLike(SQRT_PI, z)))
    x = op18.Where(t < op18.CastLike(ERFCINV_TINY, z), far, x)
    log_t = op18.Log(t)
    # Below the smallest normal number erfc(x) loses its bits, then underflows to 0, and
    # Newton's step with it. There (x > 26.5) x solves x^2 = -log t - log(x sqrt(pi)) +
    # log S(1/x^2), S erfcx's asymptotic series: a fixed point that gains three digits a step
    # from `far` (t x sqrt(pi), a subnormal, would lose them).
    subnormal = t < op18.CastLike(TINY, z)
    c = op18.CastLike(ERFCX_ASYMPTOTIC, z)
    for k in range(3):
        s = one / (far * far)  # <= 1.5e-3: S's terms from s^6 on are below 1e-17
        series = ((((c[5] * s + c[4]) * s + c[3]) * s + c[2]) * s + c[1]) * s + c[0]
        far = op18.Sqrt(op18.Log(series) - log_t - op18.Log(far * op18.CastLike(SQRT_PI, z)))
    for k in range(4):
        e = erfc(x)
        g = _gauss(x)
        halley = (erf(x) - y) / g
        halley = x - halley / (one + x * halley)
        newton = x + (op18.Log(e) - log_t) * e / g
        newton = op18.Where(subnormal, far, newton)
        x = op18.Where(central, halley, newton)
    # -x for z > 1, and SciPy's -0.0 at z = 1 (from Where's last input, which keeps it).
    result = op18.Where(z < one, x, -x)
    # SciPy's -ndtri(z / 2) / sqrt(2) is inf where z / 2 rounds to 0.
    result = op18.Where(op18.Equal(z * half, zero), op18.CastLike(INF, z), result)
    result = op18.Where(op18.Equal(z, two), -op18.CastLike(INF, z), result)
    outside = op18.Or(z < zero, z > two)
    return op18.Where(outside, op18.CastLike(NAN, z), result)


@script()
def erfinv(y: DOUBLE[...]) -> DOUBLE[...]:
    """SciPy's erfinv: Halley's iteration on erf(x) = y from Giles' guess for |y| <= 1/2,
    erfcinv(1 - |y|) with y's sign beyond (the tails keep their accuracy)."""
    zero = op18.CastLike(0.0, y)
    one = op18.CastLike(1.0, y)
    x = _erfinv_guess(y, -op18.Log((one - y) * (one + y)))
    for k in range(3):
        step = (erf(x) - y) / _gauss(x)
        x = x - step / (one + x * step)
    magnitude = erfcinv(one - op18.Abs(y))
    tail = op18.Where(y < zero, -magnitude, magnitude)
    result = op18.Where(op18.Abs(y) <= op18.CastLike(0.5, y), x, tail)
    # erfinv(-0.0) is +0.0 in SciPy.
    return op18.Where(op18.Equal(y, zero), zero, result)


_FUNCTIONS = {
    psm.GammaLn: gammaln,
    psm.Gamma: gamma,
    psm.Psi: psi,
    psm.TriGamma: trigamma,
    psm.Erfcx: erfcx,
    psm.Erfinv: erfinv,
    psm.Erfcinv: erfcinv,
    psm.Log1mexp: log1mexp,
}


@register_scalar(*_FUNCTIONS)
def special(g, node, x):
    """GammaLn, Gamma, Psi, TriGamma, Erfcx, Erfinv, Erfcinv, Log1mexp -> the scripted float64
    algorithm, rounded once to the output dtype."""
    function = next(_FUNCTIONS[cls] for cls in type(node.op).__mro__ if cls in _FUNCTIONS)
    return inline_in_float64(g, node, function, x)


try:  # PyTensor 2.38's scalar ops (3.0 builds xlogx and xlogy0 from switch and log)
    from pytensor.tensor.xlogx import XlogX, XlogY0
except ImportError:
    XlogX = XlogY0 = None

if XlogX is not None:

    @register_scalar(XlogX, XlogY0)
    def xlogy0(g, node, *inputs):
        """XlogX, XlogY0 -> Where(x == 0, 0, x * log(y)) (y = x for XlogX)."""
        cast = cast_inputs_to_output(g, node, inputs)
        x, y = cast[0], cast[-1]
        zero = constant(g, 0, node.outputs[0].type.dtype)
        return g.Where(g.Equal(x, zero), zero, g.Mul(x, g.Log(y)))
