"""The inverses of the regularized incomplete gamma functions: gammaincinv (x with
P(a, x) = p) and gammainccinv (x with Q(a, x) = q).

SciPy's Cephes igami/igamci (after Boost): DiDonato and Morris' first approximation
(ACM TOMS 12(4), 1986, equations 21-25 and 31-36), chosen per element by the same rules, then
three Halley steps on P (or on Q where the probability passed is above 0.9, as igami hands
such a p to igamci as q = 1 - p). Every branch is computed for the whole tensor and picked
by Where; the first approximation's one loop (the series of equation 36) sees harmless
inputs outside its branch. The Halley steps evaluate P or Q per element (gammainc.p_or_q).
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import BOOL, DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.constants import EULER, INF, NAN
from pt_onnxscript.ops.scalar.gammainc import _igam_fac, p_or_q
from pt_onnxscript.ops.scalar.math import log1p
from pt_onnxscript.ops.scalar.special import _lgamma_positive, _some, gamma
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

# find_inverse_s (DiDonato and Morris, equation 32): polevl's coefficients, highest power first.
S_NUMERATOR = np.array([0.213623493715853, 4.28342155967104, 11.6616720288968, 3.31125922108741])
S_DENOMINATOR = np.array(
    [0.3611708101884203e-1, 1.27364489782223, 6.40691597760039, 6.61053765625462, 1.0]
)
# The thresholds of find_inverse_gamma and igami, in float64.
T_0_01 = np.array(0.01)
T_0_1 = np.array(0.1)
T_0_15 = np.array(0.15)
T_0_3 = np.array(0.3)
T_0_35 = np.array(0.35)
T_0_45 = np.array(0.45)
T_0_6 = np.array(0.6)
T_0_7 = np.array(0.7)
T_0_9 = np.array(0.9)
T_1E_4 = np.array(1e-4)
T_1E_5 = np.array(1e-5)
T_1E_6 = np.array(1e-6)
T_1E_8 = np.array(1e-8)
T_2_3 = np.array(2.3)


@script()
def _find_inverse_s(p: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """DiDonato and Morris' equation 32: the normal deviate for p (or q)."""
    half = op18.CastLike(0.5, p)
    below = p < half
    t = op18.Sqrt(op18.CastLike(-2.0, p) * op18.Log(op18.Where(below, p, q)))
    n = op18.CastLike(S_NUMERATOR, p)
    d = op18.CastLike(S_DENOMINATOR, p)
    numerator = ((n[0] * t + n[1]) * t + n[2]) * t + n[3]
    denominator = (((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + d[4]
    s = t - numerator / denominator
    return op18.Where(below, -s, s)


@script()
def _equation_25(a: DOUBLE[...], y: DOUBLE[...]) -> DOUBLE[...]:
    """DiDonato and Morris' equation 25 at y: the inverse for a tiny p."""
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    three = op18.CastLike(3.0, a)
    c1 = (a - one) * op18.Log(y)
    c1_2 = c1 * c1
    c1_3 = c1_2 * c1
    c1_4 = c1_2 * c1_2
    a_2 = a * a
    a_3 = a_2 * a
    c2 = (a - one) * (one + c1)
    c3 = (a - one) * (-(c1_2 / two) + (a - two) * c1 + (three * a - op18.CastLike(5.0, a)) / two)
    c4 = (a - one) * (
        (c1_3 / three)
        - (three * a - op18.CastLike(5.0, a)) * c1_2 / two
        + (a_2 - op18.CastLike(6.0, a) * a + op18.CastLike(7.0, a)) * c1
        + (op18.CastLike(11.0, a) * a_2 - op18.CastLike(46.0, a) * a + op18.CastLike(47.0, a))
        / op18.CastLike(6.0, a)
    )
    c5 = (a - one) * (
        -(c1_4 / op18.CastLike(4.0, a))
        + (op18.CastLike(11.0, a) * a - op18.CastLike(17.0, a)) * c1_3 / op18.CastLike(6.0, a)
        + (-three * a_2 + op18.CastLike(13.0, a) * a - op18.CastLike(13.0, a)) * c1_2
        + (
            two * a_3
            - op18.CastLike(25.0, a) * a_2
            + op18.CastLike(72.0, a) * a
            - op18.CastLike(61.0, a)
        )
        * c1
        / two
        + (
            op18.CastLike(25.0, a) * a_3
            - op18.CastLike(195.0, a) * a_2
            + op18.CastLike(477.0, a) * a
            - op18.CastLike(379.0, a)
        )
        / op18.CastLike(12.0, a)
    )
    y_2 = y * y
    y_3 = y_2 * y
    y_4 = y_2 * y_2
    return y + c1 + (c2 / y) + (c3 / y_2) + (c4 / y_3) + (c5 / y_4)


@script()
def _didonato_sn(a: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """DiDonato and Morris' equation 34: 1 + sum of x^i / ((a+1)...(a+i)) for i up to 100,
    an element stopping after its first term below 1e-4 (an x of 0 stops at once)."""
    one = op18.CastLike(1.0, a)
    tolerance = op18.CastLike(T_1E_4, a)
    partial = x / (a + one)
    total = one + partial
    i = one + one
    pending = op18.Not(op18.Equal(x, op18.CastLike(0.0, a)))
    for step in range(99):
        new_partial = partial * (x / (a + i))
        partial = op18.Where(pending, new_partial, partial)
        total = op18.Where(pending, total + new_partial, total)
        pending = op18.And(pending, op18.Not(new_partial < tolerance))
        i = i + one
        finished = op18.Not(_some(pending))
        if finished:
            break
    return total


@script()
def _below_one(a: DOUBLE[...], p: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """The first approximation for a < 1: DiDonato and Morris' equations 21-25."""
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    three = op18.CastLike(3.0, a)
    five = op18.CastLike(5.0, a)
    euler = op18.CastLike(EULER, a)
    g = gamma(a)
    b = q * g
    # Equation 21 (its second form where p is near 1).
    power = op18.And(b * q > op18.CastLike(T_1E_8, a), q > op18.CastLike(T_1E_5, a))
    u = op18.Where(power, op18.Pow(p * g * a, one / a), op18.Exp((-q / a) - euler))
    eq21 = u / (one - (u / (a + one)))
    # Equation 22.
    t = op18.Exp(-euler - b)
    eq22 = t * op18.Exp(t * op18.Exp(t))
    # Equations 23 and 24.
    y = -op18.Log(b)
    v = y - (one - a) * op18.Log(y)
    eq23 = y - (one - a) * op18.Log(v) - op18.Log(one + (one - a) / (one + v))
    ratio = (v * v + two * (three - a) * v + (two - a) * (three - a)) / (
        v * v + (five - a) * v + two
    )
    eq24 = y - (one - a) * op18.Log(v) - op18.Log(ratio)
    eq25 = _equation_25(a, y)
    use21 = op18.Or(
        b > op18.CastLike(T_0_6, a),
        op18.And(b >= op18.CastLike(T_0_45, a), a >= op18.CastLike(T_0_3, a)),
    )
    use22 = op18.And(a < op18.CastLike(T_0_3, a), b >= op18.CastLike(T_0_35, a))
    use23 = op18.Or(b > op18.CastLike(T_0_15, a), a >= op18.CastLike(T_0_3, a))
    use24 = b > op18.CastLike(T_0_1, a)
    return op18.Where(
        use21,
        eq21,
        op18.Where(use22, eq22, op18.Where(use23, eq23, op18.Where(use24, eq24, eq25))),
    )


@script()
def _above_one(a: DOUBLE[...], p: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """The first approximation for a > 1: DiDonato and Morris' equations 31, 33, 25, 35, 36."""
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    three = op18.CastLike(3.0, a)
    half = op18.CastLike(0.5, a)
    s = _find_inverse_s(p, q)
    s_2 = s * s
    s_3 = s_2 * s
    s_4 = s_2 * s_2
    s_5 = s_4 * s
    ra = op18.Sqrt(a)
    w = a + s * ra + (s_2 - one) / three
    w = w + (s_3 - op18.CastLike(7.0, a) * s) / (op18.CastLike(36.0, a) * ra)
    w = w - (three * s_4 + op18.CastLike(7.0, a) * s_2 - op18.CastLike(16.0, a)) / (
        op18.CastLike(810.0, a) * a
    )
    w = w + (
        op18.CastLike(9.0, a) * s_5 + op18.CastLike(256.0, a) * s_3 - op18.CastLike(433.0, a) * s
    ) / (op18.CastLike(38880.0, a) * a * ra)
    # p > 1/2: w, or equation 25 or 33 where w >= 3a.
    d = op18.Max(two, a * (a - one))
    lb = op18.Log(q) + _lgamma_positive(a)
    eq25 = _equation_25(a, -lb)
    v = -lb + (a - one) * op18.Log(w) - op18.Log(one + (one - a) / (one + w))
    eq33 = -lb + (a - one) * op18.Log(v) - op18.Log(one + (one - a) / (one + v))
    upper = op18.Where(w < three * a, w, op18.Where(lb < -d * op18.CastLike(T_2_3, a), eq25, eq33))
    # p <= 1/2: equation 35's iteration where w is small, then equation 36 in between.
    ap1 = a + one
    ap2 = a + two
    v = op18.Log(p) + _lgamma_positive(ap1)
    z = op18.Exp((v + w) / a)
    t = log1p(z / ap1 * (one + z / ap2))
    z = op18.Exp((v + z - t) / a)
    t = log1p(z / ap1 * (one + z / ap2))
    z = op18.Exp((v + z - t) / a)
    t = log1p(z / ap1 * (one + z / ap2 * (one + z / (a + three))))
    z = op18.Exp((v + z - t) / a)
    z = op18.Where(w < op18.CastLike(T_0_15, a) * ap1, z, w)
    outside = op18.Or(z <= op18.CastLike(T_0_01, a) * ap1, z > op18.CastLike(T_0_7, a) * ap1)
    lower_branch = op18.And(op18.Not(p > half), op18.Not(outside))
    ls = op18.Log(_didonato_sn(a, op18.Where(lower_branch, z, op18.CastLike(0.0, a))))
    y = op18.Exp((v + z - ls) / a)
    eq36 = y * (one - (a * op18.Log(y) - y - v + ls) / (a - y))
    lower = op18.Where(outside, z, eq36)
    large = op18.And(a >= op18.CastLike(500.0, a), op18.Abs(one - w / a) < op18.CastLike(T_1E_6, a))
    return op18.Where(large, w, op18.Where(p > half, upper, lower))


@script()
def _first_guess(a: DOUBLE[...], p: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """find_inverse_gamma: DiDonato and Morris' first approximation to x with P(a, x) = p
    (Q(a, x) = q = 1 - p)."""
    one = op18.CastLike(1.0, a)
    exponential = op18.Where(q > op18.CastLike(T_0_9, a), -log1p(-p), -op18.Log(q))
    small = a < one
    a_small = op18.Where(small, a, op18.CastLike(0.5, a))
    a_large = op18.Where(small, op18.CastLike(2.0, a), a)
    guess = op18.Where(small, _below_one(a_small, p, q), _above_one(a_large, p, q))
    return op18.Where(op18.Equal(a, one), exponential, guess)


@script()
def _invert(a: DOUBLE[...], p: DOUBLE[...], q: DOUBLE[...], on_q: BOOL[...]) -> DOUBLE[...]:
    """x with P(a, x) = p, or Q(a, x) = q where `on_q` (q = 1 - p): the first approximation
    and three Halley steps on P (on Q), an element stopping where x^a e^-x / Gamma(a) is 0."""
    one = op18.CastLike(1.0, a)
    half = op18.CastLike(0.5, a)
    x = _first_guess(a, p, q)
    done = op18.Not(op18.Equal(a, a))  # False but for a NaN a (whose x is NaN anyway)
    for step in range(3):
        fac = _igam_fac(a, x)
        done = op18.Or(done, op18.Equal(fac, op18.CastLike(0.0, a)))
        value = p_or_q(a, x, on_q)
        f_fp = op18.Where(on_q, (value - q) * x / (-fac), (value - p) * x / fac)
        fpp_fp = -one + (a - one) / x
        newton = x - f_fp
        halley = x - f_fp / (one - half * f_fp * fpp_fp)
        step_x = op18.Where(op18.IsInf(fpp_fp), newton, halley)
        x = op18.Where(done, x, step_x)
    return x


@script()
def _inverse(
    a: DOUBLE[...],
    given: DOUBLE[...],
    p: DOUBLE[...],
    q: DOUBLE[...],
    on_q: BOOL[...],
    at_zero: DOUBLE[...],
    at_one: DOUBLE[...],
) -> DOUBLE[...]:
    """_invert for the probabilities `given` strictly between 0 and 1 (as the pair p, q = 1 -
    p, and whether to step on Q), `at_zero` and `at_one` at 0 and 1, NaN for NaN, a < 0 and
    `given` outside [0, 1] (SciPy's domain error)."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    half = op18.CastLike(0.5, a)
    inside = op18.And(given > zero, given < one)
    x = _invert(
        op18.Where(inside, a, one), op18.Where(inside, p, half), op18.Where(inside, q, half), on_q
    )
    x = op18.Where(op18.Equal(given, zero), at_zero, op18.Where(op18.Equal(given, one), at_one, x))
    bad = op18.Or(op18.Or(a < zero, given < zero), op18.Or(given > one, op18.IsNaN(a + given)))
    return op18.Where(bad, op18.CastLike(NAN, a), x)


@script()
def gammaincinv(a: DOUBLE[...], p: DOUBLE[...]) -> DOUBLE[...]:
    """x with P(a, x) = p: SciPy's igami (igamci's on q = 1 - p for p above 0.9)."""
    one = op18.CastLike(1.0, a)
    a = op18.Expand(a, op18.Shape(p))
    p = op18.Expand(p, op18.Shape(a))
    on_q = p > op18.CastLike(T_0_9, a)
    q = one - p
    p_used = op18.Where(on_q, one - q, p)
    return _inverse(a, p, p_used, q, on_q, one - one, op18.CastLike(INF, a))


@script()
def gammainccinv(a: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """x with Q(a, x) = q: SciPy's igamci (igami's on p = 1 - q for q above 0.9)."""
    one = op18.CastLike(1.0, a)
    a = op18.Expand(a, op18.Shape(q))
    q = op18.Expand(q, op18.Shape(a))
    on_p = q > op18.CastLike(T_0_9, a)
    p = one - q
    q_used = op18.Where(on_p, one - p, q)
    return _inverse(a, q, p, q_used, op18.Not(on_p), op18.CastLike(INF, a), one - one)


_FUNCTIONS = {psm.GammaIncInv: gammaincinv, psm.GammaIncCInv: gammainccinv}


@register_scalar(*_FUNCTIONS)
def inverse_incomplete_gamma(g, node, a, p):
    """GammaIncInv, GammaIncCInv -> the scripted float64 algorithm, rounded once to the
    output dtype."""
    return inline_in_float64(g, node, _FUNCTIONS[type(node.op)], a, p)
