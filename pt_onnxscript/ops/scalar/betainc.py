"""The regularized incomplete beta function.

Cephes' incbet (PyTensor's C backend) chooses, as there, a power series for b x <= 1 and
x <= 0.95, otherwise one of two continued fractions after the swap (a, b, x) -> (b, a, 1 - x)
above the mean a / (a + b); the factor x^a (1 - x)^b / B(a, b) they multiply is Boost's (as in
SciPy), through Lanczos' approximation, where Cephes' log-gamma differences lose digits for
large a and b. The continued fractions run until they converge, not Cephes' 300 steps, which
fall short near the mean once a + b passes ~1e5 (1e-2 off at a, b ~ 1e7, as in PyTensor's C
backend). Where one parameter is below 1 and x within 0.3 of 1 on the other's side (Boost's
domain of BGRAT, _bgrat_domain), incbet's continued fraction converges slowly (its 300 steps
left I_0.9999999 (17690, 0.0016) 3.6% low, and I_(1 - 2^-52) (2, 1e-300) 32%): there it is
Boost's choice (SciPy's), DiDonato and Morris' asymptotic expansion BGRAT, after Boost's step
of a by 20 (_a_step) below a = 15. Everything computes in float64 and rounds once to the
output dtype.
"""

from fractions import Fraction
from math import factorial

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import BOOL, DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.constants import MACHEP, MAXLOG, NAN, E
from pt_onnxscript.ops.scalar.gammainc import (
    LANCZOS_G,
    _any,
    _igam_fac,
    _lanczos_sum_expg_scaled,
    gammaincc,
)
from pt_onnxscript.ops.scalar.math import log1p
from pt_onnxscript.ops.scalar.special import _some
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

# Boost's switch to log1p for bases near 1, and Cephes' largest x of the power series.
POWER_TERMS_NEAR_ONE = np.array(0.1)
SERIES_MAX_X = np.array(0.95)
# Cephes stops its continued fractions after 300 steps, which do not converge near the mean
# once a + b passes ~1e5 (1e-2 off for a, b ~ 1e7); Boost allows 1e6. A step costs ~10 us.
CONTINUED_FRACTION_STEPS = 100000


def _bgrat_polynomials(count: int = 30) -> np.ndarray:
    """DiDonato and Morris' p_n(b) of BGRAT (their equation 9.4, Boost's table of Pn) for n <
    `count`, as the coefficients of b^0 .. b^count of each (exact rationals, rounded once):
    p_0 = 1, p_n = (1/n) sum_{m=1}^{n-1} (m b - n) p_{n-m} / (2m+1)! + (b - 1) / (2n+1)!."""
    table = [[Fraction(1)]]
    for n in range(1, count):
        row = [Fraction(0)] * (n + 1)
        for m in range(1, n):
            for k, c in enumerate(table[n - m]):  # (m b - n) c b^k
                row[k] -= n * c / factorial(2 * m + 1)
                row[k + 1] += m * c / factorial(2 * m + 1)
        row = [c / n for c in row]
        row[0] -= Fraction(1, factorial(2 * n + 1))
        row[1] += Fraction(1, factorial(2 * n + 1))
        table.append(row)
    coefficients = np.zeros((count, count + 1))
    for n, row in enumerate(table):
        coefficients[n, : len(row)] = [float(c) for c in row]
    return coefficients


BGRAT_P = _bgrat_polynomials()
BGRAT_POWERS = np.arange(float(BGRAT_P.shape[1]))
# Boost's domain of BGRAT (ibeta_imp): the large parameter from 15 (above 1, after a step of
# a by A_STEP), its variable's complement below 0.3, except where the power series serves
# (below 0.1, with (a y)^b <= 0.7); with both parameters at most 1, b below min(0.2, a) and
# y^b above 0.9.
BGRAT_MIN_A = np.array(15.0)
A_STEP = 20
BOTH_SMALL_MAX_B = np.array(0.2)
BOTH_SMALL_MIN_POWER = np.array(0.9)
BGRAT_MAX_Y = np.array(0.3)
SERIES_MAX_Y = np.array(0.1)
SERIES_MAX_POWER = np.array(0.7)
# BGRAT's log(x) through log1p(-y) below this y.
LOG1P_MAX_Y = np.array(0.35)
EPSILON = np.array(2.0**-52)
TINY = np.array(np.finfo(np.float64).tiny)


