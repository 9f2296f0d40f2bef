"""RandomVariable: draws from the counter-based Philox4x32-10 generator, in integer ONNX ops.

A random generator is a ``uint64[2]`` state ``[key, counter]`` (pt_onnxscript.rng). A draw of
N elements gives element e the Philox counter ``(counter + e, block, lane)`` (the 64-bit
element counter in the first two words): each block is four 32-bit words, two float64
uniforms, so an element has as many independent uniforms as its sampler needs, a rejection
sampler one block per attempt, and the next state is ``[key, counter + N]``.

Each sampler is the textbook transformation of those uniforms, computed in float64 (as
NumPy's C code does) and rounded once to PyTensor's dtype; parameters outside a
distribution's domain raise the error NumPy or SciPy raise. Rejection samplers (the gamma
family, Poisson and binomial draws of means from 10 on, von Mises, integers) run a while Loop
on the elements still pending until each has accepted.
"""

import copy
import math

import numpy as np
import onnx_ir as ir
from numpy.linalg import LinAlgError
from onnxscript import UINT64
from onnxscript import opset18 as op
from pytensor.tensor.random import basic as ptr
from pytensor.tensor.type_other import NoneTypeT

from pt_onnxscript.ops.common import (
    binary_search,
    broadcast_shape,
    constant,
    ints,
    loop,
    raise_if,
    where,
)
from pt_onnxscript.ops.decompositions import jacobi_svd, symmetric_eigen
from pt_onnxscript.ops.linalg import lower_factor, symmetric
from pt_onnxscript.ops.scalar.math import arctan2, log1p
from pt_onnxscript.ops.scalar.special import gammaln
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.scripted import inline, script
from pt_onnxscript.types import onnx_dtype

# ---------------------------------------------------------------- Philox4x32-10

# Random123's constants: the two multipliers and the two key increments (Weyl sequence).
_MULTIPLIERS = np.array([[0xD2511F53], [0xCD9E8D57]], dtype=np.uint64)
_KEY_STEP = np.array([[0x9E3779B9], [0xBB67AE85]], dtype=np.uint64)
_LOW32 = np.array(0xFFFFFFFF, dtype=np.uint64)
_SHIFT32 = np.array(32, dtype=np.uint64)
_SWAP = np.array([1, 0], dtype=np.int64)


@script()
def _philox_round(a: UINT64[...], b: UINT64[...], k: UINT64[...]):
    """One Philox round on counters (a[0], b[0], a[1], b[1]) with round key (k[0], k[1]): the
    products M0 a[0] and M1 a[1] (32 x 32 -> 64 bits, exact in uint64), swapped; high halves
    xor the other words and the key, low halves become the other words."""
    p = op.Gather(op.Mul(a, _MULTIPLIERS), _SWAP, axis=0)
    high = op.BitShift(p, _SHIFT32, direction="RIGHT")
    return op.BitwiseXor(op.BitwiseXor(high, b), k), op.BitwiseAnd(p, _LOW32)


@script()
def _bump(k: UINT64[...]) -> UINT64[...]:
    return op.BitwiseAnd(op.Add(k, _KEY_STEP), _LOW32)


@script()
def philox4x32(a: UINT64[...], b: UINT64[...], k: UINT64[...]):
    """Philox4x32-10 (Salmon et al. 2011) of the counters (a[0], b[0], a[1], b[1]) under key
    (k[0], k[1]), every word a 32-bit value in a uint64: ten rounds, the key bumped between
    them. Returns the four output words in the same layout."""
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    k = _bump(k)
    a, b = _philox_round(a, b, k)
    return a, b


U64 = ir.DataType.UINT64
F64 = ir.DataType.DOUBLE
BOOL = ir.DataType.BOOL


def _u64(g, value):
    return constant(g, value, "uint64")


def _f64(g, value):
    return constant(g, value, "float64")


def _all(g, mask):
    """Whether every element of bool `mask` is true (0-d)."""
    flags = g.Cast(mask, to=ir.DataType.UINT8)
    return g.Cast(g.ReduceMin(g.Reshape(flags, ints(g, [-1])), keepdims=0), to=BOOL)


class Stream:
    """The Philox blocks of a draw of `shape` (an int64 vector) from random state `state`
    (``[key, counter]``): element e of the draw reads the blocks of counter ``counter + e``;
    ``next_state`` is ``[key, counter + N]``.

    Block 0 of the first `lanes` lanes (what a sampler reads outside its Loops) is computed
    by one Philox over all of them at first use: ONNX Runtime's cost is per node."""

    def __init__(self, g, state, shape, lanes: int = 1):
        self.shape, self.lanes, self._first = shape, lanes, None
        count = g.ReduceProd(shape, keepdims=0)  # 1 for a 0-d draw (an empty shape)
        key = g.Slice(state, ints(g, [0]), ints(g, [1]))
        base = g.Slice(state, ints(g, [1]), ints(g, [2]))
        low32, shift = _u64(g, 0xFFFFFFFF), _u64(g, 32)
        key_words = g.Concat(
            g.BitwiseAnd(key, low32), g.BitShift(key, shift, direction="RIGHT"), axis=0
        )
        self.key = g.Unsqueeze(key_words, ints(g, [1]))
        element = g.Add(base, g.Cast(g.Range(ints(g, 0), count, ints(g, 1)), to=U64))
        self.low = g.Unsqueeze(g.BitwiseAnd(element, low32), ints(g, [0]))
        self.high = g.Unsqueeze(g.BitShift(element, shift, direction="RIGHT"), ints(g, [0]))
        self.zeros = g.Mul(self.low, _u64(g, 0))
        advanced = g.Add(base, g.Cast(g.Unsqueeze(count, ints(g, [0])), to=U64))
        self.next_state = g.Concat(key, advanced, axis=0)

    def words(self, g, block, lanes: list[int]):
        """Philox's four words for the counters (element, block, lane) of each of `lanes`, as
        ``(a, b)`` with ``a = [w0, w2]`` and ``b = [w1, w3]``, each [2, lanes x N] (lane by
        lane); `block` an int or a 0-d uint64."""
        block = _u64(g, block) if isinstance(block, int) else block
        low, high, zeros = self.low, self.high, self.zeros
        if len(lanes) > 1:
            repeats = ints(g, [1, len(lanes)])
            low, high = g.Tile(low, repeats), g.Tile(high, repeats)
            lane = g.Add(self.zeros, _u64(g, np.array(lanes, dtype=np.uint64)[:, None]))
            lane, zeros = g.Reshape(lane, ints(g, [1, -1])), g.Tile(zeros, repeats)
        else:  # an int, or a 0-d uint64 (a lane chosen in a Loop)
            lane = g.Add(zeros, _u64(g, lanes[0]) if isinstance(lanes[0], int) else lanes[0])
        a = g.Concat(low, g.Add(zeros, block), axis=0)
        b = g.Concat(high, lane, axis=0)
        return inline(g, philox4x32, a, b, self.key)

    def _shaped(self, g, values, lanes: int):
        """[2, lanes x N] -> per lane, its two rows in the draw's shape."""
        shape = g.Concat(ints(g, [2, lanes]), self.shape, axis=0)
        values = g.Reshape(values, shape, allowzero=1)  # a 0 in the shape is a size
        pairs = []
        for i in range(lanes):
            rows = g.Gather(values, ints(g, i), axis=1)
            pairs.append((g.Gather(rows, ints(g, 0), axis=0), g.Gather(rows, ints(g, 1), axis=0)))
        return pairs

    def uniforms_of(self, g, block, lanes: list[int]):
        """For each of `lanes`, two independent float64 uniforms per element in the draw's
        shape: (k + 1/2) 2^-52 for 52 random bits k, in (0, 1), and so is 1 - u (logarithms
        of either are finite). One Philox for them all."""
        a, b = self.words(g, block, lanes)
        high = g.BitShift(g.BitwiseAnd(a, _u64(g, 0xFFFFF)), _u64(g, 32), direction="LEFT")
        bits = g.Cast(g.BitwiseOr(high, b), to=F64)
        return self._shaped(g, g.Mul(g.Add(bits, _f64(g, 0.5)), _f64(g, 2.0**-52)), len(lanes))

    def uniforms(self, g, block, lane: int = 0):
        """The two uniforms per element of (block, lane)."""
        if isinstance(block, int) and block == 0 and isinstance(lane, int) and lane < self.lanes:
            if self._first is None:
                self._first = self.uniforms_of(g, 0, list(range(self.lanes)))
            return self._first[lane]
        return self.uniforms_of(g, block, [lane])[0]

    def uniform(self, g, block, lane: int = 0):
        return self.uniforms(g, block, lane)[0]

    def normal(self, g, block, lane: int = 0):
        return box_muller(g, *self.uniforms(g, block, lane))

    def subset(self, g, index):
        """The same blocks for the elements at flat positions `index` only (a 1-d int64), as
        a flat draw of len(index) elements: what a rejection Loop redraws."""
        view = copy.copy(self)
        view.shape, view.lanes, view._first = g.Shape(index), 0, None
        view.low, view.high, view.zeros = (
            g.Gather(x, index, axis=1) for x in (self.low, self.high, self.zeros)
        )
        return view

    def words64(self, g, block, lane: int = 0):
        """A 64-bit random word per element (uint64, of the draw's shape)."""
        a, b = self.words(g, block, [lane])
        word = g.BitwiseOr(g.BitShift(a, _u64(g, 32), direction="LEFT"), b)
        return self._shaped(g, word, 1)[0][0]


