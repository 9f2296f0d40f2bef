"""Transcendental scalar ops: tan, inverse trigonometric and hyperbolic functions, erf, erfc,
sigmoid, softplus, log1p and expm1.

ONNX Runtime's CPU build has no float64 kernel for Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh,
Acosh, Atanh or Erf, its float64 Sin and Cos lose their relative accuracy near their zeros
below |x| ~ 13, and its Sigmoid is inaccurate below -18. So float64 computes these ops from
kernels that are accurate (Exp, Log, Sqrt, Div, Where...) with the classic libm algorithms
(fdlibm, Cephes, Kahan), to a few ulp of NumPy and SciPy. float32 uses ONNX Runtime's kernel
where it has one accurate to float32, float16 computes in float32 as NumPy does, and integers
compute in the float dtype PyTensor upcasts them to.

In the scripted functions, inexact constants come from float64 NumPy arrays (a Python float
literal becomes a float32 constant in the graph). ONNX Runtime's Where turns a -0.0 taken
from its second input into +0.0, so signed zeros always come from its third input, and no
condition is negated (ONNX Runtime swaps Where(Not(c), a, b) into Where(c, b, a)).
"""

from typing import TypeVar, Union

import numpy as np
import pytensor.scalar.basic as ps
import pytensor.scalar.math as psm
from onnxscript import DOUBLE, FLOAT
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import constant, negation_of, unguarded
from pt_onnxscript.ops.scalar.constants import LN2, MAXLOG, NAN, PI
from pt_onnxscript.optimize import NON_NEGATIVE
from pt_onnxscript.registry import lookup, register_scalar
from pt_onnxscript.scripted import inline, script
from pt_onnxscript.types import onnx_dtype

TFloat = TypeVar("TFloat", bound=Union[FLOAT, DOUBLE])

TWO_POW_28 = np.array(2.0**28)

# ---------------------------------------------------------------- log1p, expm1, sigmoid, softplus


@script()
def log1p(x: TFloat) -> TFloat:
    """log(1 + x) as log(u) - ((u - 1) - x) / u with u = 1 + x: the quotient undoes u's rounding."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    u = one + x
    log_u = op18.Log(u)
    corrected = log_u - ((u - one) - x) / u
    # At u = 0 and u = +-inf the correction is NaN and log(u) is the answer.
    result = op18.Where(op18.Or(op18.IsInf(u), op18.Equal(u, zero)), log_u, corrected)
    return op18.Where(op18.Abs(x) > zero, result, x)


@script()
def expm1(x: TFloat) -> TFloat:
    """exp(x) - 1 by Kahan's (u - 1) * x / log(u), u = exp(x): the quotient undoes u's rounding."""
    one = op18.CastLike(1.0, x)
    u = op18.Exp(x)
    u_minus_one = u - one
    kahan = u_minus_one * (x / op18.Log(u))
    # Where u - 1 rounds to -1 (u = 0 included, where the quotient is 0) that is the answer;
    # where u = inf the quotient is 0.
    result = op18.Where(
        op18.Equal(u_minus_one, -one), u_minus_one, op18.Where(op18.IsInf(u), u, kahan)
    )
    return op18.Where(op18.Or(u < one, u > one), result, x)


@script()
def sigmoid(x: TFloat) -> TFloat:
    """SciPy's expit: 1 / (1 + exp(-x))."""
    one = op18.CastLike(1.0, x)
    return one / (one + op18.Exp(-x))


@script()
def logistic_parts(w: TFloat) -> tuple[TFloat, TFloat, TFloat]:
    """t = exp(-|w|) (in [0, 1]), d = 1 + t and log1p(t): what softplus and sigmoid of w and
    of -w are made of. log1p as in `log1p`, whose special cases t never reaches."""
    one = op18.CastLike(1.0, w)
    t = op18.Exp(-op18.Abs(w))
    d = one + t
    return t, d, op18.Log(d) - ((d - one) - t) / d