@script()
def _power_terms(a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], y: DOUBLE[...]) -> DOUBLE[...]:
    """x^a y^b / B(a, b) through Lanczos' approximation (Boost's ibeta_power_terms): no
    cancellation between log-gammas, bases near 1 through log1p."""
    half = op18.CastLike(0.5, a)
    g = op18.CastLike(LANCZOS_G, a)
    maxlog = op18.CastLike(MAXLOG, a)
    agh = a + g - half
    bgh = b + g - half
    cgh = a + b + g - half
    lanczos = (
        _lanczos_sum_expg_scaled(a + b) / _lanczos_sum_expg_scaled(a) / _lanczos_sum_expg_scaled(b)
    )
    result = lanczos * op18.Sqrt(bgh / op18.CastLike(E, a)) * op18.Sqrt(agh / cgh)
    l1 = (x * b - y * agh) / agh
    l2 = (y * a - x * bgh) / bgh
    near1 = op18.Abs(l1) < op18.CastLike(POWER_TERMS_NEAR_ONE, a)
    near2 = op18.Abs(l2) < op18.CastLike(POWER_TERMS_NEAR_ONE, a)
    log1 = op18.Where(near1, a * log1p(op18.Where(near1, l1, half)), a * op18.Log(x * cgh / agh))
    log2 = op18.Where(near2, b * log1p(op18.Where(near2, l2, half)), b * op18.Log(y * cgh / bgh))
    term1 = op18.Where(near1, op18.Exp(log1), op18.Pow(x * cgh / agh, a))
    term2 = op18.Where(near2, op18.Exp(log2), op18.Pow(y * cgh / bgh, b))
    finite = op18.And(op18.Abs(log1) < maxlog, op18.Abs(log2) < maxlog)
    return op18.Where(finite, result * term1 * term2, op18.Exp(log1 + log2 + op18.Log(result)))