def box_muller(g, u1, u2):
    """A standard normal from two uniforms in (0, 1): sqrt(-2 log u1) cos(2 pi u2)."""
    radius = g.Sqrt(g.Mul(_f64(g, -2.0), g.Log(u1)))
    return g.Mul(radius, g.Cos(g.Mul(_f64(g, 2 * np.pi), u2)))


def rejection(g, s, attempt, params, kind: str, done=None, dtype: str = "float64"):
    """Per element of stream `s`'s draw, the first accepted candidate of
    ``attempt(g, r, stream, *params) -> (candidates, accepted)`` (r: the attempt's number, an
    int or a 0-d uint64, for the blocks it draws). Attempt 0 draws every element; a while
    Loop then redraws only the elements still pending (NonZero, Gather, ScatterND), with
    `params` gathered to them. Elements where `done` holds keep attempt 0's candidate."""
    value, accepted = attempt(g, 0, s, *params)
    done = accepted if done is None else g.Or(accepted, done)
    shape, flat = s.shape, ints(g, [-1])
    flat_params = [g.Reshape(g.Expand(x, shape), flat) for x in params]

    def step(g, k, value, done):
        index = g.Reshape(g.NonZero(g.Not(done)), flat)
        positions = g.Unsqueeze(index, ints(g, [-1]))
        taken = [g.Gather(x, index, axis=0) for x in flat_params]
        r = g.Cast(g.Add(k, ints(g, 1)), to=U64)
        candidate, accepted = attempt(g, r, s.subset(g, index), *taken)
        kept = g.Gather(value, index, axis=0)
        value = g.ScatterND(value, positions, where(g, accepted, candidate, kept, dtype))
        done = g.ScatterND(done, positions, accepted)
        return g.Not(_all(g, done)), value, done

    state = [g.Reshape(g.Expand(value, shape), flat), g.Reshape(g.Expand(done, shape), flat)]
    value, _ = loop(g, None, state, step, kind, condition=g.Not(_all(g, state[1])))
    return g.Reshape(value, shape, allowzero=1)


# ---------------------------------------------------------------- the translations


def _float(g, var, x):
    """Parameter `x` (of PyTensor variable `var`) in float64, where the samplers compute."""
    return x if var.type.dtype == "float64" else g.Cast(x, to=F64)


def _int64(g, var, x):
    """Integer input `x` (of PyTensor variable `var`: a size, a bound) in int64."""
    return x if var.type.dtype == "int64" else g.Cast(x, to=ir.DataType.INT64)


def _is_none(var) -> bool:
    return isinstance(var.type, NoneTypeT)


def _batch_shape(g, values):
    """The broadcast shape of `values` (the same rank, as PyTensor's RandomVariable makes them)."""
    shape = g.Shape(values[0])
    for value in values[1:]:
        shape = g.Shape(g.Expand(value, shape))
    return shape


def draw_shape(g, node, size, params):
    """The shape of the draw (an int64 vector): static where PyTensor knows it, else `size`, else
    the parameters' broadcast shape."""
    static = node.outputs[1].type.shape
    if None not in static:
        return ints(g, np.array(static, dtype=np.int64))
    if not _is_none(node.inputs[1]):
        return _int64(g, node.inputs[1], size)
    return _batch_shape(g, params)


def _result(g, node, values, checks):
    """`values` (float64) in the draw's dtype, raising NumPy's or SciPy's error where a check
    ``(failed, exception, message)`` holds."""
    dtype = node.outputs[1].type.dtype
    result = values if dtype == "float64" else g.Cast(values, to=onnx_dtype(dtype))
    for failed, exc_type, message in checks:
        result = raise_if(g, failed, result, exc_type, message)
    return result


def _scipy_domain(name: str) -> str:
    return (
        "Domain error in arguments. The `scale` parameter must be positive for all "
        "distributions, and many distributions have restrictions on shape parameters. "
        f"Please see the `scipy.stats.{name}` documentation for details."
    )


def _scipy_scale_check(g, scale, name: str, *more_bad):
    """SciPy's domain error of `name` where the scale is not >= 0 (NaN included) or one of
    the flags `more_bad` holds, as a check of `_result`."""
    bad = g.Not(g.GreaterOrEqual(scale, _f64(g, 0.0)))
    for flags in more_bad:
        bad = g.Or(bad, flags)
    return [(bad, ValueError, _scipy_domain(name))]


def univariate(*rv_classes, lanes: int = 1):
    """Register ``sample(g, stream, *params) -> (values, checks)`` for random variables with
    scalar parameters and draws: params in float64, one element per draw, block 0 of `lanes`
    lanes drawn at once."""

    def decorate(sample):
        @register(*rv_classes)
        def translation(g, node, rng, size, *params):
            variables = node.inputs[2:]
            params = [_float(g, var, x) for var, x in zip(variables, params, strict=True)]
            stream = Stream(g, rng, draw_shape(g, node, size, params), lanes)
            # NumPy words some errors differently for scalars (no size, 0-d parameters).
            stream.scalar_call = _is_none(node.inputs[1]) and all(v.ndim == 0 for v in variables)
            values, checks = sample(g, stream, *params)
            return stream.next_state, _result(g, node, values, checks)

        translation.__doc__ = sample.__doc__
        return sample

    return decorate


def _negative(g, x):
    return g.Less(x, _f64(g, 0.0))


@univariate(ptr.UniformRV)
def uniform(g, s, low, high):
    """low + (high - low) u; NumPy's errors for a range that is not finite, or negative (it
    drew from the reversed range)."""
    width = g.Sub(high, low)
    bad = g.Or(g.IsNaN(width), g.IsInf(width))
    return g.Add(low, g.Mul(width, s.uniform(g, 0))), [
        (bad, OverflowError, "high - low range exceeds valid bounds"),
        (g.And(_negative(g, width), g.Not(bad)), ValueError, "high - low < 0"),
    ]


@univariate(ptr.NormalRV)
def normal(g, s, loc, scale):
    """loc + scale z, z by Box-Muller."""
    return g.Add(loc, g.Mul(scale, s.normal(g, 0))), [
        (_negative(g, scale), ValueError, "scale < 0")
    ]


@univariate(ptr.HalfNormalRV)
def halfnormal(g, s, loc, scale):
    """loc + scale |z|."""
    checks = _scipy_scale_check(g, scale, "halfnorm")
    return g.Add(loc, g.Mul(scale, g.Abs(s.normal(g, 0)))), checks


@univariate(ptr.LogNormalRV)
def lognormal(g, s, mean, sigma):
    """exp(mean + sigma z)."""
    return g.Exp(g.Add(mean, g.Mul(sigma, s.normal(g, 0)))), [
        (_negative(g, sigma), ValueError, "sigma < 0")
    ]


@univariate(ptr.ExponentialRV)
def exponential(g, s, scale):
    """-scale log(u)."""
    return g.Mul(g.Neg(scale), g.Log(s.uniform(g, 0))), [
        (_negative(g, scale), ValueError, "scale < 0")
    ]


@univariate(ptr.WeibullRV)
def weibull(g, s, a):
    """(-log u)^(1/a), and 0 where a = 0 (NumPy's)."""
    zero = _f64(g, 0.0)
    draws = g.Pow(g.Neg(g.Log(s.uniform(g, 0))), g.Reciprocal(a))
    return g.Where(g.Equal(a, zero), zero, draws), [(_negative(g, a), ValueError, "a < 0")]


@univariate(ptr.LogisticRV)
def logistic(g, s, loc, scale):
    """loc + scale log(u / (1 - u))."""
    u = s.uniform(g, 0)
    logit = g.Log(g.Div(u, g.Sub(_f64(g, 1.0), u)))
    return g.Add(loc, g.Mul(scale, logit)), [(_negative(g, scale), ValueError, "scale < 0")]


