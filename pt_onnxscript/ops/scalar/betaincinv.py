"""The inverse of the regularized incomplete beta function: betaincinv (x with I_x(a, b) = p).

Halley's iteration (Newton's far from the root) on log-log scales, safeguarded by a bracket
(as Cephes' incbi and Boost's ibeta_inv, which SciPy runs, safeguard theirs), on whichever of
x and y = 1 - x lies in (0, 1/2], so that one keeps all its digits, and on whichever tail is
the smaller, p or q = 1 - p (exact for p >= 1/2): the tail is a power of its variable near 0,
so its logarithm is near linear in the variable's, and a step multiplies the variable,
keeping a tiny one's digits. The loop's first step tells which variable, from I_{1/2}(a, b)
against p (so the loop body holds the graph's only betainc). A step that leaves the bracket
is replaced by its geometric bisection. An element stops once a step moves it by less than
1e-7 relative (the step it takes then lands within rounding of the root: Halley's
convergence is cubic), at the root, or when it can no longer move; at most 100 steps.

The first approximation is Cephes' for a, b > 1 (a normal deviate), else the leading term of
the tail, x^a / (a B(a, b)) or y^b / (b B(a, b)). Edges are SciPy's: 0 at p = 0, 1 at p = 1,
1 for a = inf and 0 for b = inf otherwise, NaN outside a, b > 0 and 0 <= p <= 1 and for a and
b both infinite.
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import BOOL, DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.betainc import _power_terms, tail
from pt_onnxscript.ops.scalar.constants import NAN
from pt_onnxscript.ops.scalar.math import expm1
from pt_onnxscript.ops.scalar.special import _some, erfcinv, gammaln
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script

SQRT_2 = np.array(np.sqrt(2.0))
FIVE_SIXTHS = np.array(5.0 / 6.0)
# A step below this (relative) ends an element's iteration once taken.
STEP_TOLERANCE = np.array(1e-7)
# A bracket narrower than this (relative) ends it too.
BRACKET_TOLERANCE = np.array(2.0**-52)
# The bisection of a bracket (0, hi]: hi scaled down by this, to reach any float64 in ~32 steps.
BISECT_FROM_ZERO = np.array(2.0**-32)
ORDINARY_START = np.array(0.25)
# The orienting first step and at most 100 steps of the iteration.
MAX_STEPS = 101


@script()
def _first_guesses(
    a: DOUBLE[...], b: DOUBLE[...], p: DOUBLE[...], q: DOUBLE[...], upper: BOOL[...]
) -> DOUBLE[...]:
    """The starts of the variable in (0, 1/2], stacked [x's, y's]: Cephes' incbi's normal
    approximation for a, b > 1, else the leading term of the tail that is the target (q's
    where `upper`), 1/4 where either gives no value in (0, 1/2)."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    three = op18.CastLike(3.0, a)
    half = op18.CastLike(0.5, a)
    log_beta = gammaln(a) + gammaln(b) - gammaln(a + b)
    # I_x(a, b) ~ x^a / (a B(a, b)) near x = 0; I_y(b, a) ~ y^b / (b B(a, b)) near y = 0.
    log_x = (op18.Log(p) + op18.Log(a) + log_beta) / a
    log_y = (op18.Log(q) + op18.Log(b) + log_beta) / b
    x_from_tail = op18.Where(upper, -expm1(log_y), op18.Exp(log_x))
    y_from_tail = op18.Where(upper, op18.Exp(log_y), -expm1(log_x))
    # incbi: yp = -ndtri(p), x = a / (a + b exp(d)).
    yp = op18.CastLike(SQRT_2, a) * erfcinv(two * p)
    lgm = (yp * yp - three) / op18.CastLike(6.0, a)
    inv_a = one / (two * a - one)
    inv_b = one / (two * b - one)
    h = two / (inv_a + inv_b)
    d = yp * op18.Sqrt(h + lgm) / h - (inv_b - inv_a) * (
        lgm + op18.CastLike(FIVE_SIXTHS, a) - two / (three * h)
    )
    d = two * d
    normal = op18.And(a > one, b > one)
    x_guess = op18.Where(normal, one / (one + b / a * op18.Exp(d)), x_from_tail)
    y_guess = op18.Where(normal, one / (one + a / b * op18.Exp(-d)), y_from_tail)
    axis = op18.Constant(value_ints=[0])
    guesses = op18.Concat(op18.Unsqueeze(x_guess, axis), op18.Unsqueeze(y_guess, axis), axis=0)
    ordinary = op18.And(guesses > zero, guesses < half)
    return op18.Where(ordinary, guesses, op18.CastLike(ORDINARY_START, a))