def logistic(g, op, x, dtype: str, w=None):
    """Softplus or Sigmoid (`op`) of ONNX value `x` (PyTensor dtype `dtype`), x = w or -w,
    from `logistic_parts` of w: softplus(x) = max(x, 0) + log1p(exp(-|x|)), sigmoid(w) =
    (1 or t) / (1 + t) by the sign of w, sigmoid(-w) = (t or 1) / (1 + t).

    Functions of w and -w computed together (a logistic log-likelihood and its gradient:
    softplus(w), softplus(-w), sigmoid(w)) share one Exp and one Log, the copies merged by
    the optimizer's common-subexpression elimination. No branch, no overflow; within a few
    ulp of PyTensor's piecewise softplus and SciPy's expit everywhere. The result is >= +0.0
    or NaN, marked so (`optimize.NON_NEGATIVE`): a Where choosing it needs no sign repair.
    """
    negated = negation_of(x)
    if w is None:
        w = x if negated is None else negated
        g.builder.root.logistic_bases.setdefault(unguarded(w), w)
    t, d, log1p_t = inline(g, logistic_parts, w)
    if isinstance(op, psm.Softplus):
        result = g.Add(g.Relu(x), log1p_t)
    else:
        one = constant(g, 1, dtype)
        w_positive = g.GreaterOrEqual(w, constant(g, 0, dtype))
        numerator = (
            g.Where(w_positive, t, one) if negated is not None else g.Where(w_positive, one, t)
        )
        result = g.Div(numerator, d)
    result.meta[NON_NEGATIVE] = True
    return result


def _graph_of(value):
    """The graph `value` belongs to: its producer's, or the one it is an input of."""
    node = value.producer()
    return node.graph if node is not None else value.graph


def shared_logistic(nodes) -> set[int]:
    """The ids of the Sigmoid nodes among a Composite's inner `nodes` whose input, or its
    negation, is also the input of another Sigmoid or a Softplus there: computed by
    `logistic`, from the parts they share (alone, 1 / (1 + exp(-x)) is fewer nodes)."""
    by_base = {}
    for node in nodes:
        if isinstance(node.op, psm.Sigmoid | psm.Softplus):
            (x,) = node.inputs
            negation = x.owner is not None and isinstance(x.owner.op, ps.Neg)
            by_base.setdefault(x.owner.inputs[0] if negation else x, []).append(node)
    return {
        id(node)
        for group in by_base.values()
        if len(group) > 1
        for node in group
        if isinstance(node.op, psm.Sigmoid)
    }


# ---------------------------------------------------------------- hyperbolic


@script()
def sinh(x: TFloat) -> TFloat:
    """fdlibm's sinh: from t = expm1(|x|) below 22, exp(|x|) / 2 above, (exp(|x|/2) / 2) exp(|x|/2)
    where exp(|x|) overflows; odd."""
    zero = op18.CastLike(0.0, x)
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    a = op18.Abs(x)
    u = op18.Exp(a)
    t = op18.Where(op18.Equal(u, one), a, (u - one) * (a / op18.Log(u)))  # expm1(a), Kahan
    below_one = half * (two * t - t * t / (t + one))
    below_22 = half * (t + t / (t + one))
    w = op18.Exp(half * a)
    above = op18.Where(op18.IsInf(u), (half * w) * w, half * u)
    h = op18.Where(a < one, below_one, op18.Where(a < op18.CastLike(22.0, x), below_22, above))
    return op18.Where(x > zero, h, op18.Where(x < zero, -h, x))


@script()
def cosh(x: TFloat) -> TFloat:
    """(exp(|x|) + 1 / exp(|x|)) / 2, or (exp(|x|/2) / 2) exp(|x|/2) where exp(|x|) overflows."""
    half = op18.CastLike(0.5, x)
    a = op18.Abs(x)
    u = op18.Exp(a)
    w = op18.Exp(half * a)
    return op18.Where(op18.IsInf(u), (half * w) * w, half * u + half / u)