@univariate(ptr.GumbelRV)
def gumbel(g, s, loc, scale):
    """loc - scale log(-log u)."""
    draws = g.Sub(loc, g.Mul(scale, g.Log(g.Neg(g.Log(s.uniform(g, 0))))))
    return draws, _scipy_scale_check(g, scale, "gumbel_r")


@univariate(ptr.LaplaceRV)
def laplace(g, s, loc, scale):
    """loc + scale log(2u) for u < 1/2, loc - scale log(2 - 2u) above."""
    u = s.uniform(g, 0)
    two = _f64(g, 2.0)
    lower = g.Log(g.Mul(two, u))
    upper = g.Neg(g.Log(g.Sub(two, g.Mul(two, u))))
    step = g.Where(g.Less(u, _f64(g, 0.5)), lower, upper)
    return g.Add(loc, g.Mul(scale, step)), [(_negative(g, scale), ValueError, "scale < 0")]


def _tan_half_pi(g, u):
    """tan(pi u / 2) for u in (0, 1), as sin / cos (ONNX Runtime has no float64 Tan)."""
    angle = g.Mul(_f64(g, np.pi / 2), u)
    return g.Div(g.Sin(angle), g.Cos(angle))


@univariate(ptr.CauchyRV)
def cauchy(g, s, loc, scale):
    """loc + scale tan(pi (u - 1/2)), as -cot(pi u) = -cos(pi u) / sin(pi u)."""
    angle = g.Mul(_f64(g, np.pi), s.uniform(g, 0))
    step = g.Neg(g.Div(g.Cos(angle), g.Sin(angle)))
    return g.Add(loc, g.Mul(scale, step)), _scipy_scale_check(g, scale, "cauchy")


@univariate(ptr.HalfCauchyRV)
def halfcauchy(g, s, loc, scale):
    """loc + scale tan(pi u / 2)."""
    checks = _scipy_scale_check(g, scale, "halfcauchy")
    return g.Add(loc, g.Mul(scale, _tan_half_pi(g, s.uniform(g, 0)))), checks


@univariate(ptr.ParetoRV)
def pareto(g, s, b, scale):
    """scale u^(-1/b) (SciPy's pareto)."""
    draws = g.Mul(scale, g.Pow(s.uniform(g, 0), g.Neg(g.Reciprocal(b))))
    return draws, _scipy_scale_check(g, scale, "pareto", g.Not(g.Greater(b, _f64(g, 0.0))))


@univariate(ptr.TriangularRV)
def triangular(g, s, left, mode, right):
    """NumPy's inverse CDF: left + sqrt(u (right - left)(mode - left)) below the mode's
    probability, right - sqrt((1 - u)(right - left)(right - mode)) above."""
    u = s.uniform(g, 0)
    width = g.Sub(right, left)
    left_width, right_width = g.Sub(mode, left), g.Sub(right, mode)
    below = g.Add(left, g.Sqrt(g.Mul(u, g.Mul(width, left_width))))
    above = g.Sub(right, g.Sqrt(g.Mul(g.Sub(_f64(g, 1.0), u), g.Mul(width, right_width))))
    draws = g.Where(g.LessOrEqual(u, g.Div(left_width, width)), below, above)
    return draws, [
        (g.Greater(left, mode), ValueError, "left > mode"),
        (g.Greater(mode, right), ValueError, "mode > right"),
        (g.Equal(left, right), ValueError, "left == right"),
    ]


@univariate(ptr.TruncExponentialRV)
def truncexpon(g, s, b, loc, scale):
    """loc - scale log1p(u expm1(-b)) (SciPy's truncexpon)."""
    mass = g.Sub(_f64(g, 1.0), g.Exp(g.Neg(b)))  # 1 - exp(-b) > 0.6 b: no cancellation that matters
    step = g.Neg(g.Log(g.Sub(_f64(g, 1.0), g.Mul(s.uniform(g, 0), mass))))
    checks = _scipy_scale_check(g, scale, "truncexpon", g.Not(g.Greater(b, _f64(g, 0.0))))
    return g.Add(loc, g.Mul(scale, step)), checks


@univariate(ptr.WaldRV, lanes=2)
def wald(g, s, mean, scale):
    """NumPy's (Michael, Schucany and Haas) as of NumPy 2.4 (numpy#29609): y = mean z^2,
    x = mean (1 - 2 / d) with d = 1 + sqrt(1 + 4 scale / y), kept where u <= mean / (mean + x),
    else mean^2 / x. The form before, mean + mean / (2 scale) (y - sqrt(4 scale y + y^2)),
    cancels to below 0 where scale is small against mean (a fifth of the draws at mean 1e6,
    scale 1e-3)."""
    z = s.normal(g, 0)
    y = g.Mul(g.Mul(mean, z), z)
    one = _f64(g, 1.0)
    d = g.Add(one, g.Sqrt(g.Add(one, g.Div(g.Mul(_f64(g, 4.0), scale), y))))
    x = g.Mul(mean, g.Sub(one, g.Div(_f64(g, 2.0), d)))
    keep = g.LessOrEqual(s.uniform(g, 0, lane=1), g.Div(mean, g.Add(mean, x)))
    draws = g.Where(keep, x, g.Div(g.Mul(mean, mean), x))
    zero = _f64(g, 0.0)
    return draws, [
        (g.LessOrEqual(mean, zero), ValueError, "mean <= 0"),
        (g.LessOrEqual(scale, zero), ValueError, "scale <= 0"),
    ]


@univariate(ptr.BernoulliRV)
def bernoulli(g, s, p):
    """1 where u < p."""
    bad = g.Not(g.And(g.GreaterOrEqual(p, _f64(g, 0.0)), g.LessOrEqual(p, _f64(g, 1.0))))
    draws = g.Cast(g.Less(s.uniform(g, 0), p), to=F64)
    return draws, [(bad, ValueError, _scipy_domain("bernoulli"))]


@univariate(ptr.GeometricRV)
def geometric(g, s, p):
    """The trials to the first success: max(1, ceil(log u / log1p(-p)))."""
    one = _f64(g, 1.0)
    trials = g.Ceil(g.Div(g.Log(s.uniform(g, 0)), inline(g, log1p, g.Neg(p))))
    bad = g.Not(g.And(g.Greater(p, _f64(g, 0.0)), g.LessOrEqual(p, one)))
    return g.Max(trials, one), [(bad, ValueError, "p <= 0, p > 1 or p contains NaNs")]


# ---------------------------------------------------------------- gamma and its family


def _finite(g, x):
    return g.Not(g.Or(g.IsNaN(x), g.IsInf(x)))


def log_standard_gamma(g, s, alpha, lane: int):
    """log of a standard gamma draw of shape `alpha` per element, by Marsaglia and Tsang's
    rejection (2000): d = a - 1/3, v = (1 + x / sqrt(9 d))^3 for a normal x, accepted where
    log u < x^2/2 + d - d v + d log v; a = alpha + 1 boosted by u^(1/alpha) below 1. In logs,
    so tiny shapes (beta, Dirichlet) keep their draws. Reads lanes lane .. lane + 2."""
    one = _f64(g, 1.0)
    small = g.Less(alpha, one)
    a = g.Where(small, g.Add(alpha, one), alpha)
    d = g.Sub(a, _f64(g, 1.0 / 3.0))
    c = g.Reciprocal(g.Sqrt(g.Mul(_f64(g, 9.0), d)))
    finite = _finite(g, alpha)

    def attempt(g, r, s, c, d):
        if isinstance(r, int):
            (u1, u2), (u, _) = s.uniforms(g, r, lane), s.uniforms(g, r, lane + 1)
        else:
            (u1, u2), (u, _) = s.uniforms_of(g, r, [lane, lane + 1])
        x = box_muller(g, u1, u2)
        t = g.Add(one, g.Mul(c, x))
        v = g.Mul(g.Mul(t, t), t)
        log_v = g.Log(v)
        bound = g.Add(
            g.Mul(_f64(g, 0.5), g.Mul(x, x)), g.Add(g.Sub(d, g.Mul(d, v)), g.Mul(d, log_v))
        )
        accepted = g.And(g.Greater(v, _f64(g, 0.0)), g.Less(g.Log(u), bound))
        return g.Add(g.Log(d), log_v), accepted

    # A NaN or infinite shape never accepts: it is its own answer (NaN, inf), at once.
    value = rejection(g, s, attempt, [c, d], "gamma", done=g.Not(finite))
    boost = g.Div(g.Log(s.uniform(g, 0, lane + 2)), alpha)
    value = g.Where(small, g.Add(value, boost), value)
    return g.Where(finite, value, g.Log(alpha))


