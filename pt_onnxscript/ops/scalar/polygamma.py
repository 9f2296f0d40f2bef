"""PolyGamma: SciPy's polygamma(n, x), (-1)^(n+1) n! zeta(n + 1, x) for n >= 1, psi(x) for
n = 0, from Cephes' Hurwitz zeta (the Euler-Maclaurin sum SciPy runs, its early exits
included), in float64.

Cephes sums (q + i)^-s until q + i > 9: ten terms for x > 0, and as many more as x is below
0. Below 0 (off the poles) that count has no bound known at export, so a negative non-integer
x raises at run time (the message names it); the poles (0 and the negative integers) are inf,
as SciPy's.
"""

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.ops.common import constant, inline_in_float64, raise_if
from pt_onnxscript.ops.scalar.constants import INF, NAN
from pt_onnxscript.ops.scalar.special import gamma, psi
from pt_onnxscript.registry import register_scalar
from pt_onnxscript.scripted import script
from pt_onnxscript.types import onnx_dtype

# Cephes zeta's Euler-Maclaurin coefficients, (2k)! / B_2k.
ZETA_A = np.array(
    [
        12.0,
        -720.0,
        30240.0,
        -1209600.0,
        47900160.0,
        -1.8924375803183791606e9,
        7.47242496e10,
        -2.950130727918164224e12,
        1.1646782814350067249e14,
        -4.5979787224074726105e15,
        1.8152105401943546773e17,
        -7.1661652561756670113e18,
    ]
)
MACHEP = np.array(1.11022302462515654042e-16)
ASYMPTOTIC_Q = np.array(1.0e8)


@script()
def hurwitz_zeta(s: DOUBLE[...], q: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes zeta(s, q) for s >= 1 and q > 0 or a pole (q an integer <= 0: inf): the sum of
    (q + i)^-s for i <= 9 and Euler-Maclaurin's 12 terms, each step skipped once a term is
    below MACHEP of the sum (Cephes' exits); (1/(s - 1) + 1/(2q)) q^(1 - s) above 1e8."""
    zero = op18.CastLike(0.0, q)
    one = op18.CastLike(1.0, q)
    half = op18.CastLike(0.5, q)
    machep = op18.CastLike(MACHEP, q)
    total = op18.Pow(q, -s)
    a = op18.Identity(q)
    b = op18.Identity(zero)
    done = q < zero  # nothing is summed for a negative q (the caller's values there)
    for i in range(9):
        a = a + one
        b = op18.Pow(a, -s)
        total = op18.Where(done, total, total + b)
        done = op18.Or(done, op18.Abs(b / total) < machep)
    w = op18.Identity(a)
    tail = total + b * w / (s - one)
    tail = tail - half * b
    total = op18.Where(done, total, tail)
    coefficients = op18.CastLike(ZETA_A, q)
    a = op18.Identity(one)
    for j in range(12):
        k = op18.CastLike(j, q) * op18.CastLike(2.0, q)
        a = a * (s + k)
        b = b / w
        t = a * b / op18.Gather(coefficients, j)
        total = op18.Where(done, total, total + t)
        done = op18.Or(done, op18.Abs(t / total) < machep)
        a = a * (s + k + one)
        b = b / w
    far = (one / (s - one) + one / (op18.CastLike(2.0, q) * q)) * op18.Pow(q, one - s)
    result = op18.Where(q > op18.CastLike(ASYMPTOTIC_Q, q), far, total)
    pole = op18.And(q <= zero, op18.Equal(q, op18.Floor(q)))
    result = op18.Where(pole, op18.CastLike(INF, q), result)
    result = op18.Where(op18.Equal(s, one), op18.CastLike(INF, q), result)
    return op18.Where(s < one, op18.CastLike(NAN, q), result)


@script()
def polygamma(n: DOUBLE[...], x: DOUBLE[...]) -> DOUBLE[...]:
    """SciPy's polygamma: psi(x) for n = 0, (-1)^(n+1) gamma(n + 1) zeta(n + 1, x) otherwise
    (NaN for n < 0, where zeta(n + 1, x) is)."""
    one = op18.CastLike(1.0, x)
    odd = op18.Equal(op18.Mod(n, op18.CastLike(2.0, x), fmod=1), one)
    sign = op18.Where(odd, one, -one)
    derivative = sign * gamma(n + one) * hurwitz_zeta(n + one, x)
    return op18.Where(op18.Equal(n, op18.CastLike(0.0, x)), psi(x), derivative)


NEGATIVE_X = (
    "polygamma(n, x) of a negative non-integer x (n >= 1) is not translated: SciPy's sum runs "
    "a number of steps known only from x. Shift x above 0 by the recurrence "
    "polygamma(n, x) = polygamma(n, x + 1) - (-1)^n n! / x^(n + 1) in the graph"
)


@register_scalar(psm.PolyGamma)
def polygamma_op(g, node, n, x):
    """PolyGamma -> the scripted float64 algorithm, rounded once to the output dtype; raises
    for a negative non-integer x (n >= 1)."""
    result = inline_in_float64(g, node, polygamma, n, x)
    if node.inputs[1].type.dtype not in ("float16", "float32", "float64"):
        return result  # an integer x below 0 is a pole
    double = onnx_dtype("float64")
    n, x = g.Cast(n, to=double), g.Cast(x, to=double)
    zero = constant(g, 0, "float64")
    fraction = g.Not(g.Equal(x, g.Floor(x)))
    negative = g.And(g.And(g.Less(x, zero), g.Greater(n, zero)), fraction)
    return raise_if(g, negative, result, ValueError, NEGATIVE_X)