@script()
def arcsinh(x: TFloat) -> TFloat:
    """fdlibm's asinh of a = |x|: log(a) + ln 2 above 2**28, log(2a + 1 / (sqrt(a*a + 1) + a))
    above 2, log1p(a + a*a / (1 + sqrt(1 + a*a))) below; odd."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    a = op18.Abs(x)
    above_huge = op18.Log(a) + op18.CastLike(LN2, x)
    above_two = op18.Log(two * a + one / (op18.Sqrt(a * a + one) + a))
    v = a + a * a / (one + op18.Sqrt(one + a * a))
    u = one + v
    below_two = op18.Log(u) - ((u - one) - v) / u  # log1p(v), as in log1p
    h = op18.Where(
        a > op18.CastLike(TWO_POW_28, x), above_huge, op18.Where(a > two, above_two, below_two)
    )
    return op18.Where(x > zero, h, op18.Where(x < zero, -h, x))


@script()
def arccosh(x: TFloat) -> TFloat:
    """fdlibm's acosh: log(x) + ln 2 above 2**28, log(2x - 1 / (x + sqrt(x*x - 1))) above 2,
    log1p(t + sqrt(2t + t*t)) with t = x - 1 below; NaN below 1."""
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    above_huge = op18.Log(x) + op18.CastLike(LN2, x)
    above_two = op18.Log(two * x - one / (x + op18.Sqrt(x * x - one)))
    t = x - one
    v = t + op18.Sqrt(two * t + t * t)
    u = one + v
    below_two = op18.Log(u) - ((u - one) - v) / u  # log1p(v), as in log1p
    result = op18.Where(
        x > op18.CastLike(TWO_POW_28, x), above_huge, op18.Where(x > two, above_two, below_two)
    )
    return op18.Where(x < one, op18.CastLike(NAN, x), result)


@script()
def arctanh(x: TFloat) -> TFloat:
    """fdlibm's atanh of a = |x|: log1p(2a + 2a*a / (1 - a)) / 2 below 1/2, log1p(2a / (1 - a)) / 2
    above (inf at 1, NaN beyond); odd."""
    zero = op18.CastLike(0.0, x)
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    a = op18.Abs(x)
    two_a = a + a
    v = op18.Where(a < half, two_a + two_a * a / (one - a), two_a / (one - a))
    u = one + v
    # log1p(v), as in log1p; v = +inf at a = 1 (and -inf or NaN beyond, where Log gives NaN).
    log1p_v = op18.Log(u) - ((u - one) - v) / u
    h = half * op18.Where(op18.IsInf(u, detect_negative=0), u, log1p_v)
    return op18.Where(x > zero, h, op18.Where(x < zero, -h, x))


# ---------------------------------------------------------------- tan, atan2

# pi/2 in 33-bit parts (fdlibm's pio2_1, pio2_2, pio2_3 and the tail pio2_3t).
PIO2_PARTS = np.array(
    [
        1.57079632673412561417e00,
        6.07710050630396597660e-11,
        2.02226624871116645580e-21,
        8.47842766036889956997e-32,
    ]
)
TWO_OVER_PI = np.array(6.36619772367581382433e-01)
TAN_REDUCTION_LIMIT = np.array(2.0**20)  # |n| < 2**20 keeps n * PIO2_PARTS[:3] exact
# Cephes tan on [-pi/4, pi/4]: tan(r) = r + r z P(z) / Q(z), z = r*r.
TAN_P = np.array([-1.30936939181383777646e4, 1.15351664838587416140e6, -1.79565251976484877988e7])
TAN_Q = np.array(
    [
        1.36812963470692954678e4,
        -1.32089234440210967447e6,
        2.50083801823357915839e7,
        -5.38695755929454629881e7,
    ]
)


@script()
def pio2_remainder(x: DOUBLE[...], n: DOUBLE[...]) -> DOUBLE[...]:
    """x - n pi/2 by Cody and Waite, pi/2 in four parts (each n * part exact for |n| < 2**20)."""
    pio2 = op18.CastLike(PIO2_PARTS, x)
    return (((x - n * pio2[0]) - n * pio2[1]) - n * pio2[2]) - n * pio2[3]


@script()
def tan_float64(x: DOUBLE[...]) -> DOUBLE[...]:
    """tan(x): x - n pi/2 by Cody and Waite with Cephes' kernel below |x| = 2**20 (-1/tan for odd
    n), sin(x) / cos(x) above, where ONNX Runtime's Sin and Cos are accurate."""
    zero = op18.CastLike(0.0, x)
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    p = op18.CastLike(TAN_P, x)
    q = op18.CastLike(TAN_Q, x)
    n = op18.Round(x * op18.CastLike(TWO_OVER_PI, x))
    r = pio2_remainder(x, n)
    z = r * r
    tan_r = r + r * (
        z * ((p[0] * z + p[1]) * z + p[2]) / ((((z + q[0]) * z + q[1]) * z + q[2]) * z + q[3])
    )
    even = op18.Equal(op18.Floor(n * half), n * half)
    reduced = op18.Where(even, tan_r, -one / tan_r)
    result = op18.Where(
        op18.Abs(x) < op18.CastLike(TAN_REDUCTION_LIMIT, x), reduced, op18.Sin(x) / op18.Cos(x)
    )
    return op18.Where(op18.Abs(x) > zero, result, x)