@univariate(ptr.GammaRV, lanes=3)
def gamma(g, s, shape, scale):
    """scale G, G a standard gamma draw (Marsaglia-Tsang)."""
    draws = g.Mul(scale, g.Exp(log_standard_gamma(g, s, shape, lane=0)))
    return draws, [
        (_negative(g, shape), ValueError, "shape < 0"),
        (_negative(g, scale), ValueError, "scale < 0"),
    ]


@univariate(ptr.InvGammaRV, lanes=3)
def invgamma(g, s, shape, scale):
    """scale / G (PyTensor's 1 / gamma(shape, 1 / scale))."""
    draws = g.Mul(scale, g.Exp(g.Neg(log_standard_gamma(g, s, shape, lane=0))))
    return draws, [
        (_negative(g, shape), ValueError, "shape < 0"),
        (_negative(g, scale), ValueError, "scale < 0"),
    ]


def beta_draws(g, s, a, b):
    """X / (X + Y) for standard gamma draws X, Y of shapes a, b, as sigmoid(log X - log Y) (in
    logs, tiny shapes keep their draws). Reads lanes 0 .. 5."""
    log_ratio = g.Sub(log_standard_gamma(g, s, b, lane=3), log_standard_gamma(g, s, a, lane=0))
    return g.Reciprocal(g.Add(_f64(g, 1.0), g.Exp(log_ratio)))


@univariate(ptr.BetaRV, lanes=6)
def beta(g, s, a, b):
    """X / (X + Y) for standard gamma draws X, Y of shapes a, b: sigmoid(log X - log Y)."""
    zero = _f64(g, 0.0)
    return beta_draws(g, s, a, b), [
        (g.LessOrEqual(a, zero), ValueError, "a <= 0"),
        (g.LessOrEqual(b, zero), ValueError, "b <= 0"),
    ]


@univariate(ptr.StudentTRV, lanes=4)
def studentt(g, s, df, loc, scale):
    """loc + scale z / sqrt(2 G / df), G a standard gamma draw of shape df / 2."""
    half = _f64(g, 0.5)
    log_chi2_per_df = g.Add(
        log_standard_gamma(g, s, g.Mul(half, df), lane=0), g.Log(g.Div(_f64(g, 2.0), df))
    )
    t = g.Mul(s.normal(g, 0, lane=3), g.Exp(g.Mul(g.Neg(half), log_chi2_per_df)))
    checks = _scipy_scale_check(g, scale, "t", g.Not(g.Greater(df, _f64(g, 0.0))))
    return g.Add(loc, g.Mul(scale, t)), checks


# ---------------------------------------------------------------- Poisson

# NumPy's largest Poisson mean (int64's maximum less ten of its square roots).
POISSON_LAM_MAX = float(np.iinfo(np.int64).max - np.sqrt(np.iinfo(np.int64).max) * 10)


# Inversion below a mean of 10 sums the probabilities of 0 .. 51: what lies beyond (< 1e-18)
# is below float64's resolution of the uniform.
_SMALL_COUNTS = np.arange(52, dtype=np.float64)
_LOG_FACTORIALS = np.array([math.lgamma(k + 1.0) for k in _SMALL_COUNTS])


def poisson_draws(g, s, lam, lane: int):
    """Poisson draws (float64) of mean `lam` >= 0: below 10, by inversion (the number of
    cumulative probabilities F(0), ..., F(51) below a uniform: no Loop); from 10 on, by
    Hormann's transformed rejection with squeeze (PTRS, 1993), NumPy's sampler, in a while
    Loop of attempts that only elements with large means enter. Reads lanes lane, lane + 1."""
    ten, zero, one, half = _f64(g, 10.0), _f64(g, 0.0), _f64(g, 1.0), _f64(g, 0.5)
    large = g.GreaterOrEqual(lam, ten)

    # inversion
    small = g.Unsqueeze(g.Where(large, zero, lam), ints(g, [-1]))
    log_lam = g.Log(g.Max(small, _f64(g, np.finfo(np.float64).tiny)))  # 0 log 0 = 0 at k = 0
    log_pmf = g.Sub(g.Sub(g.Mul(_f64(g, _SMALL_COUNTS), log_lam), small), _f64(g, _LOG_FACTORIALS))
    cdf = g.CumSum(g.Exp(log_pmf), ints(g, -1))
    below = g.Less(cdf, g.Unsqueeze(s.uniform(g, 0, lane), ints(g, [-1])))
    inverted = g.ReduceSum(g.Cast(below, to=F64), ints(g, [-1]), keepdims=0)

    # PTRS
    big = g.Where(large, lam, ten)  # its constants, harmless where unused
    slam, loglam = g.Sqrt(big), g.Log(big)
    b = g.Add(_f64(g, 0.931), g.Mul(_f64(g, 2.53), slam))
    a = g.Add(_f64(g, -0.059), g.Mul(_f64(g, 0.02483), b))
    invalpha = g.Add(_f64(g, 1.1239), g.Div(_f64(g, 1.1328), g.Sub(b, _f64(g, 3.4))))
    vr = g.Sub(_f64(g, 0.9277), g.Div(_f64(g, 3.6224), g.Sub(b, _f64(g, 2.0))))

    def attempt(g, r, s, a, b, big, loglam, invalpha, vr):
        u, v = s.uniforms(g, r, lane + 1)
        centred = g.Sub(u, half)
        us = g.Sub(half, g.Abs(centred))
        k = g.Floor(
            g.Add(
                g.Mul(g.Add(g.Div(g.Mul(_f64(g, 2.0), a), us), b), centred),
                g.Add(big, _f64(g, 0.43)),
            )
        )
        quick = g.And(g.GreaterOrEqual(us, _f64(g, 0.07)), g.LessOrEqual(v, vr))
        reject = g.Or(g.Less(k, zero), g.And(g.Less(us, _f64(g, 0.013)), g.Greater(v, us)))
        log_ratio = g.Sub(
            g.Add(g.Log(v), g.Log(invalpha)), g.Log(g.Add(g.Div(a, g.Mul(us, us)), b))
        )
        k_safe = g.Max(k, zero)
        log_target = g.Sub(
            g.Add(g.Neg(big), g.Mul(k_safe, loglam)), inline(g, gammaln, g.Add(k_safe, one))
        )
        accepted = g.Or(quick, g.And(g.Not(reject), g.LessOrEqual(log_ratio, log_target)))
        return k, accepted

    params = [a, b, big, loglam, invalpha, vr]
    rejected = rejection(g, s, attempt, params, "poisson", done=g.Not(large))
    return g.Where(large, rejected, inverted)


@univariate(ptr.PoissonRV, lanes=2)
def poisson(g, s, lam):
    """Inversion below a mean of 10, NumPy's PTRS from 10 on."""
    negative, nan = _negative(g, lam), g.IsNaN(lam)
    too_large = g.Greater(lam, _f64(g, POISSON_LAM_MAX))
    safe = _safe(g, g.Or(negative, nan), lam, 0.0)
    if s.scalar_call:
        checks = [(g.Or(negative, nan), ValueError, "lam < 0 or lam is NaN")]
    else:  # NumPy's array path reports NaN as too large
        checks = [(negative, ValueError, "lam < 0 or lam contains NaNs")]
        too_large = g.Or(too_large, nan)
    return poisson_draws(g, s, safe, lane=0), [
        *checks,
        (too_large, ValueError, "lam value too large"),
    ]


@univariate(ptr.NegBinomialRV, lanes=5)
def negative_binomial(g, s, n, p):
    """Poisson draws of gamma-distributed means, gamma(n, (1 - p) / p) (NumPy's)."""
    zero, one = _f64(g, 0.0), _f64(g, 1.0)
    bad = g.Not(g.And(g.Greater(n, zero), g.And(g.Greater(p, zero), g.LessOrEqual(p, one))))
    safe_n = g.Where(bad, one, n)
    safe_p = g.Where(bad, one, p)
    scale = g.Div(g.Sub(one, safe_p), safe_p)
    lam = g.Mul(scale, g.Exp(log_standard_gamma(g, s, safe_n, lane=0)))
    return poisson_draws(g, s, lam, lane=3), [(bad, ValueError, _scipy_domain("nbinom"))]


def _lgamma(g, x):
    return inline(g, gammaln, x)


def _next_lane(g, lane):
    """lane + 1, for an int or a 0-d uint64."""
    return lane + 1 if isinstance(lane, int) else g.Add(lane, _u64(g, 1))