@script()
def _power_series(a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """I_x(a, b) for b x <= 1 and x <= 0.95: Cephes' pseries sum times x^a / B(a, b), the
    Lanczos power terms over (1 - x)^b."""
    one = op18.CastLike(1.0, a)
    ai = one / a
    u = (one - b) * x
    v = u / (a + one)
    t1 = v
    t = u
    s = op18.CastLike(0.0, a) * v
    z = op18.CastLike(MACHEP, a) * ai
    for i in range(5000):
        live = op18.Abs(v) > z
        n = op18.CastLike(i + 2, a)
        t_next = t * ((n - b) * x / n)
        v_next = t_next / (a + n)
        t = op18.Where(live, t_next, t)
        s = op18.Where(live, s + v_next, s)
        v = op18.Where(live, v_next, v)
        finished = op18.Not(op18.Cast(_any(op18.CastLike(op18.Abs(v) > z, a)), to=BOOL.dtype))
        if finished:
            break
    s = s + t1
    s = s + ai
    y = op18.CastLike(1.0, a) - x
    return _power_terms(a, b, x, y) * s / op18.Exp(b * log1p(-x))


@script()
def _continued_fraction(
    a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], second: BOOL[...]
) -> DOUBLE[...]:
    """Cephes' incbcf, or incbd where `second` (in z = x / (1 - x)): convergents rescaled past
    2^52, until converged (at most CONTINUED_FRACTION_STEPS, not Cephes' 300).

    The state travels as the rows of one tensor [pkm2, pkm1, qkm2, qkm1, ans, r]: onnxscript 0.7
    binds a loop's results out of order when it carries five values or more."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    big = op18.CastLike(4.503599627370496e15, a)
    biginv = op18.CastLike(2.22044604925031308085e-16, a)
    thresh = op18.CastLike(3.0, a) * op18.CastLike(MACHEP, a)
    axis = op18.Constant(value_ints=[0])
    z = op18.Where(second, x / (one - x), x)
    state = op18.Concat(
        op18.Unsqueeze(zero * z, axis),
        op18.Unsqueeze(one + zero * z, axis),
        op18.Unsqueeze(one + zero * z, axis),
        op18.Unsqueeze(one + zero * z, axis),
        op18.Unsqueeze(one + zero * z, axis),
        op18.Unsqueeze(one + zero * z, axis),
        axis=0,
    )
    pending = op18.Not(op18.IsNaN(z))
    for i in range(CONTINUED_FRACTION_STEPS):
        n = op18.CastLike(i, a)
        k1 = a + n
        k3 = a + two * n
        k4 = k3 + one
        k5 = one + n
        k8 = k3 + two
        k2 = op18.Where(second, b - one - n, a + b + n)
        k6 = op18.Where(second, a + b + n, b - one - n)
        pkm2 = state[0]
        pkm1 = state[1]
        qkm2 = state[2]
        qkm1 = state[3]
        xk = -(z * k1 * k2) / (k3 * k4)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2 = pkm1
        pkm1 = pk
        qkm2 = qkm1
        qkm1 = qk
        xk = (z * k5 * k6) / (k4 * k8)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        nonzero = op18.Not(op18.Equal(qk, zero))
        r = op18.Where(nonzero, pk / op18.Where(nonzero, qk, one), state[5])
        moved = op18.Not(op18.Equal(r, zero))
        t = op18.Where(moved, op18.Abs((state[4] - r) / op18.Where(moved, r, one)), one)
        ans = op18.Where(moved, r, state[4])
        down = op18.Where(op18.Abs(qk) + op18.Abs(pk) > big, biginv, one)
        up = op18.Where(op18.Or(op18.Abs(qk) < biginv, op18.Abs(pk) < biginv), big, one)
        updated = op18.Concat(
            op18.Unsqueeze(pkm1 * down * up, axis),
            op18.Unsqueeze(pk * down * up, axis),
            op18.Unsqueeze(qkm1 * down * up, axis),
            op18.Unsqueeze(qk * down * up, axis),
            op18.Unsqueeze(ans, axis),
            op18.Unsqueeze(r, axis),
            axis=0,
        )
        state = op18.Where(op18.Unsqueeze(pending, axis), updated, state)
        pending = op18.And(pending, op18.Not(t < thresh))
        finished = op18.Not(op18.Cast(_any(op18.CastLike(pending, a)), to=BOOL.dtype))
        if finished:
            break
    return state[4]


@script()
def _incbet(a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], xc: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes' incbet for 0 < x < 1 below the mean (or in the power series' domain); xc = 1 - x
    as the caller rounded it."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    series = op18.And(b * x <= one, x <= op18.CastLike(SERIES_MAX_X, a))
    y = x * (a + b - two) - (a - one)
    second = op18.Not(y < zero)
    # The elements the series serves enter both loops at x = 0, where each stops at once.
    cf = _continued_fraction(a, b, op18.Where(series, zero, x), op18.And(second, op18.Not(series)))
    w = op18.Where(second, cf / xc, cf)
    fraction = _power_terms(a, b, x, xc) / a * w
    return op18.Where(series, _power_series(a, b, op18.Where(series, x, zero)), fraction)


@script()
def _gamma_delta_ratio(z: DOUBLE[...], delta: DOUBLE[...]) -> DOUBLE[...]:
    """Gamma(z) / Gamma(z + delta) for z >= 15 and |delta| <= 1: Boost's tgamma_delta_ratio
    through Lanczos' approximation (z + delta's rounding only reaches the Lanczos sums)."""
    half = op18.CastLike(0.5, z)
    zgh = z + op18.CastLike(LANCZOS_G, z) - half
    result = op18.Exp((half - z) * log1p(delta / zgh))
    result = result * _lanczos_sum_expg_scaled(z) / _lanczos_sum_expg_scaled(z + delta)
    return result * op18.Pow(op18.CastLike(E, z) / (zgh + delta), delta)


@script()
def _bgrat(
    a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], y: DOUBLE[...], s0: DOUBLE[...]
) -> DOUBLE[...]:
    """s0 + I_x(a, b) for a >= 15, 0 < b < 1, x near 1 (y = 1 - x): DiDonato and Morris'
    asymptotic expansion BGRAT (their equations 9-9.6), as Boost's beta_small_b_large_a_series
    sums it: term n is prefix p_n(b) J_n, J_n by their recurrence from J_0 = Q(b, u) / h, until
    a term is below 2^-52 of the sum (at most 29); s0 where h = u^b e^-u / Gamma(b)
    underflows."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    epsilon = op18.CastLike(EPSILON, a)
    t = a + (b - one) / two
    lx = op18.Where(y < op18.CastLike(LOG1P_MAX_Y, a), log1p(-y), op18.Log(x))
    u = -t * lx
    h = _igam_fac(b, u)
    usable = h > op18.CastLike(TINY, a)
    prefix = h / _gamma_delta_ratio(a, b) / op18.Pow(t, b)
    j = gammaincc(b, u) / h
    total = s0 + prefix * j
    # p_n(b) for n = 0 .. 29 along a last axis.
    powers = op18.Pow(
        op18.Unsqueeze(b, op18.Constant(value_ints=[-1])), op18.CastLike(BGRAT_POWERS, a)
    )
    p = op18.MatMul(powers, op18.Transpose(op18.CastLike(BGRAT_P, a)))
    half_lx = lx / two
    lx2 = half_lx * half_lx
    t4 = two * two * t * t
    lxp = one + zero * b
    pending = usable
    for n in range(29):
        b2n = b + two * op18.CastLike(n, a)
        j = (b2n * (b2n + one) * j + (u + b2n + one) * lxp) / t4
        lxp = lxp * lx2
        term = prefix * op18.Gather(p, n + 1, axis=-1) * j
        total = op18.Where(pending, total + term, total)
        pending = op18.And(pending, op18.Not(op18.Abs(term) < epsilon * op18.Abs(total)))
        finished = op18.Not(_some(pending))
        if finished:
            break
    return op18.Where(usable, total, s0)