# fdlibm's __kernel_sin and __kernel_cos on [-pi/4, pi/4].
SIN_S = np.array(
    [
        -1.66666666666666324348e-01,
        8.33333333332248946124e-03,
        -1.98412698298579493134e-04,
        2.75573137070700676789e-06,
        -2.50507602534068634195e-08,
        1.58969099521155010221e-10,
    ]
)
COS_C = np.array(
    [
        4.16666666666666019037e-02,
        -1.38888888888741095749e-03,
        2.48015872894767294178e-05,
        -2.75573143513906633035e-07,
        2.08757232129817482790e-09,
        -1.13596475577881948265e-11,
    ]
)


@script()
def _sin_cos_reduced(x: DOUBLE[...], quarters: DOUBLE[...]) -> DOUBLE[...]:
    """sin(x + quarters pi/2) (quarters is 0 or 1, 1 giving cos(x)): r = x - k pi/2 by Cody
    and Waite, fdlibm's kernels for sin(r) and cos(r), chosen and signed by k mod 4."""
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    four = op18.CastLike(4.0, x)
    s = op18.CastLike(SIN_S, x)
    c = op18.CastLike(COS_C, x)
    k = op18.Round(x * op18.CastLike(TWO_OVER_PI, x))
    r = pio2_remainder(x, k)
    z = r * r
    sin_tail = s[1] + z * (s[2] + z * (s[3] + z * (s[4] + z * s[5])))
    sin_r = r + z * r * (s[0] + z * sin_tail)
    cos_poly = z * (c[0] + z * (c[1] + z * (c[2] + z * (c[3] + z * (c[4] + z * c[5])))))
    hz = half * z
    w = one - hz
    cos_r = w + (((one - w) - hz) + z * cos_poly)
    # Quadrant q = (k + quarters) mod 4: sin is sin_r, cos_r, -sin_r, -cos_r (cos(x) is
    # sin(x + pi/2)).
    q = k + quarters
    q = q - four * op18.Floor(q / four)
    odd = op18.Equal(q - two * op18.Floor(q * half), one)
    sign = one - two * op18.CastLike(q >= two, x)
    return op18.Where(odd, cos_r, sin_r) * sign


@script()
def sin_float64(x: DOUBLE[...]) -> DOUBLE[...]:
    """sin(x) to a few ulp of NumPy for |x| < 2**20 (ONNX Runtime's Sin above, which loses
    relative accuracy near its zeros); sin(-0.0) = -0.0."""
    reduced = _sin_cos_reduced(x, op18.CastLike(0.0, x))
    result = op18.Where(op18.Abs(x) < op18.CastLike(TAN_REDUCTION_LIMIT, x), reduced, op18.Sin(x))
    return op18.Where(op18.Abs(x) > op18.CastLike(0.0, x), result, x)


@script()
def cos_float64(x: DOUBLE[...]) -> DOUBLE[...]:
    """cos(x) to a few ulp of NumPy for |x| < 2**20 (ONNX Runtime's Cos above)."""
    reduced = _sin_cos_reduced(x, op18.CastLike(1.0, x))
    return op18.Where(op18.Abs(x) < op18.CastLike(TAN_REDUCTION_LIMIT, x), reduced, op18.Cos(x))


# Cephes atan on [0, 0.66]: atan(w) = w + w z P(z) / Q(z), z = w*w.
ATAN_P = np.array(
    [
        -8.750608600031904122785e-1,
        -1.615753718733365076637e1,
        -7.500855792314704667340e1,
        -1.228866684490136173410e2,
        -6.485021904942025371773e1,
    ]
)
ATAN_Q = np.array(
    [
        2.485846490142306297962e1,
        1.650270098316988542046e2,
        4.328810604912902668951e2,
        4.853903996359136964868e2,
        1.945506571482613964425e2,
    ]
)
TAN_3PI_8 = np.array(2.41421356237309504880)
ATAN_MID = np.array(0.66)
PI_2 = np.array(np.pi / 2)
PI_4 = np.array(np.pi / 4)
PI_2_LOW = np.array(6.123233995736765886130e-17)  # pi/2 - PI_2