def binomial_draws(g, s, n, p, lane):
    """Binomial draws (float64) of `n` trials (a float64 integer >= 0) with success
    probability `p` in [0, 1], on min(p, 1 - p) (the draw counted from n where p > 1/2): by
    inversion over the probabilities of 0 .. 51 where the mean is below 10, else by Hormann's
    transformed rejection with squeeze (BTRS, 1993) in a while Loop. Lanes lane, lane + 1."""
    zero, one, half = _f64(g, 0.0), _f64(g, 1.0), _f64(g, 0.5)
    flip = g.Greater(p, half)
    p = g.Where(flip, g.Sub(one, p), p)
    q = g.Sub(one, p)
    mean = g.Mul(n, p)
    large = g.GreaterOrEqual(mean, _f64(g, 10.0))

    # inversion: P(k) = C(n, k) p^k q^(n-k), zero past n
    counts = _f64(g, _SMALL_COUNTS)
    n_, p_, q_ = (g.Unsqueeze(v, ints(g, [-1])) for v in (n, p, q))
    tiny = _f64(g, np.finfo(np.float64).tiny)
    log_p, log_q = g.Log(g.Max(p_, tiny)), g.Log(g.Max(q_, tiny))  # 0 log 0 = 0 at the ends
    rest = g.Max(g.Sub(n_, counts), zero)
    log_pmf = g.Add(
        g.Sub(
            g.Sub(_lgamma(g, g.Add(n_, one)), _f64(g, _LOG_FACTORIALS)),
            _lgamma(g, g.Add(rest, one)),
        ),
        g.Add(g.Mul(counts, log_p), g.Mul(rest, log_q)),
    )
    pmf = g.Where(g.LessOrEqual(counts, n_), g.Exp(log_pmf), zero)
    below = g.Less(g.CumSum(pmf, ints(g, -1)), g.Unsqueeze(s.uniform(g, 0, lane), ints(g, [-1])))
    inverted = g.Min(g.ReduceSum(g.Cast(below, to=F64), ints(g, [-1]), keepdims=0), n)

    # BTRS, on large means only (the others' constants are harmless stand-ins)
    n_big = g.Where(large, n, _f64(g, 20.0))
    p_big = g.Where(large, p, half)
    q_big = g.Sub(one, p_big)
    spq = g.Sqrt(g.Mul(n_big, g.Mul(p_big, q_big)))
    b = g.Add(_f64(g, 1.15), g.Mul(_f64(g, 2.53), spq))
    a = g.Add(g.Add(_f64(g, -0.0873), g.Mul(_f64(g, 0.0248), b)), g.Mul(_f64(g, 0.01), p_big))
    c = g.Add(g.Mul(n_big, p_big), half)
    vr = g.Sub(_f64(g, 0.92), g.Div(_f64(g, 4.2), b))
    alpha = g.Mul(g.Add(_f64(g, 2.83), g.Div(_f64(g, 5.1), b)), spq)
    lpq = g.Log(g.Div(p_big, q_big))
    m = g.Floor(g.Mul(g.Add(n_big, one), p_big))
    h = g.Add(_lgamma(g, g.Add(m, one)), _lgamma(g, g.Add(g.Sub(n_big, m), one)))

    def attempt(g, r, s, a, b, c, n_big, vr, alpha, m, h, lpq):
        u, v = s.uniforms(g, r, _next_lane(g, lane))
        centred = g.Sub(u, half)
        us = g.Sub(half, g.Abs(centred))
        k = g.Floor(g.Add(g.Mul(g.Add(g.Div(g.Mul(_f64(g, 2.0), a), us), b), centred), c))
        inside = g.And(g.GreaterOrEqual(k, zero), g.LessOrEqual(k, n_big))
        quick = g.And(g.GreaterOrEqual(us, _f64(g, 0.07)), g.LessOrEqual(v, vr))
        k_safe = g.Min(g.Max(k, zero), n_big)
        log_v = g.Log(g.Div(g.Mul(v, alpha), g.Add(g.Div(a, g.Mul(us, us)), b)))
        bound = g.Add(
            g.Sub(
                g.Sub(h, _lgamma(g, g.Add(k_safe, one))),
                _lgamma(g, g.Add(g.Sub(n_big, k_safe), one)),
            ),
            g.Mul(g.Sub(k_safe, m), lpq),
        )
        accepted = g.And(inside, g.Or(quick, g.LessOrEqual(log_v, bound)))
        return k, accepted

    params = [a, b, c, n_big, vr, alpha, m, h, lpq]
    rejected = rejection(g, s, attempt, params, "binomial", done=g.Not(large))
    draws = g.Where(large, rejected, inverted)
    return g.Where(flip, g.Sub(n, draws), draws)


def _binomial_checks(g, n, p, scalar_call: bool):
    zero, one = _f64(g, 0.0), _f64(g, 1.0)
    bad_p = g.Not(g.And(g.GreaterOrEqual(p, zero), g.LessOrEqual(p, one)))
    nan = "is NaN" if scalar_call else "contains NaNs"
    return [(_negative(g, n), ValueError, "n < 0"), (bad_p, ValueError, f"p < 0, p > 1 or p {nan}")]


def _safe(g, bad, value, stand_in: float):
    """`value` with `stand_in` where `bad` (parameters that will raise): no endless Loop."""
    return g.Where(bad, _f64(g, stand_in), value)


@univariate(ptr.BinomialRV, lanes=2)
def binomial(g, s, n, p):
    """Inversion where n min(p, 1 - p) < 10, BTRS (Hormann 1993) from 10 on."""
    checks = _binomial_checks(g, n, p, s.scalar_call)
    bad = g.Or(checks[0][0], checks[1][0])
    return binomial_draws(g, s, _safe(g, bad, n, 1.0), _safe(g, bad, p, 0.5), lane=0), checks


@univariate(ptr.BetaBinomialRV, lanes=8)
def beta_binomial(g, s, n, a, b):
    """Binomial draws with a beta-distributed success probability (SciPy's betabinom)."""
    zero = _f64(g, 0.0)
    bad = g.Or(g.Or(_negative(g, n), g.Not(g.Greater(a, zero))), g.Not(g.Greater(b, zero)))
    a, b = _safe(g, bad, a, 1.0), _safe(g, bad, b, 1.0)
    p = beta_draws(g, s, a, b)
    draws = binomial_draws(g, s, _safe(g, bad, n, 1.0), p, lane=6)
    return draws, [(bad, ValueError, _scipy_domain("betabinom"))]


@register_check(ptr.HyperGeometricRV)
def hypergeometric_integers(node):
    if any(not var.type.dtype.startswith(("int", "uint")) for var in node.inputs[2:]):
        return (
            "hypergeometric's ngood, nbad and nsample must be integers (NumPy, so PyTensor, "
            "refuses to cast floats to int64): round them and cast with astype('int64')"
        )
    return None


_FEW = np.arange(10, dtype=np.float64)  # the counts a sample of at most 9 can hold


def _log_falling(g, x):
    """log(x (x - 1) ... (x - k + 1)) for k = 0 .. 9 on a new last axis (-inf from k = x + 1
    on: no such count)."""
    factors = g.Max(g.Sub(g.Unsqueeze(x, ints(g, [-1])), _f64(g, _FEW)), _f64(g, 0.0))
    return g.CumSum(g.Log(factors), ints(g, -1), exclusive=1)


def _count_index(g, k):
    """Counts `k` (float64) as int64 indices on a new last axis."""
    return g.Unsqueeze(g.Cast(k, to=ir.DataType.INT64), ints(g, [-1]))


def _at(g, table, k):
    """table[..., k] for counts `k` (float64, the shape of the table's leading dims)."""
    return g.GatherElements(table, _count_index(g, k), axis=-1)


def _log_factorials(g, *counts):
    """log(k1!) + log(k2!) + ... (one gammaln for all of them)."""
    stacked = g.Concat(*(g.Unsqueeze(k, ints(g, [0])) for k in counts), axis=0)
    return g.ReduceSum(_lgamma(g, g.Add(stacked, _f64(g, 1.0))), ints(g, [0]), keepdims=0)