@script()
def _a_step(a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], y: DOUBLE[...]) -> DOUBLE[...]:
    """I_x(a, b) - I_x(a + 20, b): Boost's ibeta_a_step, x^a y^b / (a B(a, b)) times 1 + the
    sum of 19 terms, term_i = term_{i-1} (a + b + i) x / (a + i + 1)."""
    one = op18.CastLike(1.0, a)
    term = one + op18.CastLike(0.0, a) * x
    total = term
    for i in range(A_STEP - 1):
        n = op18.CastLike(i, a)
        term = term * ((a + b + n) * x / (a + n + one))
        total = total + term
    return _power_terms(a, b, x, y) / a * total


@script()
def _bgrat_domain(a: DOUBLE[...], b: DOUBLE[...], y: DOUBLE[...]) -> BOOL[...]:
    """Whether Boost computes I_x(a, b), y = 1 - x, by BGRAT (after a step of a by 20 for a <
    15, _a_step): for a > 1, where 0 < b < 1, y < 0.3, and not y < 0.1 with (a y)^b <= 0.7 (its
    power series' domain there); for a <= 1, where 0 < b < min(0.2, a), y < 0.3 and y^b > 0.9
    (what ibeta_imp reaches with both parameters at most 1)."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    near_one = y < op18.CastLike(BGRAT_MAX_Y, a)
    series = op18.And(
        y < op18.CastLike(SERIES_MAX_Y, a),
        op18.Pow(a * y, b) <= op18.CastLike(SERIES_MAX_POWER, a),
    )
    large_a = op18.And(op18.And(a > one, b < one), op18.Not(series))
    below = op18.Min(op18.CastLike(BOTH_SMALL_MAX_B, a), a)
    small_a = op18.And(
        op18.And(a <= one, b < below), op18.Pow(y, b) > op18.CastLike(BOTH_SMALL_MIN_POWER, a)
    )
    return op18.And(op18.And(b > zero, near_one), op18.Or(large_a, small_a))


@script()
def _with_bgrat(
    a: DOUBLE[...],
    b: DOUBLE[...],
    x: DOUBLE[...],
    y: DOUBLE[...],
    upper: BOOL[...],
    value: DOUBLE[...],
    on_a: BOOL[...],
    on_b: BOOL[...],
) -> DOUBLE[...]:
    """`value` (I_x(a, b), or I_y(b, a) where `upper`), replaced by BGRAT's in its domain on
    either side (`on_a`: _bgrat_domain(a, b, y); `on_b`: _bgrat_domain(b, a, x)): I_x(a, b)
    itself for a large, I_y(b, a) for b large (the other tail one minus it). The expansion
    runs only when some element needs it."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    half = op18.CastLike(0.5, a)
    either = op18.Or(on_a, on_b)
    if _some(either):
        # The large parameter first; elsewhere harmless values (a = 16, b = x = y = 1/2).
        large = op18.Where(on_b, b, op18.Where(on_a, a, op18.CastLike(16.0, a)))
        small = op18.Where(on_b, a, op18.Where(on_a, b, half))
        near_one = op18.Where(on_b, y, op18.Where(on_a, x, half))
        near_zero = op18.Where(on_b, x, op18.Where(on_a, y, half))
        # Below a = 15, Boost steps a up by 20: I_x(a, b) = _a_step + I_x(a + 20, b).
        step = large < op18.CastLike(BGRAT_MIN_A, a)
        stepped = _a_step(op18.Where(step, large, half), small, near_one, near_zero)
        shift = op18.Where(step, op18.CastLike(A_STEP, a), zero)
        expanded = _bgrat(
            large + shift, small, near_one, near_zero, op18.Where(step, stepped, zero)
        )
        result = op18.Where(
            either, op18.Where(op18.Xor(on_b, upper), one - expanded, expanded), value
        )
    else:
        result = op18.Identity(value)
    return result