@script()
def arctan2(y: TFloat, x: TFloat) -> TFloat:
    """atan2(y, x): Cephes' atan of t = |y| / |x| (pi/2 + atan(-1/t) above tan(3pi/8),
    pi/4 + atan((t-1)/(t+1)) above 0.66), moved to the quadrant of (x, y) as NumPy does."""
    zero = op18.CastLike(0.0, y)
    half = op18.CastLike(0.5, y)
    one = op18.CastLike(1.0, y)
    p = op18.CastLike(ATAN_P, y)
    q = op18.CastLike(ATAN_Q, y)
    pi_2_low = op18.CastLike(PI_2_LOW, y)
    ay = op18.Abs(y)
    ax = op18.Abs(x)
    # 0/0 and inf/inf: the angles C99 gives, 0 and pi/4.
    t = op18.Where(
        op18.And(op18.Equal(ay, zero), op18.Equal(ax, zero)),
        zero,
        op18.Where(op18.And(op18.IsInf(ay), op18.IsInf(ax)), one, ay / ax),
    )
    big = t > op18.CastLike(TAN_3PI_8, y)
    mid = t > op18.CastLike(ATAN_MID, y)
    w = op18.Where(big, -one / t, op18.Where(mid, (t - one) / (t + one), t))
    base = op18.Where(big, op18.CastLike(PI_2, y), op18.Where(mid, op18.CastLike(PI_4, y), zero))
    low = op18.Where(big, pi_2_low, op18.Where(mid, half * pi_2_low, zero))
    z = w * w
    num = (((p[0] * z + p[1]) * z + p[2]) * z + p[3]) * z + p[4]
    den = ((((z + q[0]) * z + q[1]) * z + q[2]) * z + q[3]) * z + q[4]
    angle = base + ((w * (z * num / den) + w) + low)
    # x < 0 or x = -0: the angle from the negative x axis; then the sign of y, -0 included.
    x_negative = op18.Or(x < zero, one / x < zero)
    angle = op18.Where(x_negative, (op18.CastLike(PI, y) - angle) + (pi_2_low + pi_2_low), angle)
    y_positive = op18.Or(y > zero, one / y > zero)
    return op18.Where(y_positive, angle, -angle)


# ---------------------------------------------------------------- erf, erfc (fdlibm s_erf.c)

ERX = np.array(8.45062911510467529297e-01)  # erf(1) rounded to float32
# erf(x) = x + x PP(x*x) / QQ(x*x) on [0, 0.84375] (QQ's constant term, 1, left out)
ERF_PP = np.array(
    [
        1.28379167095512558561e-01,
        -3.25042107247001499370e-01,
        -2.84817495755985104766e-02,
        -5.77027029648944159157e-03,
        -2.37630166566501626084e-05,
    ]
)
ERF_QQ = np.array(
    [
        3.97917223959155352819e-01,
        6.50222499887672944485e-02,
        5.08130628187576562776e-03,
        1.32494738004321644526e-04,
        -3.96022827877536812320e-06,
    ]
)
# erf(1 + s) = ERX + PA(s) / QA(s) on [0.84375, 1.25]
ERF_PA = np.array(
    [
        -2.36211856075265944077e-03,
        4.14856118683748331666e-01,
        -3.72207876035701323847e-01,
        3.18346619901161753674e-01,
        -1.10894694282396677476e-01,
        3.54783043256182359371e-02,
        -2.16637559486879084300e-03,
    ]
)
ERF_QA = np.array(
    [
        1.06420880400844228286e-01,
        5.40397917702171048937e-01,
        7.18286544141962662868e-02,
        1.26171219808761642112e-01,
        1.36370839120290507362e-02,
        1.19844998467991074170e-02,
    ]
)
# erfc(a) = exp(-a*a - 0.5625 + R(s) / S(s)) / a, s = 1 / (a*a): RA/SA below 1/0.35, RB/SB above
ERFC_RA = np.array(
    [
        -9.86494403484714822705e-03,
        -6.93858572707181764372e-01,
        -1.05586262253232909814e01,
        -6.23753324503260060396e01,
        -1.62396669462573470355e02,
        -1.84605092906711035994e02,
        -8.12874355063065934246e01,
        -9.81432934416914548592e00,
    ]
)
ERFC_SA = np.array(
    [
        1.96512716674392571292e01,
        1.37657754143519042600e02,
        4.34565877475229228821e02,
        6.45387271733267880336e02,
        4.29008140027567833386e02,
        1.08635005541779435134e02,
        6.57024977031928170135e00,
        -6.04244152148580987438e-02,
    ]
)
ERFC_RB = np.array(
    [
        -9.86494292470009928597e-03,
        -7.99283237680523006574e-01,
        -1.77579549177547519889e01,
        -1.60636384855821916062e02,
        -6.37566443368389627722e02,
        -1.02509513161107724954e03,
        -4.83519191608651397019e02,
    ]
)
ERFC_SB = np.array(
    [
        3.03380607434824582924e01,
        3.25792512996573918826e02,
        1.53672958608443695994e03,
        3.19985821950859553908e03,
        2.55305040643316442583e03,
        4.74528541206955367215e02,
        -2.24409524465858183362e01,
    ]
)
ERFC_SPLIT = np.array(1 / 0.35)
# Veltkamp's constants 2**s + 1, leaving p - s bits in the upper part of a p-bit significand:
# 24 for float64, 11 for float32, so h*h (and -h*h - 0.5625, below 2**10) is exact.
SPLITTERS = np.array([2.0**29 + 1, 2.0**13 + 1])
STEP_BELOW_FLOAT32 = np.array(2.0**-40)  # 1 + this is 1 in float32, not in float64