@univariate(ptr.HyperGeometricRV, lanes=2)
def hypergeometric(g, s, ngood, nbad, nsample):
    """NumPy's: the count K of the rarer kind (m of them, M of the other) in a sample of
    n = min(nsample, total - nsample), mapped back to the good ones in the sample. Where
    nsample < 10 or total - nsample < 10 (so n <= 9), by inversion over the probabilities
    C(n, k) [m]_k [M]_(n-k) / [total]_n of k = 0 .. 9 (falling factorials: a few ulps); else
    by Stadlober's ratio of uniforms (HRUA, 1989) in a while Loop."""
    zero, one, half, ten = _f64(g, 0.0), _f64(g, 1.0), _f64(g, 0.5), _f64(g, 10.0)
    total = g.Add(ngood, nbad)
    limit = _f64(g, 1e9)
    checks = [
        (_negative(g, ngood), ValueError, "ngood < 0"),
        (_negative(g, nbad), ValueError, "nbad < 0"),
        (_negative(g, nsample), ValueError, "nsample < 0"),
        (g.Less(total, nsample), ValueError, "ngood + nbad < nsample"),
        (
            g.Or(g.GreaterOrEqual(ngood, limit), g.GreaterOrEqual(nbad, limit)),
            ValueError,
            "both ngood and nbad must be less than 1000000000",
        ),
    ]
    bad = checks[0][0]
    for failed, _, _ in checks[1:]:
        bad = g.Or(bad, failed)
    ngood, nbad, nsample = (
        g.Expand(_safe(g, bad, x, 0.0), s.shape) for x in (ngood, nbad, nsample)
    )
    total = g.Add(ngood, nbad)
    n = g.Min(nsample, g.Sub(total, nsample))
    m, big_m = g.Min(ngood, nbad), g.Max(ngood, nbad)
    large = g.GreaterOrEqual(n, ten)

    # inversion
    small_n = g.Where(large, zero, n)
    k = _f64(g, _FEW)
    column_n = g.Unsqueeze(small_n, ints(g, [-1]))
    rest = g.Max(g.Sub(column_n, k), zero)  # n - k, 0 past n
    rest = g.Cast(rest, to=ir.DataType.INT64)
    log_factorials = _f64(g, _LOG_FACTORIALS[:10])
    log_choose = g.Sub(
        g.Sub(g.Gather(log_factorials, _count_index(g, small_n)), log_factorials),
        g.Gather(log_factorials, rest),
    )
    log_pmf = g.Sub(
        g.Add(
            g.Add(log_choose, _log_falling(g, g.Where(large, zero, m))),
            g.GatherElements(_log_falling(g, g.Where(large, zero, big_m)), rest, axis=-1),
        ),
        _at(g, _log_falling(g, g.Where(large, zero, total)), small_n),
    )
    pmf = g.Where(g.LessOrEqual(k, column_n), g.Exp(log_pmf), zero)
    below = g.Less(g.CumSum(pmf, ints(g, -1)), g.Unsqueeze(s.uniform(g, 0), ints(g, [-1])))
    counted = g.ReduceSum(g.Cast(below, to=F64), ints(g, [-1]), keepdims=0)
    inverted = g.Min(counted, g.Min(small_n, m))  # a cdf rounded below 1 never overshoots

    # HRUA, on n >= 10 (the others' constants are stand-ins: n = m = M = 10)
    n_big, m_big, big_m_big = (g.Where(large, x, ten) for x in (n, m, big_m))
    total_big = g.Add(m_big, big_m_big)
    p, q = g.Div(m_big, total_big), g.Div(big_m_big, total_big)
    a = g.Add(g.Mul(n_big, p), half)
    variance = g.Div(
        g.Mul(g.Mul(g.Sub(total_big, n_big), n_big), g.Mul(p, q)), g.Sub(total_big, one)
    )
    c = g.Sqrt(g.Add(variance, half))
    h = g.Add(g.Mul(_f64(g, 2 * math.sqrt(2 / math.e)), c), _f64(g, 3 - 2 * math.sqrt(3 / math.e)))
    mode = g.Floor(
        g.Div(g.Mul(g.Add(n_big, one), g.Add(m_big, one)), g.Add(total_big, _f64(g, 2.0)))
    )
    peak = _log_factorials(
        g, mode, g.Sub(m_big, mode), g.Sub(n_big, mode), g.Add(g.Sub(big_m_big, n_big), mode)
    )
    bound = g.Min(g.Add(g.Min(n_big, m_big), one), g.Floor(g.Add(a, g.Mul(_f64(g, 16.0), c))))

    def attempt(g, r, s, a, h, bound, m, big_m, n, peak):
        u, v = s.uniforms(g, r, 1)
        x = g.Add(a, g.Div(g.Mul(h, g.Sub(v, half)), u))
        inside = g.And(g.GreaterOrEqual(x, zero), g.Less(x, bound))
        k = g.Floor(g.Min(g.Max(x, zero), g.Sub(bound, one)))
        t = g.Sub(
            peak,
            _log_factorials(g, k, g.Sub(m, k), g.Sub(n, k), g.Add(g.Sub(big_m, n), k)),
        )
        quick = g.LessOrEqual(g.Sub(g.Mul(u, g.Sub(_f64(g, 4.0), u)), _f64(g, 3.0)), t)
        squeezed = g.GreaterOrEqual(g.Mul(u, g.Sub(u, t)), one)
        exact = g.And(g.Not(squeezed), g.LessOrEqual(g.Mul(_f64(g, 2.0), g.Log(u)), t))
        return k, g.And(inside, g.Or(quick, exact))

    params = [a, h, bound, m_big, big_m_big, n_big, peak]
    rejected = rejection(g, s, attempt, params, "hypergeometric", done=g.Not(large))

    rarer = g.Where(large, rejected, inverted)
    in_sample = g.Where(g.Greater(ngood, nbad), g.Sub(n, rarer), rarer)  # good ones among n
    draws = g.Where(g.Less(n, nsample), g.Sub(ngood, in_sample), in_sample)
    return draws, checks


@univariate(ptr.GenGammaRV, lanes=3)
def gengamma(g, s, alpha, p, lambd):
    """lambd G^(1/p), G a standard gamma draw of shape alpha / p (SciPy's gengamma)."""
    zero = _f64(g, 0.0)
    shape = g.Div(alpha, p)
    bad = g.Or(
        g.Or(g.Not(g.Greater(shape, zero)), g.Equal(p, zero)),
        g.Not(g.GreaterOrEqual(lambd, zero)),
    )
    shape = _safe(g, bad, shape, 1.0)
    draws = g.Mul(lambd, g.Exp(g.Div(log_standard_gamma(g, s, shape, lane=0), p)))
    return draws, [(bad, ValueError, _scipy_domain("gengamma"))]


@univariate(ptr.VonMisesRV, lanes=3)
def vonmises(g, s, mu, kappa):
    """NumPy's sampler: Best and Fisher's rejection (1979) on the wrapped Cauchy envelope, a
    uniform angle below kappa = 1e-8 and a wrapped normal above 1e6; the result in [-pi, pi]
    around mu as NumPy folds it."""
    zero, one, two, pi = _f64(g, 0.0), _f64(g, 1.0), _f64(g, 2.0), _f64(g, np.pi)
    nan = g.IsNaN(kappa)
    tiny, huge = g.Less(kappa, _f64(g, 1e-8)), g.Greater(kappa, _f64(g, 1e6))
    k = g.Where(g.Or(g.Or(tiny, huge), nan), one, kappa)  # the envelope's, where it is used
    r = g.Add(one, g.Sqrt(g.Add(one, g.Mul(_f64(g, 4.0), g.Mul(k, k)))))
    rho = g.Div(g.Sub(r, g.Sqrt(g.Mul(two, r))), g.Mul(two, k))
    envelope = g.Div(g.Add(one, g.Mul(rho, rho)), g.Mul(two, rho))
    # With double precision rho is zero until 1.4e-8: a second-order Taylor expansion below 1e-5.
    envelope = g.Where(g.Less(k, _f64(g, 1e-5)), g.Add(g.Reciprocal(k), k), envelope)

    def attempt(g, r, s, envelope, k):
        u, v = s.uniforms(g, r, 0)
        z = g.Cos(g.Mul(pi, u))
        w = g.Div(g.Add(one, g.Mul(envelope, z)), g.Add(envelope, z))
        y = g.Mul(k, g.Sub(envelope, w))
        accepted = g.Or(
            g.GreaterOrEqual(g.Sub(g.Mul(y, g.Sub(two, y)), v), zero),
            g.GreaterOrEqual(g.Sub(g.Add(g.Log(g.Div(y, v)), one), y), zero),
        )
        return w, accepted

    ends = g.Or(g.Or(tiny, huge), nan)
    w = rejection(g, s, attempt, [envelope, k], "vonmises", done=ends)
    root = g.Sqrt(g.Mul(g.Sub(one, w), g.Add(one, w)))
    angle = inline(g, arctan2, root, w)  # acos(w): ONNX Runtime has no float64 Acos
    sign_u, uniform_u = s.uniforms(g, 0, 1)
    angle = g.Add(g.Where(g.Less(sign_u, _f64(g, 0.5)), g.Neg(angle), angle), mu)
    folded = g.Sub(g.Mod(g.Add(g.Abs(angle), pi), _f64(g, 2 * np.pi), fmod=1), pi)
    folded = g.Where(g.Less(angle, zero), g.Neg(folded), folded)
    # uniform below 1e-8, a wrapped normal above 1e6
    flat = g.Mul(pi, g.Sub(g.Mul(two, uniform_u), one))
    wrapped = g.Add(mu, g.Mul(g.Sqrt(g.Reciprocal(kappa)), s.normal(g, 0, 2)))
    wrapped = g.Where(g.Less(wrapped, g.Neg(pi)), g.Add(wrapped, _f64(g, 2 * np.pi)), wrapped)
    wrapped = g.Where(g.Greater(wrapped, pi), g.Sub(wrapped, _f64(g, 2 * np.pi)), wrapped)
    draws = g.Where(tiny, flat, g.Where(huge, wrapped, folded))
    draws = g.Where(nan, kappa, draws)
    return draws, [(_negative(g, kappa), ValueError, "kappa < 0")]