@script()
def _solve(
    a: DOUBLE[...], b: DOUBLE[...], target: DOUBLE[...], upper: BOOL[...], starts: DOUBLE[...]
) -> DOUBLE[...]:
    """x at which the tail (I_x(a, b), or I_y(b, a) where `upper`) is `target`.

    The first step evaluates the tail at x = y = 1/2: the root's x is below 1/2 where h (below)
    is >= 0 there in x's orientation, so the variable v is x, else y; it starts at the guess
    `starts` holds for it ([x's, y's]). Then Halley's steps (Newton's where the Newton step is
    2 or more, or Halley's denominator below 1/2) on log(tail) against log(v): h(w) = sign (log
    tail - log target) at w = log v, increasing in w, h'(w) = v density / tail; the bracket
    [lo, hi] (from [0, 1/2]) holds the root. The bracket travels as one tensor: onnxscript 0.7
    binds a loop's results out of order when it carries five values or more."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    two = op18.CastLike(2.0, a)
    half = op18.CastLike(0.5, a)
    axis = op18.Constant(value_ints=[0])
    log_target = op18.Log(target)
    v = half + zero * target
    on_y = op18.Not(op18.Equal(v, v))  # x's orientation first (False; v is no NaN)
    bracket = op18.Concat(op18.Unsqueeze(zero * v, axis), op18.Unsqueeze(v, axis), axis=0)
    pending = op18.Not(op18.IsNaN(target))
    for step in range(MAX_STEPS):
        first = op18.Equal(step, op18.Constant(value_int=0))
        lo = bracket[0]
        hi = bracket[1]
        sign = op18.Where(op18.Equal(upper, on_y), one, -one)
        other = one - v
        x = op18.Where(on_y, other, v)
        y = op18.Where(on_y, v, other)
        value = tail(a, b, x, y, upper)
        h = sign * (op18.Log(value) - log_target)
        # h' = v times the density x^(a-1) y^(b-1) / B(a, b), over the tail; h'' / h' =
        # 1 + v d(log density)/dv - sign h'.
        slope = _power_terms(a, b, x, y) / (other * value)
        ratio = h / slope
        on_y_sign = op18.Where(on_y, -one, one)
        curvature = one + on_y_sign * v * ((a - one) / x - (b - one) / y) - sign * slope
        denominator = one - ratio * curvature / two
        halley = op18.And(op18.Abs(ratio) < two, denominator > half)
        move = op18.Where(halley, -ratio / denominator, -ratio)
        lo = op18.Where(op18.And(pending, h < zero), v, lo)
        hi = op18.Where(op18.And(pending, h > zero), v, hi)
        newton = v * op18.Exp(move)
        inside = op18.And(op18.And(newton >= lo, newton <= hi), newton > zero)
        bisection = op18.Where(
            lo > zero, op18.Sqrt(lo) * op18.Sqrt(hi), hi * op18.CastLike(BISECT_FROM_ZERO, a)
        )
        next_v = op18.Where(inside, newton, bisection)
        at_root = op18.Equal(h, zero)
        small_step = op18.And(inside, op18.Abs(move) < op18.CastLike(STEP_TOLERANCE, a))
        narrow = hi - lo <= op18.CastLike(BRACKET_TOLERANCE, a) * hi
        stuck = op18.Or(op18.Equal(next_v, v), op18.Equal(next_v, zero))
        done = op18.Or(op18.Or(at_root, small_step), op18.Or(narrow, stuck))
        # The first step only orients: the bracket stays [0, 1/2] and v takes its start.
        on_y = op18.Or(on_y, op18.And(first, h < zero))
        start = op18.Where(on_y, starts[1], starts[0])
        next_v = op18.Where(first, start, next_v)
        done = op18.And(done, op18.Or(op18.Not(first), at_root))
        lo = op18.Where(first, zero, lo)
        hi = op18.Where(first, half, hi)
        v = op18.Where(op18.And(pending, op18.Not(at_root)), next_v, v)
        pending = op18.And(pending, op18.Not(done))
        bracket = op18.Concat(op18.Unsqueeze(lo, axis), op18.Unsqueeze(hi, axis), axis=0)
        finished = op18.Not(_some(pending))
        if finished:
            break
    return op18.Where(on_y, one - v, v)


@script()
def betaincinv(a: DOUBLE[...], b: DOUBLE[...], p: DOUBLE[...]) -> DOUBLE[...]:
    """x with I_x(a, b) = p, with SciPy's edges (module docstring)."""
    zero = op18.CastLike(0.0, a)
    one = op18.CastLike(1.0, a)
    half = op18.CastLike(0.5, a)
    shape = op18.Shape(a * zero + b * zero + p * zero)
    a = op18.Expand(a, shape)
    b = op18.Expand(b, shape)
    p = op18.Expand(p, shape)
    infinite_a = op18.IsInf(a)
    infinite_b = op18.IsInf(b)
    valid = op18.And(op18.And(a > zero, b > zero), op18.And(p >= zero, p <= one))
    valid = op18.And(valid, op18.Not(op18.And(infinite_a, infinite_b)))
    inside = op18.And(op18.And(valid, op18.Not(op18.Or(infinite_a, infinite_b))), p > zero)
    inside = op18.And(inside, p < one)
    a1 = op18.Where(inside, a, one)
    b1 = op18.Where(inside, b, one)
    p1 = op18.Where(inside, p, half)
    q1 = one - p1
    upper = p1 > half
    starts = _first_guesses(a1, b1, p1, q1, upper)
    x = _solve(a1, b1, op18.Where(upper, q1, p1), upper, starts)
    x = op18.Where(infinite_b, zero, op18.Where(infinite_a, one, x))
    x = op18.Where(op18.Equal(p, zero), zero, op18.Where(op18.Equal(p, one), one, x))
    return op18.Where(valid, x, op18.CastLike(NAN, a))


@register_scalar(psm.BetaIncInv)
def inverse_incomplete_beta(g, node, a, b, p):
    """BetaIncInv -> the scripted float64 iteration, rounded once to the output dtype."""
    return inline_in_float64(g, node, betaincinv, a, b, p)