@script()
def tail(
    a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...], y: DOUBLE[...], upper: BOOL[...]
) -> DOUBLE[...]:
    """I_x(a, b), or where `upper` its complement I_y(b, a), for 0 < x < 1 and y = 1 - x both
    given (so the smaller keeps all its digits): incbet's tail below the mean (or in the power
    series' domain) as it computes it, the other as one minus that. Without betainc's limits
    and edges, and without incbet's 1 - MACHEP for a tail below MACHEP."""
    one = op18.CastLike(1.0, a)
    half = op18.CastLike(0.5, a)
    series = op18.And(b * x <= one, x <= op18.CastLike(SERIES_MAX_X, a))
    flip = op18.And(op18.Not(series), x > a / (a + b))
    on_a = _bgrat_domain(a, b, y)
    on_b = _bgrat_domain(b, a, x)
    # BGRAT's elements enter incbet as I_1/2(1, 1), which its loops finish at once (its
    # continued fraction converges slowly there, which is why they are BGRAT's).
    cephes = op18.Not(op18.Or(on_a, on_b))
    a1 = op18.Where(cephes, op18.Where(flip, b, a), one)
    b1 = op18.Where(cephes, op18.Where(flip, a, b), one)
    x1 = op18.Where(cephes, op18.Where(flip, y, x), half)
    y1 = op18.Where(cephes, op18.Where(flip, x, y), half)
    inner = op18.Where(op18.Equal(x1, one), one, _incbet(a1, b1, x1, y1))
    value = op18.Where(op18.Xor(flip, upper), one - inner, inner)
    return _with_bgrat(a, b, x, y, upper, value, on_a, on_b)


@script()
def betainc(a: DOUBLE[...], b: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """I_x(a, b), with SciPy's limits: all mass at 0 for a = 0 or b = inf, at 1 for b = 0 or
    a = inf (NaN if both); NaN for a < 0, b < 0 or x outside [0, 1]."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    epsilon = op18.CastLike(MACHEP, a)
    series = op18.And(b * x <= one, x <= op18.CastLike(SERIES_MAX_X, a))
    xc = one - x
    flip = op18.And(op18.Not(series), x > a / (a + b))
    inside = op18.And(x > zero, x < one)
    half = op18.CastLike(0.5, a) + zero * x
    on_a = _bgrat_domain(a, b, xc)
    on_b = _bgrat_domain(b, a, x)
    # BGRAT's elements (see tail) and those outside (0, 1) enter incbet harmlessly.
    cephes = op18.And(inside, op18.Not(op18.Or(on_a, on_b)))
    a1 = op18.Where(cephes, op18.Where(flip, b, a), one)
    b1 = op18.Where(cephes, op18.Where(flip, a, b), one)
    x1 = op18.Where(cephes, op18.Where(flip, xc, x), half)
    xc1 = op18.Where(cephes, op18.Where(flip, one - xc, xc), half)
    inner = op18.Where(op18.Equal(x1, one), one, _incbet(a1, b1, x1, xc1))
    result = op18.Where(flip, op18.Where(inner <= epsilon, one - epsilon, one - inner), inner)
    lower_tail = op18.Not(op18.Equal(x1, x1))  # False (x1 is no NaN)
    result = _with_bgrat(a, b, x, xc, lower_tail, result, on_a, on_b)
    at_zero = op18.Or(op18.Equal(a, zero), op18.IsInf(b))
    at_one = op18.Or(op18.Equal(b, zero), op18.IsInf(a))
    result = op18.Where(at_zero, one, op18.Where(at_one, zero, result))
    result = op18.Where(op18.Equal(x, zero), zero, op18.Where(op18.Equal(x, one), one, result))
    invalid = op18.Or(
        op18.Or(op18.Not(a >= zero), op18.Not(b >= zero)), op18.Or(x < zero, op18.Not(x <= one))
    )
    invalid = op18.Or(invalid, op18.And(at_zero, at_one))
    return op18.Where(invalid, op18.CastLike(NAN, a), result)


@register_scalar(psm.BetaInc)
def incomplete_beta(g, node, a, b, x):
    """BetaInc -> Cephes' incbet in float64, rounded once to the output dtype."""
    return inline_in_float64(g, node, betainc, a, b, x)