@register(ptr.MultinomialRV)
def multinomial(g, node, rng, size, n, p):
    """NumPy's conditional binomials: category j gets Binomial(n - earlier draws,
    p_j / (1 - earlier p)) from lanes 2j and 2j + 1, the last what remains; unrolled over a
    static number of categories, else a Loop over them (the same draws)."""
    n, p = _float(g, node.inputs[2], n), _float(g, node.inputs[3], p)
    categories = node.inputs[3].type.shape[-1]
    shape = _support_shape(
        g,
        node,
        size,
        lambda: g.Shape(g.Add(n, g.ReduceSum(p, ints(g, [-1]), keepdims=0))),
        g.Shape(p, start=-1) if categories is None else ints(g, [categories]),
    )
    batch = g.Slice(shape, ints(g, [0]), ints(g, [-1]))
    lanes = 0 if categories is None else 2 * max(categories - 1, 1)
    s = Stream(g, rng, batch, lanes=lanes)
    zero, one = _f64(g, 0.0), _f64(g, 1.0)

    def category(g, j, remaining_n, remaining_p):
        """Category j's draw (j an int or a 0-d int64), and what remains."""
        p_j = g.Gather(p, ints(g, j) if isinstance(j, int) else j, axis=-1)
        share = g.Min(g.Max(g.Div(p_j, remaining_p), zero), one)
        share = g.Where(g.IsNaN(share), zero, share)  # nothing left to share
        lane = 2 * j if isinstance(j, int) else g.Cast(g.Mul(j, ints(g, 2)), to=U64)
        draw = binomial_draws(g, s, remaining_n, share, lane=lane)
        return g.Sub(remaining_n, draw), g.Sub(remaining_p, p_j), draw

    remaining_n, remaining_p = g.Expand(n, batch), g.Expand(one, batch)
    if categories is not None:
        columns = []
        for j in range(categories - 1):
            remaining_n, remaining_p, draw = category(g, j, remaining_n, remaining_p)
            columns.append(g.Unsqueeze(draw, ints(g, [-1])))
        columns.append(g.Unsqueeze(remaining_n, ints(g, [-1])))
        draws = g.Concat(*columns, axis=-1)
    else:
        steps = g.Max(g.Sub(g.Reshape(g.Shape(p, start=-1), ints(g, [])), ints(g, 1)), ints(g, 0))
        remaining_n, _, stacked = loop(
            g, steps, [remaining_n, remaining_p], category, "multinomial", stacked=[F64]
        )
        rank = node.outputs[1].type.ndim - 1  # the batch's
        columns = g.Transpose(stacked, perm=[*range(1, rank + 1), 0])
        draws = g.Concat(columns, g.Unsqueeze(remaining_n, ints(g, [-1])), axis=-1)
    bad_p = g.Not(g.And(g.GreaterOrEqual(p, zero), g.LessOrEqual(p, one)))
    checks = [
        (_negative(g, n), ValueError, "n < 0"),
        (bad_p, ValueError, "pvals < 0, pvals > 1 or pvals contains NaNs"),
    ]
    return s.next_state, _result(g, node, draws, checks)


# ---------------------------------------------------------------- integers and categories


@register(ptr.IntegersRV)
def integers(g, node, rng, size, low, high):
    """IntegersRV -> `integers_between`."""
    low, high = _int64(g, node.inputs[2], low), _int64(g, node.inputs[3], high)
    return integers_between(g, node, rng, size, low, high, (ValueError, "low >= high"))


def integers_between(g, node, rng, size, low, high, empty_error):
    """The next state and the draws of the random variable `node` (rng, size, ...) uniform on
    the integers low <= k < high (int64 values), raising ``empty_error`` (an exception type
    and a message) where high <= low: low + w mod (high - low) for a 64-bit word w, redrawn
    where w < 2^64 mod (high - low) (those would favour the small remainders), exactly
    uniform, in unsigned 64-bit arithmetic so that any int64 range works."""
    int64 = ir.DataType.INT64
    shape = draw_shape(g, node, size, [low, high])
    s = Stream(g, rng, shape)
    width = g.Sub(g.Cast(high, to=U64), g.Cast(low, to=U64))
    empty = g.GreaterOrEqual(low, high)
    # No division by zero before the check raises (ONNX Runtime's Where has no uint64 kernel).
    width = where(g, empty, _u64(g, 1), width, "uint64")
    threshold = g.Mod(g.Sub(_u64(g, 0), width), width)

    def attempt(g, r, s, width, threshold):
        word = s.words64(g, r)
        return g.Mod(word, width), g.GreaterOrEqual(word, threshold)

    offset = rejection(g, s, attempt, [width, threshold], "integers", dtype="uint64")
    draws = g.Cast(g.Add(g.Cast(low, to=U64), offset), to=int64)
    dtype = node.outputs[1].type.dtype
    if dtype != "int64":
        draws = g.Cast(draws, to=onnx_dtype(dtype))
    return s.next_state, raise_if(g, empty, draws, *empty_error)


@register(ptr.CategoricalRV)
def categorical(g, node, rng, size, p):
    """The position of a uniform u among the cumulative probabilities, by NumPy's binary search
    as PyTensor's rng_fn (probabilities below 0, as of a PyMC ordered logistic whose prior
    cutpoints are out of order, give its draws too)."""
    p = _float(g, node.inputs[2], p)
    static = node.outputs[1].type.shape
    if None not in static:
        shape = ints(g, np.array(static, dtype=np.int64))
    elif not _is_none(node.inputs[1]):
        shape = draw_shape(g, node, size, [])
    else:
        shape = g.Shape(p, end=-1)
    s = Stream(g, rng, shape)
    u = g.Unsqueeze(s.uniform(g, 0), ints(g, [-1]))
    cdf = g.Expand(g.CumSum(p, ints(g, -1)), g.Concat(shape, g.Shape(p, start=-1), axis=0))
    found = binary_search(g, cdf, u, lambda g, a, b: g.Less(a, b), node.inputs[2].type.shape[-1])
    draws = g.Squeeze(found, ints(g, [-1]))
    dtype = node.outputs[1].type.dtype
    return s.next_state, draws if dtype == "int64" else g.Cast(draws, to=onnx_dtype(dtype))


# ---------------------------------------------------------------- multivariate


def _support_shape(g, node, size, batch_of_params, core):
    """The draw's shape: static where known, else `size` (or the parameters' batch shape)
    followed by the `core` dims (an int64 vector)."""
    static = node.outputs[1].type.shape
    if None not in static:
        return ints(g, np.array(static, dtype=np.int64))
    if not _is_none(node.inputs[1]):
        batch = _int64(g, node.inputs[1], size)
    else:
        batch = batch_of_params()
    return g.Concat(batch, core, axis=0)


@register(ptr.DirichletRV)
def dirichlet(g, node, rng, size, alphas):
    """Standard gamma draws of the alphas, normalised: a softmax of their logarithms; zeros
    where all alphas are 0, as NumPy (whose gamma draws of 0 are 0: 0 / 0 in the softmax)."""
    alphas = _float(g, node.inputs[2], alphas)
    shape = _support_shape(
        g, node, size, lambda: g.Shape(alphas, end=-1), g.Shape(alphas, start=-1)
    )
    s = Stream(g, rng, shape, lanes=3)
    alphas_full = g.Expand(alphas, shape)
    safe = g.Where(_negative(g, alphas_full), _f64(g, 1.0), alphas_full)
    logs = log_standard_gamma(g, s, safe, lane=0)
    top = g.ReduceMax(logs, ints(g, [-1]), keepdims=1)
    weights = g.Exp(g.Sub(logs, top))
    draws = g.Div(weights, g.ReduceSum(weights, ints(g, [-1]), keepdims=1))
    draws = g.Where(g.Equal(top, _f64(g, -np.inf)), _f64(g, 0.0), draws)
    checks = [(_negative(g, alphas), ValueError, "alpha < 0")]
    return s.next_state, _result(g, node, draws, checks)