@script()
def split_high(x: TFloat) -> TFloat:
    """x rounded to the upper part of its significand (Veltkamp's split): h*h is exact, and so
    is x - h, whatever ONNX Runtime's optimizer does (it may remove a Cast pair)."""
    one = op18.CastLike(1.0, x)
    splitters = op18.CastLike(SPLITTERS, x)
    wide = (one + op18.CastLike(STEP_BELOW_FLOAT32, x)) > one
    c = x * op18.Where(wide, splitters[0], splitters[1])
    return c - (c - x)


@script()
def _erf_small_ratio(x: TFloat) -> TFloat:
    """fdlibm's PP/QQ(x*x): erf(x) = x + x PP/QQ below |x| = 0.84375."""
    one = op18.CastLike(1.0, x)
    pp = op18.CastLike(ERF_PP, x)
    qq = op18.CastLike(ERF_QQ, x)
    z = x * x
    pp_z = (((pp[4] * z + pp[3]) * z + pp[2]) * z + pp[1]) * z + pp[0]
    qq_z = ((((qq[4] * z + qq[3]) * z + qq[2]) * z + qq[1]) * z + qq[0]) * z + one
    return pp_z / qq_z


@script()
def _erf_near_one_ratio(a: TFloat) -> TFloat:
    """fdlibm's PA/QA(a - 1): erf(a) = erx + PA/QA for 0.84375 <= a < 1.25."""
    one = op18.CastLike(1.0, a)
    pa = op18.CastLike(ERF_PA, a)
    qa = op18.CastLike(ERF_QA, a)
    s = a - one
    pa_s = (((((pa[6] * s + pa[5]) * s + pa[4]) * s + pa[3]) * s + pa[2]) * s + pa[1]) * s + pa[0]
    qa_s = (((((qa[5] * s + qa[4]) * s + qa[3]) * s + qa[2]) * s + qa[1]) * s + qa[0]) * s + one
    return pa_s / qa_s


@script()
def erfc_tail_exponent(a: TFloat) -> TFloat:
    """fdlibm's R/S(1/(a*a)) for a >= 1.25: erfc(a) = exp(-a*a - 0.5625 + R/S) / a."""
    one = op18.CastLike(1.0, a)
    ra = op18.CastLike(ERFC_RA, a)
    sa = op18.CastLike(ERFC_SA, a)
    rb = op18.CastLike(ERFC_RB, a)
    sb = op18.CastLike(ERFC_SB, a)
    s = one / (a * a)
    ra_s = (((ra[7] * s + ra[6]) * s + ra[5]) * s + ra[4]) * s + ra[3]
    ra_s = ((ra_s * s + ra[2]) * s + ra[1]) * s + ra[0]
    sa_s = (((sa[7] * s + sa[6]) * s + sa[5]) * s + sa[4]) * s + sa[3]
    sa_s = (((sa_s * s + sa[2]) * s + sa[1]) * s + sa[0]) * s + one
    rb_s = (((((rb[6] * s + rb[5]) * s + rb[4]) * s + rb[3]) * s + rb[2]) * s + rb[1]) * s + rb[0]
    sb_s = ((sb[6] * s + sb[5]) * s + sb[4]) * s + sb[3]
    sb_s = (((sb_s * s + sb[2]) * s + sb[1]) * s + sb[0]) * s + one
    return op18.Where(a < op18.CastLike(ERFC_SPLIT, a), ra_s / sa_s, rb_s / sb_s)


