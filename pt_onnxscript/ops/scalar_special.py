"""Special functions ONNX lacks, for PyMC's log-densities: gammaln, digamma, erfcx, log1mexp.

Each is SciPy's algorithm (Cephes, Boost) written as a scripted onnxscript function in
float64, its loops unrolled into the few steps their domains need. float32 and integer
inputs compute in float64 and round once to the output dtype, as SciPy's float32 loops do.
Inexact constants come from float64 NumPy arrays (a Python float literal would be a float32
constant).
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import DOUBLE, script
from onnxscript import opset18 as op18

from pt_onnxscript.ops.scalar_math import (
    ERFC_RA,
    ERFC_RB,
    ERFC_SA,
    ERFC_SB,
    ERFC_SPLIT,
    erfc,
    expm1,
    log1p,
    tan_float64,
)
from pt_onnxscript.ops.common import inline
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.types import onnx_dtype

PI = np.array(np.pi)
EULER = np.array(0.57721566490153286061)
LOGPI = np.array(1.14472988584940017414)
LS2PI = np.array(0.91893853320467274178)  # log(sqrt(2 pi))
MAXLGM = np.array(2.556348e305)
INF = np.array(np.inf)
NAN = np.array(np.nan)
LOG_HALF = np.array(np.log(0.5))

# Cephes lgam: A for Stirling's series, B/C for lgamma on [2, 3).
LGAM_A = np.array([8.11614167470508450300e-4, -5.95061904284301438324e-4,
                   7.93650340457716943945e-4, -2.77777777730099687205e-3,
                   8.33333333333331927722e-2])
LGAM_B = np.array([-1.37825152569120859100e3, -3.88016315134637840924e4,
                   -3.31612992738871184744e5, -1.16237097492762307383e6,
                   -1.72173700820839662146e6, -8.53555664245765465627e5])
LGAM_C = np.array([-3.51815701436523470549e2, -1.70642106651881159223e4,
                   -2.20528590553854454839e5, -1.13933444367982507207e6,
                   -2.53252307177582951285e6, -2.01889141433532773231e6])
# sin(t) = t * sum_k SIN[k] t^(2k) for |t| <= pi/2 (Taylor, truncation below 1e-18).
SIN_TAYLOR = np.array([(-1.0) ** k / float(np.prod(np.arange(1, 2 * k + 2, dtype=float)))
                       for k in range(11)])


@script()
def _lgamma_positive(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes lgam for x > 0: the recurrence onto [2, 3) below 13, Stirling's series above."""
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    a = op18.CastLike(LGAM_A, x)
    b = op18.CastLike(LGAM_B, x)
    c = op18.CastLike(LGAM_C, x)
    # Below 13: z = (x-1)(x-2)...(u) for u in [2, 3), or 1/x (1/(x(x+1))) below 2 (1).
    small = op18.Min(x, op18.CastLike(13.0, x))
    z = one
    u = small
    for k in range(10):
        step = u >= op18.CastLike(3.0, x)
        u = op18.Where(step, u - one, u)
        z = op18.Where(step, z * u, z)
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
    # Stirling: (x - 1/2) log x - x + log sqrt(2 pi) + series(1/x^2) / x.
    q = (x - op18.CastLike(0.5, x)) * op18.Log(x) - x + op18.CastLike(LS2PI, x)
    r = one / (x * x)
    series = (((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]
    short = (op18.CastLike(7.9365079365079365079365e-4, x) * r
             - op18.CastLike(2.7777777777777777777778e-3, x)) * r + op18.CastLike(0.0833333333333333333333, x)
    stirling = op18.Where(x >= op18.CastLike(1000.0, x), q + short / x, q + series / x)
    stirling = op18.Where(x > op18.CastLike(1.0e8, x), q, stirling)
    stirling = op18.Where(x > op18.CastLike(MAXLGM, x), op18.CastLike(INF, x), stirling)
    return op18.Where(x < op18.CastLike(13.0, x), recurrence, stirling)


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
    p = op18.Floor(q)
    z = q - p
    z = op18.Where(z > half, p + one - q, z)
    sine = q * _sin_small(op18.CastLike(PI, x) * z)
    reflected = op18.CastLike(LOGPI, x) - op18.Log(sine) - positive
    pole = op18.Or(op18.Equal(x, zero), op18.And(x < zero, op18.Equal(p, q)))
    result = op18.Where(x > zero, positive, reflected)
    result = op18.Where(pole, op18.CastLike(INF, x), result)
    return op18.Where(op18.IsInf(x), op18.CastLike(INF, x), result)


# Boost's digamma on [1, 2] (SciPy's digamma_imp_1_2) and SciPy's asymptotic series.
PSI_Y = np.array(np.float32(0.99558162689208984))
PSI_ROOT1 = np.array(1569415565.0 / 1073741824.0)
PSI_ROOT2 = np.array((381566830.0 / 1073741824.0) / 1073741824.0)
PSI_ROOT3 = np.array(0.9016312093258695918615325266959189453125e-19)
PSI_P = np.array([-0.0020713321167745952, -0.045251321448739056, -0.28919126444774784,
                  -0.65031853770896507, -0.32555031186804491, 0.25479851061131551])
PSI_Q = np.array([-0.55789841321675513e-6, 0.0021284987017821144, 0.054151797245674225,
                  0.43593529692665969, 1.4606242909763515, 2.0767117023730469, 1.0])
PSI_A = np.array([8.33333333333333333333e-2, -2.10927960927960927961e-2,
                  7.57575757575757575758e-3, -4.16666666666666666667e-3,
                  3.96825396825396825397e-3, -8.33333333333333333333e-3,
                  8.33333333333333333333e-2])


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
    r = x - op18.Where(negative, op18.Ceil(x), op18.Floor(x))
    y = op18.Where(negative, -op18.CastLike(PI, x) / tan_float64(op18.CastLike(PI, x) * r), zero)
    w = op18.Where(negative, one - x, x)
    # The recurrence moves w onto [1, 2]: below 1 once up, below 10 up to 8 times down.
    below_one = w < one
    y = op18.Where(below_one, y - one / w, y)
    w = op18.Where(below_one, w + one, w)
    for k in range(8):
        down = op18.And(w > two, w < ten)
        w = op18.Where(down, w - one, w)
        y = op18.Where(down, y + one / w, y)
    p = op18.CastLike(PSI_P, x)
    q = op18.CastLike(PSI_Q, x)
    s = w - one
    ps = ((((p[0] * s + p[1]) * s + p[2]) * s + p[3]) * s + p[4]) * s + p[5]
    qs = (((((q[0] * s + q[1]) * s + q[2]) * s + q[3]) * s + q[4]) * s + q[5]) * s + q[6]
    g = w - op18.CastLike(PSI_ROOT1, x)
    g = g - op18.CastLike(PSI_ROOT2, x)
    g = g - op18.CastLike(PSI_ROOT3, x)
    near_root = g * op18.CastLike(PSI_Y, x) + g * (ps / qs)
    a = op18.CastLike(PSI_A, x)
    z = one / (w * w)
    series = z * ((((((a[0] * z + a[1]) * z + a[2]) * z + a[3]) * z + a[4]) * z + a[5]) * z + a[6])
    series = op18.Where(w < op18.CastLike(1.0e17, x), series, zero)
    asymptotic = op18.Log(w) - op18.CastLike(0.5, x) / w - series
    result = y + op18.Where(w <= two, near_root, asymptotic)
    # Integers: harmonic sums up to 10 (exact table), poles at 0 and below.
    integer = op18.Equal(x, op18.Floor(x))
    table = op18.Gather(
        op18.CastLike(PSI_AT_INTEGERS, x),
        op18.Cast(op18.Where(op18.IsNaN(x), zero, op18.Min(op18.Max(x, zero), ten)), to=7),
    )
    result = op18.Where(op18.And(integer, op18.And(x > zero, x <= ten)), table, result)
    result = op18.Where(op18.And(integer, negative), op18.CastLike(NAN, x), result)
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
    ra = op18.CastLike(ERFC_RA, x)
    sa = op18.CastLike(ERFC_SA, x)
    rb = op18.CastLike(ERFC_RB, x)
    sb = op18.CastLike(ERFC_SB, x)
    c = op18.CastLike(ERFCX_ASYMPTOTIC, x)
    a = op18.Max(x, op18.CastLike(1.25, x))
    s = one / (a * a)
    ra_s = (((ra[7] * s + ra[6]) * s + ra[5]) * s + ra[4]) * s + ra[3]
    ra_s = ((ra_s * s + ra[2]) * s + ra[1]) * s + ra[0]
    sa_s = (((sa[7] * s + sa[6]) * s + sa[5]) * s + sa[4]) * s + sa[3]
    sa_s = (((sa_s * s + sa[2]) * s + sa[1]) * s + sa[0]) * s + one
    rb_s = (((((rb[6] * s + rb[5]) * s + rb[4]) * s + rb[3]) * s + rb[2]) * s + rb[1]) * s + rb[0]
    sb_s = ((sb[6] * s + sb[5]) * s + sb[4]) * s + sb[3]
    sb_s = (((sb_s * s + sb[2]) * s + sb[1]) * s + sb[0]) * s + one
    r_s = op18.Where(a < op18.CastLike(ERFC_SPLIT, x), ra_s / sa_s, rb_s / sb_s)
    tail = op18.Exp(r_s - op18.CastLike(0.5625, x)) / a
    # 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - ...): 8 terms are exact to the last bit from 28.
    series = ((((((c[7] * s + c[6]) * s + c[5]) * s + c[4]) * s + c[3]) * s + c[2]) * s + c[1]) * s + c[0]
    asymptotic = op18.CastLike(INV_SQRT_PI, x) * series / a
    far = op18.Where(a < op18.CastLike(28.0, x), tail, asymptotic)
    # exp(x^2) = exp(h^2) exp((x - h)(x + h)), h = x rounded to 11 bits so h^2 is exact.
    b = op18.Min(op18.Abs(x), op18.CastLike(27.0, x))
    hb = op18.CastLike(op18.Cast(b, to=10), x)
    exp_square = op18.Exp(hb * hb) * op18.Exp((b - hb) * (b + hb))
    exp_square = op18.Where(op18.Abs(x) > op18.CastLike(27.0, x), op18.CastLike(INF, x), exp_square)
    near = exp_square * erfc(x)
    return op18.Where(x < op18.CastLike(1.25, x), near, far)


@script()
def log1mexp(x: DOUBLE[...]) -> DOUBLE[...]:
    """PyTensor's log(1 - exp(x)): log1p(-exp(x)) below log(1/2), log(-expm1(x)) above."""
    return op18.Where(
        x < op18.CastLike(LOG_HALF, x),
        log1p(op18.Neg(op18.Exp(x))),
        op18.Log(op18.Neg(expm1(x))),
    )


_FUNCTIONS = {psm.GammaLn: gammaln, psm.Psi: psi, psm.Erfcx: erfcx, psm.Log1mexp: log1mexp}


@register_scalar(*_FUNCTIONS)
def special(op, node, x):
    """GammaLn, Psi, Erfcx, Log1mexp -> the scripted float64 algorithm, rounded once to the
    output dtype."""
    function = next(_FUNCTIONS[cls] for cls in type(node.op).__mro__ if cls in _FUNCTIONS)
    if node.inputs[0].type.dtype != "float64":
        x = op.Cast(x, to=onnx_dtype("float64"))
    result = inline(op, function, x)
    out = node.outputs[0].type.dtype
    return result if out == "float64" else op.Cast(result, to=onnx_dtype(out))