def _covariance_factor(g, node, cov):
    """A with A A^T = cov by the node's method, as PyTensor's: the Cholesky factor, or the
    eigenvectors (of the lower triangle, NumPy's eigh) or left singular vectors scaled by the
    square roots of their values (NaN where an eigenvalue is negative, as NumPy's). Then the
    (failed, exception, message) checks."""
    rank, method = node.inputs[3].type.ndim, node.op.method
    if method == "cholesky":
        factor = lower_factor(g, cov, "float64", True, rank, node.inputs[3].type.shape[-1])
        return factor, [(g.IsNaN(factor), LinAlgError, "Matrix is not positive definite")]
    if method == "eigh":
        covariance = symmetric(g, cov, True, rank)
        size = node.inputs[3].type.shape[-1]
        values, vectors, failed = symmetric_eigen(g, covariance, "float64", rank, size)
        message = "Eigenvalues did not converge"
    else:
        values, vectors, _, failed = jacobi_svd(g, cov, "float64", rank, full=False)
        message = "SVD did not converge"
    factor = g.Mul(vectors, g.Unsqueeze(g.Sqrt(values), ints(g, [-2])))
    return factor, [(failed, LinAlgError, message)]


@register(ptr.MvNormalRV)
def multivariate_normal(g, node, rng, size, mean, cov):
    """mean + A z, A A^T = cov (by the node's method) and z standard normal (NumPy's way)."""
    mean, cov = _float(g, node.inputs[2], mean), _float(g, node.inputs[3], cov)
    shape = _support_shape(
        g,
        node,
        size,
        # The batch dims of mean and cov, broadcast.
        lambda: broadcast_shape(g, [g.Shape(mean, end=-1), g.Shape(cov, end=-2)]),
        g.Shape(mean, start=-1),
    )
    s = Stream(g, rng, shape)
    factor, checks = _covariance_factor(g, node, cov)
    z = g.Unsqueeze(s.normal(g, 0), ints(g, [-1]))
    draws = g.Add(mean, g.Squeeze(g.MatMul(factor, z), ints(g, [-1])))
    return s.next_state, _result(g, node, draws, checks)


def _first_core_shape(g, var, core_shape):
    """The sample's shape from `core_shape` (int64): a batched one (PyTensor allows them only
    when all are equal) gives its first row, as PyTensor's choice does."""
    core_shape = _int64(g, var, core_shape)
    for _ in range(var.type.ndim - 1):
        core_shape = g.Gather(core_shape, ints(g, 0), axis=0)
    return core_shape


@register(ptr.ChoiceWithoutReplacement)
def choice_without_replacement(g, node, rng, size, a, *rest):
    """The k largest of one key per population element: uniform keys, or with p, log p plus a
    Gumbel draw (the Gumbel top-k trick: the same law as drawing one by one in proportion to p,
    as NumPy does). Batched (a's or p's leading dims, or `size`) as PyTensor's loop over
    NumPy's choice: one independent sample per batch entry; a batch of integers `a` samples
    each from its own range."""
    op = node.op
    p, core_shape = (rest[0], rest[1]) if op.has_p_param else (None, rest[0])
    int64 = ir.DataType.INT64
    a_var, core_var = node.inputs[2], node.inputs[-1]
    scalar = op.ndims_params[0] == 0
    a_batch = a_var.type.ndim - op.ndims_params[0]
    core_shape = _first_core_shape(g, core_var, core_shape)
    count = g.Reshape(g.ReduceProd(core_shape, keepdims=1), ints(g, [1]))
    # The batch: `size`, else a's and p's leading dims broadcast (none: one sample).
    out_ndim = node.outputs[1].type.ndim
    batch_rank = out_ndim - core_var.type.shape[-1] - (0 if scalar else op.ndims_params[0] - 1)
    if batch_rank == 0:
        batch = ints(g, np.zeros(0, np.int64))
    elif not _is_none(node.inputs[1]):
        batch = _int64(g, node.inputs[1], size)
    else:
        leading = [g.Shape(a, end=a_batch)]
        if p is not None:
            leading.append(g.Shape(p, end=a_batch))
        batch = broadcast_shape(g, leading)
    if scalar:
        sizes = g.Expand(g.Cast(a, to=int64), batch)  # each entry's population
        if p is not None:
            width = g.Shape(p, start=-1)
        else:  # the largest population (0 for an empty batch)
            flat = g.Concat(g.Reshape(sizes, ints(g, [-1])), ints(g, [0]), axis=0)
            width = g.ReduceMax(flat, keepdims=1)
    else:
        width = g.Shape(a, start=a_batch, end=a_batch + 1)
        sizes = g.Expand(g.Reshape(width, ints(g, [])), batch)
    s = Stream(g, rng, g.Concat(batch, width, axis=0))
    u = s.uniform(g, 0)
    checks = [
        (
            g.Greater(count, sizes),
            ValueError,
            "Cannot take a larger sample than population when replace is False",
        )
    ]
    if p is None:
        # An integer a smaller than the widest: the positions past it never come first.
        inside = g.Less(
            g.Range(ints(g, 0), g.Reshape(width, ints(g, [])), ints(g, 1)),
            g.Unsqueeze(sizes, ints(g, [-1])),
        )
        keys = g.Where(inside, u, _f64(g, -1.0))
    else:
        p_width = g.Reshape(g.Shape(p, start=-1), ints(g, []))
        p = g.Expand(_float(g, node.inputs[3], p), g.Concat(batch, width, axis=0))
        zero = _f64(g, 0.0)
        keys = g.Sub(g.Log(p), g.Log(g.Neg(g.Log(u))))
        last = ints(g, [-1])
        total = g.ReduceSum(p, last, keepdims=0)
        nonzero = g.ReduceSum(g.Cast(g.Greater(p, zero), to=int64), last, keepdims=0)
        off = g.Greater(g.Abs(g.Sub(total, _f64(g, 1.0))), _f64(g, np.sqrt(np.finfo(float).eps)))
        checks = [
            (g.Not(g.Equal(sizes, p_width)), ValueError, "a and p must have same size"),
            *checks,
            (_negative(g, p), ValueError, "Probabilities are not non-negative"),
            (
                off,
                ValueError,
                "Probabilities do not sum to 1. See Notes section of docstring for more information.",
            ),
            (g.Less(nonzero, count), ValueError, "Fewer non-zero entries in p than size"),
        ]
    safe_count = g.Min(count, width)  # TopK must not fail before the check raises
    _, chosen = g.TopK(keys, safe_count, axis=-1, largest=1, sorted=1, _outputs=2)
    if scalar:
        draws = g.Reshape(chosen, g.Concat(batch, core_shape, axis=0), allowzero=1)
        dtype = node.outputs[1].type.dtype
        if dtype != "int64":
            draws = g.Cast(draws, to=onnx_dtype(dtype))
    else:
        rows = g.Shape(a, start=a_batch + 1)
        a = g.Expand(a, g.Concat(batch, width, rows, axis=0))
        picked = g.GatherND(a, g.Unsqueeze(chosen, ints(g, [-1])), batch_dims=batch_rank)
        draws = g.Reshape(picked, g.Concat(batch, core_shape, rows, axis=0), allowzero=1)
    for failed, exc_type, message in checks:
        draws = raise_if(g, failed, draws, exc_type, message)
    return s.next_state, draws


@register(ptr.PermutationRV)
def permutation(g, node, rng, size, x):
    """arange(x) for an integer x, else x's first core axis (its rows, for a matrix), in the
    order of uniform keys, one per position."""
    core = node.op.ndims_params[0]
    if core == 0:
        count = g.Cast(g.Reshape(x, ints(g, [1])), to=ir.DataType.INT64)
        shape = _support_shape(g, node, size, lambda: ints(g, np.zeros(0, np.int64)), count)
        keys_shape = shape
    else:
        at = node.inputs[2].type.ndim - core  # x's first core axis
        shape = _support_shape(g, node, size, lambda: g.Shape(x, end=at), g.Shape(x, start=at))
        # The keys: one per position of the permuted axis, for each batch entry.
        batch = node.outputs[1].type.ndim - core
        static = node.outputs[1].type.shape[: batch + 1]
        if None in static:
            keys_shape = g.Slice(shape, ints(g, [0]), ints(g, [batch + 1]))
        else:
            keys_shape = ints(g, np.array(static, dtype=np.int64))
    s = Stream(g, rng, keys_shape)
    keys = s.uniform(g, 0)
    _, order = g.TopK(keys, g.Shape(keys, start=-1), axis=-1, largest=1, sorted=1, _outputs=2)
    if core == 0:
        draws = order
        dtype = node.outputs[1].type.dtype
        if dtype != "int64":
            draws = g.Cast(draws, to=onnx_dtype(dtype))
    else:
        positions = g.Unsqueeze(order, ints(g, [-1]))
        draws = g.GatherND(g.Expand(x, shape), positions, batch_dims=batch)
    return s.next_state, draws
