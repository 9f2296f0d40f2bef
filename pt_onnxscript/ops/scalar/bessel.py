"""Bessel functions of the first kind: j0, j1 and jv of order 0, 1 or 2 (j1's gradient reads
jv(2, x)), and the modified i0, i1, their exponentially scaled forms, and iv/ive of order 0, 1
or 2 (the orders i0, i1 and their gradients use).

j0 and j1 are Cephes' (as in SciPy): rational functions up to |x| = 5, Hankel's asymptotic form
above, its cos and sin from fdlibm's kernels (ONNX Runtime's float64 Sin and Cos lose their
relative accuracy near their zeros).

i0, i0e, i1 and i1e are Cephes' (as in SciPy): Chebyshev series on [0, 8] and in 1/x above.
Order 2 is the power series below |x| = 2 and i0 - 2 i1 / x above, where that difference loses
under a bit; J_2 the power series below |x| = 4 and 2 j1 / x - j0 above (only absolutely
accurate at J_2's zeros, like j0 and j1 at theirs). Everything computes in float64 and rounds
once to the output dtype.
"""

import math

import numpy as np
import pytensor.scalar.math as psm
from onnxscript import DOUBLE
from onnxscript import opset18 as op18

from pt_onnxscript.errors import UnsupportedOpError
from pt_onnxscript.ops.common import inline_in_float64
from pt_onnxscript.ops.scalar.constants import NAN
from pt_onnxscript.ops.scalar.math import cos_float64, sin_float64
from pt_onnxscript.registry import register_function, register_scalar
from pt_onnxscript.scripted import script