@script()
def _erfc_tail(a: TFloat) -> TFloat:
    """erfc(a) for a >= 1.25; SciPy's 0 once a*a > MAXLOG."""
    # -a*a = -h*h + (h - a)(h + a) with h = a rounded to 24 bits, so h*h is exact.
    h = split_high(a)
    r_s = erfc_tail_exponent(a)
    tail = op18.Exp(-h * h - op18.CastLike(0.5625, a)) * op18.Exp((h - a) * (h + a) + r_s) / a
    return op18.Where(a * a > op18.CastLike(MAXLOG, a), op18.CastLike(0.0, a), tail)


@script()
def erf(x: TFloat) -> TFloat:
    """fdlibm's erf: x + x PP/QQ(x*x) below |x| = 0.84375, erx + PA/QA(|x| - 1) below 1.25,
    1 - erfc(|x|) from its asymptotic form above; odd."""
    zero = op18.CastLike(0.0, x)
    one = op18.CastLike(1.0, x)
    a = op18.Abs(x)
    near_zero = x + x * _erf_small_ratio(x)
    near_one = op18.CastLike(ERX, x) + _erf_near_one_ratio(a)
    magnitude = op18.Where(a < op18.CastLike(1.25, x), near_one, one - _erfc_tail(a))
    signed = op18.Where(x < zero, -magnitude, magnitude)
    return op18.Where(a >= op18.CastLike(0.84375, x), signed, near_zero)


@script()
def erfc(x: TFloat) -> TFloat:
    """fdlibm's erfc: 1 - erf(x) from x PP/QQ(x*x) below |x| = 0.84375, from PA/QA(|x| - 1) below
    1.25, exp(-x*x - 0.5625 + RS(1/(x*x))) / |x| above (2 minus that for x < 0); SciPy's 0 once
    x*x > MAXLOG."""
    zero = op18.CastLike(0.0, x)
    half = op18.CastLike(0.5, x)
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    erx = op18.CastLike(ERX, x)
    a = op18.Abs(x)
    xy = x * _erf_small_ratio(x)
    near_zero = op18.Where(x < op18.CastLike(0.25, x), one - (x + xy), half - (xy + (x - half)))
    pq = _erf_near_one_ratio(a)
    near_one = op18.Where(x < zero, one + (erx + pq), (one - erx) - pq)
    tail = _erfc_tail(a)
    far = op18.Where(x < zero, two - tail, tail)
    return op18.Where(
        a < op18.CastLike(0.84375, x),
        near_zero,
        op18.Where(a < op18.CastLike(1.25, x), near_one, far),
    )


# ---------------------------------------------------------------- translations


def _computed_inputs(g, node, inputs):
    """The inputs in the dtype the node computes in: its output dtype, float32 for float16."""
    out = node.outputs[0].type.dtype
    dtype = "float32" if out == "float16" else out
    cast = [
        x if var.type.dtype == dtype else g.Cast(x, to=onnx_dtype(dtype))
        for var, x in zip(node.inputs, inputs, strict=True)
    ]
    return cast, dtype


def _as_output(g, node, value, dtype: str):
    """`value`, computed in `dtype`, in the node's output dtype."""
    out = node.outputs[0].type.dtype
    return value if out == dtype else g.Cast(value, to=onnx_dtype(out))


# The float64 implementation and the float32 one: an ONNX op (whose float32 kernel is accurate)
# or a scripted function.
_UNARY = {
    ps.Tan: (tan_float64, "Tan"),
    ps.Sin: (sin_float64, "Sin"),
    ps.Cos: (cos_float64, "Cos"),
    ps.Sinh: (sinh, "Sinh"),
    ps.Cosh: (cosh, "Cosh"),
    ps.ArcSinh: (arcsinh, "Asinh"),
    ps.ArcCosh: (arccosh, "Acosh"),
    ps.ArcTanh: (arctanh, "Atanh"),
    psm.Erf: (erf, "Erf"),
    psm.Erfc: (erfc, erfc),
    ps.Log1p: (log1p, log1p),
    ps.Expm1: (expm1, expm1),
}