# Chebyshev coefficients of exp(-x) I0(x) on [0, 8] and of exp(-x) sqrt(x) I0(x) on [8, inf)
# in 32/x (Cephes i0.c).
I0_A = np.array(
    [
        -4.41534164647933937950e-18,
        3.33079451882223809783e-17,
        -2.43127984654795469359e-16,
        1.71539128555513303061e-15,
        -1.16853328779934516808e-14,
        7.67618549860493561688e-14,
        -4.85644678311192946090e-13,
        2.95505266312963983461e-12,
        -1.72682629144155570723e-11,
        9.67580903537323691224e-11,
        -5.18979560163526290666e-10,
        2.65982372468238665035e-9,
        -1.30002500998624804212e-8,
        6.04699502254191894932e-8,
        -2.67079385394061173391e-7,
        1.11738753912010371815e-6,
        -4.41673835845875056359e-6,
        1.64484480707288970893e-5,
        -5.75419501008210370398e-5,
        1.88502885095841655729e-4,
        -5.76375574538582365885e-4,
        1.63947561694133579842e-3,
        -4.32430999505057594430e-3,
        1.05464603945949983183e-2,
        -2.37374148058994688156e-2,
        4.93052842396707084878e-2,
        -9.49010970480476444210e-2,
        1.71620901522208775349e-1,
        -3.04682672343198398683e-1,
        6.76795274409476084995e-1,
    ]
)
I0_B = np.array(
    [
        -7.23318048787475395456e-18,
        -4.83050448594418207126e-18,
        4.46562142029675999901e-17,
        3.46122286769746109310e-17,
        -2.82762398051658348494e-16,
        -3.42548561967721913462e-16,
        1.77256013305652638360e-15,
        3.81168066935262242075e-15,
        -9.55484669882830764870e-15,
        -4.15056934728722208663e-14,
        1.54008621752140982691e-14,
        3.85277838274214270114e-13,
        7.18012445138366623367e-13,
        -1.79417853150680611778e-12,
        -1.32158118404477131188e-11,
        -3.14991652796324136454e-11,
        1.18891471078464383424e-11,
        4.94060238822496958910e-10,
        3.39623202570838634515e-9,
        2.26666899049817806459e-8,
        2.04891858946906374183e-7,
        2.89137052083475648297e-6,
        6.88975834691682398426e-5,
        3.36911647825569408990e-3,
        8.04490411014108831608e-1,
    ]
)
# The same for exp(-x) I1(x) / x on [0, 8] and exp(-x) sqrt(x) I1(x) above (Cephes i1.c).
I1_A = np.array(
    [
        2.77791411276104639959e-18,
        -2.11142121435816608115e-17,
        1.55363195773620046921e-16,
        -1.10559694773538630805e-15,
        7.60068429473540693410e-15,
        -5.04218550472791168711e-14,
        3.22379336594557470981e-13,
        -1.98397439776494371520e-12,
        1.17361862988909016308e-11,
        -6.66348972350202774223e-11,
        3.62559028155211703701e-10,
        -1.88724975172282928790e-9,
        9.38153738649577178388e-9,
        -4.44505912879632808065e-8,
        2.00329475355213526229e-7,
        -8.56872026469545474066e-7,
        3.47025130813767847674e-6,
        -1.32731636560394358279e-5,
        4.78156510755005422638e-5,
        -1.61760815825896745588e-4,
        5.12285956168575772895e-4,
        -1.51357245063125314899e-3,
        4.15642294431288815669e-3,
        -1.05640848946261981558e-2,
        2.47264490306265168283e-2,
        -5.29459812080949914269e-2,
        1.02643658689847095384e-1,
        -1.76416518357834055153e-1,
        2.52587186443633654823e-1,
    ]
)
I1_B = np.array(
    [
        7.51729631084210481353e-18,
        4.41434832307170791151e-18,
        -4.65030536848935832153e-17,
        -3.20952592199342395980e-17,
        2.96262899764595013876e-16,
        3.30820231092092828324e-16,
        -1.88035477551078244854e-15,
        -3.81440307243700780478e-15,
        1.04202769841288027642e-14,
        4.27244001671195135429e-14,
        -2.10154184277266431302e-14,
        -4.08355111109219731823e-13,
        -7.19855177624590851209e-13,
        2.03562854414708950722e-12,
        1.41258074366137813316e-11,
        3.25260358301548823856e-11,
        -1.89749581235054123450e-11,
        -5.58974346219658380687e-10,
        -3.83538038596423702205e-9,
        -2.63146884688951950684e-8,
        -2.51223623787020892529e-7,
        -3.88256480887769039346e-6,
        -1.10588938762623716291e-4,
        -9.76109749136146840777e-3,
        7.78576235018280120474e-1,
    ]
)
# Cephes j0.c and j1.c (as SciPy runs them): a rational function in x^2 times the factors of
# the first two zeros up to x = 5, Hankel's asymptotic form with rational P, Q in 25/x^2 above.
J0_RP = np.array(
    [
        -4.79443220978201773821e9,
        1.95617491946556577543e12,
        -2.49248344360967716204e14,
        9.70862251047306323952e15,
    ]
)
J0_RQ = np.array(
    [
        4.99563147152651017219e2,
        1.73785401676374683123e5,
        4.84409658339962045305e7,
        1.11855537045356834862e10,
        2.11277520115489217587e12,
        3.10518229857422583814e14,
        3.18121955943204943306e16,
        1.71086294081043136091e18,
    ]
)
J0_PP = np.array(
    [
        7.96936729297347051624e-4,
        8.28352392107440799803e-2,
        1.23953371646414299388e0,
        5.44725003058768775090e0,
        8.74716500199817011941e0,
        5.30324038235394892183e0,
        9.99999999999999997821e-1,
    ]
)
J0_PQ = np.array(
    [
        9.24408810558863637013e-4,
        8.56288474354474431428e-2,
        1.25352743901058953537e0,
        5.47097740330417105182e0,
        8.76190883237069594232e0,
        5.30605288235394617618e0,
        1.00000000000000000218e0,
    ]
)
J0_QP = np.array(
    [
        -1.13663838898469149931e-2,
        -1.28252718670509318512e0,
        -1.95539544257735972385e1,
        -9.32060152123768231369e1,
        -1.77681167980488050595e2,
        -1.47077505154951170175e2,
        -5.14105326766599330220e1,
        -6.05014350600728481186e0,
    ]
)
J0_QQ = np.array(
    [
        6.43178256118178023184e1,
        8.56430025976980587198e2,
        3.88240183605401609683e3,
        7.24046774195652478189e3,
        5.93072701187316984827e3,
        2.06209331660327847417e3,
        2.42005740240291393179e2,
    ]
)
J0_ZEROS_SQUARED = np.array([5.78318596294678452118e0, 3.04712623436620863991e1])
J0_SMALL = np.array(1.0e-5)  # below it, j0 is 1 - x^2/4
J1_RP = np.array(
    [
        -8.99971225705559398224e8,
        4.52228297998194034323e11,
        -7.27494245221818276015e13,
        3.68295732863852883286e15,
    ]
)
J1_RQ = np.array(
    [
        6.20836478118054335476e2,
        2.56987256757748830383e5,
        8.35146791431949253037e7,
        2.21511595479792499675e10,
        4.74914122079991414898e12,
        7.84369607876235854894e14,
        8.95222336184627338078e16,
        5.32278620332680085395e18,
    ]
)
J1_PP = np.array(
    [
        7.62125616208173112003e-4,
        7.31397056940917570436e-2,
        1.12719608129684925192e0,
        5.11207951146807644818e0,
        8.42404590141772420927e0,
        5.21451598682361504063e0,
        1.00000000000000000254e0,
    ]
)
J1_PQ = np.array(
    [
        5.71323128072548699714e-4,
        6.88455908754495404082e-2,
        1.10514232634061696926e0,
        5.07386386128601488557e0,
        8.39985554327604159757e0,
        5.20982848682361821619e0,
        9.99999999999999997461e-1,
    ]
)
J1_QP = np.array(
    [
        5.10862594750176621635e-2,
        4.98213872951233449420e0,
        7.58238284132545283818e1,
        3.66779609360150777800e2,
        7.10856304998926107277e2,
        5.97489612400613639965e2,
        2.11688757100572135698e2,
        2.52070205858023719784e1,
    ]
)
J1_QQ = np.array(
    [
        7.42373277035675149943e1,
        1.05644886038262816351e3,
        4.98641058337653607651e3,
        9.56231892404756170795e3,
        7.99704160447350683650e3,
        2.82619278517639096600e3,
        3.36093607810698293419e2,
    ]
)
J1_ZEROS_SQUARED = np.array([1.46819706421238932572e1, 4.92184563216946036703e1])
PI_OVER_4 = np.array(0.78539816339744830962)
THREE_PI_OVER_4 = np.array(2.35619449019234492885)
SQRT_2_OVER_PI = np.array(0.79788456080286535588)
# I2(x) = (x/2)^2 sum_k (x^2/4)^k / (k! (k+2)!); 16 terms reach 1e-24 relative at |x| = 2.
I2_SERIES = np.array(
    [1.0 / (np.prod(np.arange(1.0, k + 1)) * np.prod(np.arange(1.0, k + 3))) for k in range(16)]
)


@script()
def _chbevl(y: DOUBLE[...], coefficients: DOUBLE[None]) -> DOUBLE[...]:
    """Clenshaw's sum of the Chebyshev series `coefficients` (highest order first) at y / 2."""
    zero = op18.CastLike(0.0, y)
    b0 = coefficients[0] + zero * y
    b1 = zero * y
    b2 = b1
    for i in range(op18.Size(coefficients) - 1):
        b2 = b1
        b1 = b0
        b0 = y * b1 - b2 + op18.Gather(coefficients, i + 1)
    return op18.CastLike(0.5, y) * (b0 - b2)


@script()
def _scaled_sum(x: DOUBLE[...], below: DOUBLE[None], above: DOUBLE[None]) -> DOUBLE[...]:
    """Cephes' two Chebyshev sums of |x|: on [0, 8] in |x|/2 - 2, above in 32/|x| - 2."""
    two = op18.CastLike(2.0, x)
    eight = op18.CastLike(8.0, x)
    z = op18.Abs(x)
    small = _chbevl(op18.Min(z, eight) / two - two, below)
    large = _chbevl(op18.CastLike(32.0, x) / op18.Max(z, eight) - two, above)
    return op18.Where(z <= eight, small, large)


@script()
def i0e(x: DOUBLE[...]) -> DOUBLE[...]:
    """exp(-|x|) I0(x)."""
    z = op18.Abs(x)
    s = _scaled_sum(x, op18.CastLike(I0_A, x), op18.CastLike(I0_B, x))
    return op18.Where(z <= op18.CastLike(8.0, x), s, s / op18.Sqrt(z))


@script()
def i0(x: DOUBLE[...]) -> DOUBLE[...]:
    """I0(x)."""
    z = op18.Abs(x)
    s = _scaled_sum(x, op18.CastLike(I0_A, x), op18.CastLike(I0_B, x))
    e = op18.Exp(z)
    return op18.Where(z <= op18.CastLike(8.0, x), e * s, e * s / op18.Sqrt(z))


@script()
def i1e(x: DOUBLE[...]) -> DOUBLE[...]:
    """exp(-|x|) I1(x)."""
    z = op18.Abs(x)
    s = _scaled_sum(x, op18.CastLike(I1_A, x), op18.CastLike(I1_B, x))
    magnitude = op18.Where(z <= op18.CastLike(8.0, x), s * z, s / op18.Sqrt(z))
    return op18.Where(x < op18.CastLike(0.0, x), -magnitude, magnitude)