@register_scalar(*_UNARY)
def transcendental(g, node, x):
    """Tan, Sinh, Cosh, ArcSinh, ArcCosh, ArcTanh, Erf -> the scripted algorithm in float64,
    the ONNX op in float32; Erfc, Sigmoid, Softplus, Log1p, Expm1 -> the scripted algorithm."""
    (x,), dtype = _computed_inputs(g, node, [x])
    float64, float32 = lookup(_UNARY, node.op)
    function = float64 if dtype == "float64" else float32
    result = getattr(g, function)(x) if isinstance(function, str) else inline(g, function, x)
    return _as_output(g, node, result, dtype)


@register_scalar(psm.Softplus, psm.Sigmoid)
def logistic_op(g, node, x):
    """Softplus -> `logistic`; Sigmoid -> 1 / (1 + exp(-x)), or `logistic` where it shares its
    parts with another Sigmoid or a Softplus of its Composite (`shared_logistic`) or with
    one of x or -x already translated (an Elemwise sigmoid beside a fused softplus)."""
    (x,), dtype = _computed_inputs(g, node, [x])
    root = g.builder.root
    negated = negation_of(x)
    built = root.logistic_bases.get(unguarded(x if negated is None else negated))
    if built is not None and _graph_of(built) is not _graph_of(x):
        built = None  # built in another graph (a Loop body, a branch): not readable here
    if isinstance(node.op, psm.Softplus) or id(node) in root.shared_logistic:
        result = logistic(g, node.op, x, dtype)
    elif built is not None:
        result = logistic(g, node.op, x, dtype, w=built)
    else:
        result = inline(g, sigmoid, x)
    return _as_output(g, node, result, dtype)


@register_scalar(ps.ArcTan2)
def arctan2_(g, node, y, x):
    """ArcTan2 -> the scripted atan2."""
    (y, x), dtype = _computed_inputs(g, node, [y, x])
    return _as_output(g, node, inline(g, arctan2, y, x), dtype)


@register_scalar(ps.Angle)
def angle(g, node, x):
    """Angle of a real number (ONNX Runtime has no complex dtypes): np.angle's atan2(0, x),
    0 for x >= +0.0, pi for x < 0 and -0.0, NaN for NaN, in the dtype NumPy computes it in
    (float32 for float32 and int16, float16 for float16, int8 and bool: pi is then rounded
    to it) before PyTensor's float64."""
    in_dtype = node.inputs[0].type.dtype
    numpy_dtype = np.arctan2(np.zeros(1, in_dtype), np.zeros(1, in_dtype)).dtype.name
    dtype = "float32" if numpy_dtype == "float16" else numpy_dtype
    if in_dtype != dtype:
        x = g.Cast(x, to=onnx_dtype(dtype))
    value = inline(g, arctan2, constant(g, 0.0, dtype), x)
    if numpy_dtype != dtype:
        value = g.Cast(value, to=onnx_dtype(numpy_dtype))
    return _as_output(g, node, value, numpy_dtype)


_ARC = {ps.ArcSin: "Asin", ps.ArcCos: "Acos", ps.ArcTan: "Atan"}


@register_scalar(*_ARC)
def arc(g, node, x):
    """ArcSin, ArcCos, ArcTan -> Asin, Acos, Atan in float32; in float64 the scripted atan2 of
    (x, sqrt((1 - x)(1 + x))), (sqrt((1 - x)(1 + x)), x) and (x, 1)."""
    (x,), dtype = _computed_inputs(g, node, [x])
    if dtype != "float64":
        return _as_output(g, node, getattr(g, lookup(_ARC, node.op))(x), dtype)
    one = constant(g, 1.0, dtype)
    if isinstance(node.op, ps.ArcTan):
        return inline(g, arctan2, x, one)
    # (1 - x)(1 + x) rather than 1 - x*x: 1 - x is exact near 1, where asin and acos are steep.
    root = g.Sqrt(g.Mul(g.Sub(one, x), g.Add(one, x)))
    if isinstance(node.op, ps.ArcSin):
        return inline(g, arctan2, x, root)
    return inline(g, arctan2, root, x)