@script()
def i1(x: DOUBLE[...]) -> DOUBLE[...]:
    """I1(x)."""
    z = op18.Abs(x)
    s = _scaled_sum(x, op18.CastLike(I1_A, x), op18.CastLike(I1_B, x))
    e = op18.Exp(z)
    magnitude = op18.Where(z <= op18.CastLike(8.0, x), s * z * e, e * s / op18.Sqrt(z))
    return op18.Where(x < op18.CastLike(0.0, x), -magnitude, magnitude)


@script()
def i2e(x: DOUBLE[...]) -> DOUBLE[...]:
    """exp(-|x|) I2(x); NaN at the infinities, as SciPy's ive(2, x)."""
    two = op18.CastLike(2.0, x)
    z = op18.Abs(x)
    c = op18.CastLike(I2_SERIES, x)
    q = x * x / op18.CastLike(4.0, x)
    high = ((((c[15] * q + c[14]) * q + c[13]) * q + c[12]) * q + c[11]) * q + c[10]
    middle = ((((high * q + c[9]) * q + c[8]) * q + c[7]) * q + c[6]) * q + c[5]
    total = ((((middle * q + c[4]) * q + c[3]) * q + c[2]) * q + c[1]) * q + c[0]
    series = q * total * op18.Exp(-z)
    recurrence = i0e(x) - two * i1e(x) / op18.Where(z < two, two, x)
    result = op18.Where(z < two, series, recurrence)
    return op18.Where(op18.IsInf(x), op18.CastLike(NAN, x), result)


@script()
def i2(x: DOUBLE[...]) -> DOUBLE[...]:
    """I2(x), finite while it is below the largest float64 (beyond where exp(|x|) is)."""
    half = op18.Exp(op18.Abs(x) / op18.CastLike(2.0, x))
    return i2e(x) * half * half


@script()
def _polevl(x: DOUBLE[...], c: DOUBLE[None]) -> DOUBLE[...]:
    """Cephes' polevl: c[0] x^n + ... + c[n] by Horner's rule, in its order."""
    result = c[0] + op18.CastLike(0.0, x) * x
    for i in range(op18.Size(c) - 1):
        result = result * x + op18.Gather(c, i + 1)
    return result


@script()
def _p1evl(x: DOUBLE[...], c: DOUBLE[None]) -> DOUBLE[...]:
    """Cephes' p1evl: x^(n+1) + c[0] x^n + ... + c[n] (a leading coefficient of 1)."""
    result = x + c[0]
    for i in range(op18.Size(c) - 1):
        result = result * x + op18.Gather(c, i + 1)
    return result


@script()
def _hankel(
    x: DOUBLE[...],
    pp: DOUBLE[None],
    pq: DOUBLE[None],
    qp: DOUBLE[None],
    qq: DOUBLE[None],
    phase: DOUBLE[...],
) -> DOUBLE[...]:
    """Cephes' J0/J1 above 5: (P cos(x - phase) - (5/x) Q sin(x - phase)) sqrt(2/(pi x)), P and
    Q rational in 25/x^2; SciPy's NaN at the infinities (cos(inf))."""
    w = op18.CastLike(5.0, x) / x
    z = w * w
    p = _polevl(z, pp) / _polevl(z, pq)
    q = _polevl(z, qp) / _p1evl(z, qq)
    xn = x - phase
    p = p * cos_float64(xn) - w * q * sin_float64(xn)
    return p * op18.CastLike(SQRT_2_OVER_PI, x) / op18.Sqrt(x)


@script()
def j0(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes j0 (SciPy's): 1 - x^2/4 below 1e-5, (x^2 - r1^2)(x^2 - r2^2) R(x^2) up to 5,
    Hankel's form above; even."""
    five = op18.CastLike(5.0, x)
    a = op18.Abs(x)
    z = a * a
    r = op18.CastLike(J0_ZEROS_SQUARED, x)
    near = (z - r[0]) * (z - r[1])
    near = near * _polevl(z, op18.CastLike(J0_RP, x)) / _p1evl(z, op18.CastLike(J0_RQ, x))
    near = op18.Where(
        a < op18.CastLike(J0_SMALL, x), op18.CastLike(1.0, x) - z / op18.CastLike(4.0, x), near
    )
    far = _hankel(
        op18.Max(a, five),
        op18.CastLike(J0_PP, x),
        op18.CastLike(J0_PQ, x),
        op18.CastLike(J0_QP, x),
        op18.CastLike(J0_QQ, x),
        op18.CastLike(PI_OVER_4, x),
    )
    return op18.Where(a > five, far, near)  # a -0.0 of `near` kept (Where's last input)


@script()
def j1(x: DOUBLE[...]) -> DOUBLE[...]:
    """Cephes j1 (SciPy's): x (x^2 - r1^2)(x^2 - r2^2) R(x^2) up to 5, Hankel's form above;
    odd."""
    five = op18.CastLike(5.0, x)
    a = op18.Abs(x)
    z = a * a
    r = op18.CastLike(J1_ZEROS_SQUARED, x)
    near = _polevl(z, op18.CastLike(J1_RP, x)) / _p1evl(z, op18.CastLike(J1_RQ, x))
    near = near * x * (z - r[0]) * (z - r[1])  # odd: -0.0 at -0.0
    far = _hankel(
        op18.Max(a, five),
        op18.CastLike(J1_PP, x),
        op18.CastLike(J1_PQ, x),
        op18.CastLike(J1_QP, x),
        op18.CastLike(J1_QQ, x),
        op18.CastLike(THREE_PI_OVER_4, x),
    )
    far = op18.Where(x < op18.CastLike(0.0, x), -far, far)
    # the signed zeros come from Where's last input, which keeps a -0.0
    return op18.Where(a > five, far, near)


# J_2(x) = sum_k (-1)^k (x^2 / 4)^(k + 1) / (k! (k + 2)!), highest order first: to 1e-20 below
# |x| = 4, where 2 J_1(x) / x - J_0(x) would lose up to log10(16 / x^2) digits.
J2_SERIES = np.array(
    [(-1.0) ** k / (math.factorial(k) * math.factorial(k + 2)) for k in range(18)]
)[::-1].copy()


@script()
def j2(x: DOUBLE[...]) -> DOUBLE[...]:
    """J_2, even: its power series below |x| = 4, 2 j1(x) / x - j0(x) above (Cephes jn's
    formula for order 2, from j0 and j1 above)."""
    four = op18.CastLike(4.0, x)
    a = op18.Abs(x)
    q = a * a / four
    near = q * _polevl(q, op18.CastLike(J2_SERIES, x))
    far_x = op18.Max(a, four)
    far = op18.CastLike(2.0, x) * j1(far_x) / far_x - j0(far_x)
    return op18.Where(a < four, near, far)


_UNARY = {psm.I0: i0, psm.I1: i1, psm.J0: j0, psm.J1: j1}
_ORDERS = {psm.Ive: (i0e, i1e, i2e), psm.Jv: (j0, j1, j2)}
if hasattr(psm, "Iv"):  # PyTensor 2.38 (3.0 writes iv(v, x) as ive(v, x) * exp(|x|))
    _ORDERS[psm.Iv] = (i0, i1, i2)


_SCIPY = {"scipy.special.i0e": i0e, "scipy.special.i1e": i1e}


@register_scalar(*_UNARY)
def bessel(g, node, x):
    """I0, I1, J0, J1 -> Cephes' algorithms in float64, rounded once to the output dtype."""
    return inline_in_float64(g, node, _UNARY[type(node.op)], x)


@register_function(*_SCIPY)
def scaled_bessel(g, node, x):
    """Scalar ops computing scipy.special.i0e or i1e (PyMC's, for the Rice distribution)."""
    return inline_in_float64(g, node, _SCIPY[node.op.nfunc_spec[0]], x)


def _order(node, v) -> int:
    order = v.const_value
    values = None if order is None else np.unique(order.numpy())
    if values is None or values.size != 1 or values[0] not in (0, 1, 2):
        raise UnsupportedOpError(
            f"{type(node.op).__name__}(v, x) is translated for a constant order v of 0, 1 or 2 "
            f"only (what i0, i1, j0, j1 and their gradients use); here v is "
            f"{'not a constant' if values is None else values}. Use pt.i0/pt.i1/pt.j0/pt.j1 "
            "for orders 0 and 1."
        )
    return int(values[0])


@register_scalar(*_ORDERS)
def bessel_of_order(g, node, v, x):
    """Iv, Ive, Jv of constant order 0, 1 or 2 -> i0/i1/i2, their scaled forms, j0/j1/j2."""
    function = _ORDERS[type(node.op)][_order(node, v)]
    return inline_in_float64(g, node, function, x, variables=node.inputs[1:])
