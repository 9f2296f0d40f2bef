"""Scalar ops of pytensor.scalar.basic, used by Elemwise and Composite.

PyTensor evaluates these with NumPy ufuncs on the raw inputs and casts the result to the
output dtype; the translations reproduce that, in the dtype PyTensor upcasts the inputs to.
Where ONNX Runtime has no CPU kernel for a dtype, the translation computes in a dtype that
holds every value exactly (or has the same bits) and casts back.
"""

import math
from functools import reduce
from typing import TypeVar, Union

import numpy as np
import onnx_ir as ir
import pytensor.scalar.basic as ps
from onnxscript import (
    DOUBLE,
    FLOAT,
    FLOAT16,
    INT8,
    INT16,
    INT32,
    INT64,
    UINT8,
    UINT16,
    UINT32,
    UINT64,
)
from onnxscript import opset18 as op18
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors

from pt_onnxscript.ops.common import (
    cast_inputs_to_output,
    constant,
    negation_of,
    raise_if,
    where,
)
from pt_onnxscript.ops.scalar.constants import LN2
from pt_onnxscript.ops.scalar.math import shared_logistic
from pt_onnxscript.opsets import at_least
from pt_onnxscript.optimize import no_negative_zero
from pt_onnxscript.registry import lookup, register_check, register_scalar
from pt_onnxscript.runtime_gaps import kernel_dtype
from pt_onnxscript.scripted import inline, script
from pt_onnxscript.translate import scalar_node, translate_inner_graph
from pt_onnxscript.types import onnx_dtype

TFloat = TypeVar("TFloat", bound=Union[FLOAT16, FLOAT, DOUBLE])
TSigned = TypeVar("TSigned", bound=Union[INT8, INT32, INT64])
TUnsigned = TypeVar("TUnsigned", bound=Union[UINT8, UINT16, UINT32, UINT64])
TInt = TypeVar("TInt", bound=Union[INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64])

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")


def _dtype(var) -> str:
    return var.type.dtype


def _cast(g, x, src: str, dst: str):
    """`x`, of PyTensor dtype `src`, as dtype `dst`."""
    return x if src == dst else g.Cast(x, to=onnx_dtype(dst))


def _const(g, value, dtype: str):
    """A 0-d constant of PyTensor dtype `dtype`."""
    return g.Constant(value=ir.tensor(np.asarray(value, dtype=dtype)))


def _never(g, x):
    """All False, shaped like `x` (an integer is never NaN nor infinite)."""
    return g.Not(g.Equal(x, x))


# ---------------------------------------------------------------- comparisons

_COMPARISONS = {
    ps.LT: "Less",
    ps.GT: "Greater",
    ps.LE: "LessOrEqual",
    ps.GE: "GreaterOrEqual",
    ps.EQ: "Equal",
    ps.NEQ: "Equal",
}


@register_scalar(*_COMPARISONS)
def comparison(g, node, x, y):
    """LT, GT, LE, GE, EQ, NEQ -> Less, Greater, LessOrEqual, GreaterOrEqual, Equal, Not(Equal)."""
    name = lookup(_COMPARISONS, node.op)
    dx, dy = _dtype(node.inputs[0]), _dtype(node.inputs[1])
    if "uint64" in (dx, dy) and {dx, dy} & set(SIGNED):
        result = _compare_signed_with_uint64(g, name, x, y, dx, dy)
    else:
        common = ps.upcast(dx, dy)
        if name != "Equal":
            common = kernel_dtype(name, common)
        result = getattr(g, name)(_cast(g, x, dx, common), _cast(g, y, dy, common))
    return g.Not(result) if isinstance(node.op, ps.NEQ) else result


def _compare_signed_with_uint64(g, name, x, y, dx, dy):
    """Compare a signed integer with a uint64 exactly, as NumPy does (their upcast is float64)."""
    signed_first = dx in SIGNED
    signed, signed_dtype = (x, dx) if signed_first else (y, dy)
    negative = g.Less(signed, _const(g, 0, signed_dtype))
    as_uint = getattr(g, name)(_cast(g, x, dx, "uint64"), _cast(g, y, dy, "uint64"))
    # A negative signed value is below every uint64.
    if name != "Equal" and (name in ("Less", "LessOrEqual")) == signed_first:
        return g.Or(negative, as_uint)
    return g.And(g.Not(negative), as_uint)


@register_scalar(ps.IsNan)
def isnan(g, node, x):
    """IsNan -> IsNaN; integers are never NaN."""
    return g.IsNaN(x) if _dtype(node.inputs[0]) in FLOATS else _never(g, x)


@register_scalar(ps.IsInf)
def isinf(g, node, x):
    """IsInf -> IsInf; integers are never infinite."""
    dtype = _dtype(node.inputs[0])
    if dtype not in FLOATS:
        return _never(g, x)
    # IsInf's schema has float16 from opset 20 (IsInf-20); IsInf-10 has not.
    via = dtype if at_least(g, 20) else kernel_dtype("IsInf", dtype)
    return g.IsInf(_cast(g, x, dtype, via))


@register_scalar(ps.Switch)
def switch(g, node, cond, a, b):
    """Switch -> Where(cond != 0, a, b) in the output dtype; of two negations, where one
    negates a value that is never -0.0, the negation of their Where (which needs no sign
    repair then: `ops.common.where`)."""
    out = _dtype(node.outputs[0])
    cond = _cast(g, cond, _dtype(node.inputs[0]), "bool")
    a, b = (_cast(g, v, _dtype(var), out) for v, var in zip((a, b), node.inputs[1:]))
    negated = [negation_of(v) for v in (a, b)]
    if None not in negated and any(no_negative_zero(v) for v in negated):
        return g.Neg(where(g, cond, *negated, out))
    return where(g, cond, a, b, out)


# ---------------------------------------------------------------- bitwise

_BITWISE = {
    ps.OR: ("Or", "BitwiseOr"),
    ps.XOR: ("Xor", "BitwiseXor"),
    ps.AND: ("And", "BitwiseAnd"),
}


@register_check(*_BITWISE, ps.Invert)
def integer_operands(node):
    """PyTensor types a bitwise op of uint64 and a signed integer as float64, as NumPy
    promotes them (and then has no bitwise op for them either)."""
    dtype = _dtype(node.outputs[0])
    if dtype in FLOATS:
        inputs = " and ".join(_dtype(var) for var in node.inputs)
        return (
            f"a bitwise op of {inputs} computes in {dtype}, which has no bits to combine "
            "(NumPy and PyTensor's own backends refuse it too): cast the operands to one "
            "integer dtype"
        )
    return None


@register_scalar(*_BITWISE)
def bitwise(g, node, x, y):
    """OR, XOR, AND -> Or, Xor, And on bools; BitwiseOr, BitwiseXor, BitwiseAnd on integers."""
    logical, bitwise_name = lookup(_BITWISE, node.op)
    name = logical if _dtype(node.outputs[0]) == "bool" else bitwise_name
    return getattr(g, name)(*cast_inputs_to_output(g, node, [x, y]))


@register_scalar(ps.Invert)
def invert(g, node, x):
    """Invert -> Not on bools, BitwiseNot on integers."""
    return g.Not(x) if _dtype(node.outputs[0]) == "bool" else g.BitwiseNot(x)


# ---------------------------------------------------------------- arithmetic


@register_scalar(ps.Maximum, ps.Minimum)
def extremum(g, node, x, y):
    """Maximum, Minimum -> Max, Min (both propagate NaN, like NumPy); Or, And on bools;
    maximum(x, 0) of floats -> Relu (which keeps NaN and -0.0 as NumPy does)."""
    out = _dtype(node.outputs[0])
    x, y = cast_inputs_to_output(g, node, [x, y])
    is_max = isinstance(node.op, ps.Maximum)
    if is_max and out in FLOATS:
        zero = [isinstance(v, Constant) and np.all(v.data == 0) for v in node.inputs]
        if zero[1] and not zero[0]:
            return g.Relu(x)
        if zero[0] and not zero[1]:
            return g.Relu(y)
    if out == "bool":
        return g.Or(x, y) if is_max else g.And(x, y)
    via = kernel_dtype("Max", out)
    result = (g.Max if is_max else g.Min)(_cast(g, x, out, via), _cast(g, y, out, via))
    return _cast(g, result, via, out)


@register_scalar(ps.Add)
def add(g, node, *inputs):
    """Add -> a chain of Add (Or on bools)."""
    binary = g.Or if _dtype(node.outputs[0]) == "bool" else g.Add
    return reduce(binary, cast_inputs_to_output(g, node, inputs))


@register_scalar(ps.Mul)
def mul(g, node, *inputs):
    """Mul -> a chain of Mul (And on bools)."""
    binary = g.And if _dtype(node.outputs[0]) == "bool" else g.Mul
    return reduce(binary, cast_inputs_to_output(g, node, inputs))


@register_scalar(ps.Sub)
def sub(g, node, x, y):
    """Sub -> Sub."""
    return g.Sub(*cast_inputs_to_output(g, node, [x, y]))


@register_scalar(ps.TrueDiv)
def true_div(g, node, x, y):
    """TrueDiv -> Div in the float output dtype (floatX for two integers)."""
    return g.Div(*cast_inputs_to_output(g, node, [x, y]))


@script()
def float_floor_divide(a: TFloat, b: TFloat) -> TFloat:
    """NumPy's float a // b (npy_floor_divide): fmod-based, snapped, with NumPy's signed zeros."""
    zero = op18.CastLike(0, a)
    one = op18.CastLike(1, a)
    mod = op18.Mod(a, b, fmod=1)
    div = op18.Div(op18.Sub(a, mod), b)
    wrong_sign = op18.And(
        op18.Not(op18.Equal(mod, zero)), op18.Xor(op18.Less(b, zero), op18.Less(mod, zero))
    )
    div = op18.Where(wrong_sign, op18.Sub(div, one), div)
    floor = op18.Floor(div)
    snapped = op18.Where(
        op18.Greater(op18.Sub(div, floor), op18.CastLike(0.5, a)), op18.Add(floor, one), floor
    )
    quotient = op18.Div(a, b)
    signed_zero = op18.Mul(quotient, zero)  # copysign(0, a / b), or NaN where div is NaN
    # ORT's Where turns a -0.0 from its second input into +0.0 (not from its third).
    result = op18.Where(op18.Greater(op18.Abs(div), zero), snapped, signed_zero)
    return op18.Where(op18.Equal(b, zero), quotient, result)


@script()
def float_remainder(a: TFloat, b: TFloat) -> TFloat:
    """NumPy's float a % b (npy_remainder): fmod moved to the divisor's sign."""
    zero = op18.CastLike(0, a)
    mod = op18.Mod(a, b, fmod=1)
    wrong_sign = op18.And(
        op18.Not(op18.Equal(mod, zero)), op18.Xor(op18.Less(b, zero), op18.Less(mod, zero))
    )
    signed_zero = op18.Mul(op18.Sign(b), zero)  # copysign(0, b)
    # ORT's Where turns a -0.0 from its second input into +0.0 (not from its third).
    nonzero = op18.Or(op18.IsNaN(mod), op18.Greater(op18.Abs(mod), zero))
    result = op18.Where(wrong_sign, op18.Add(mod, b), op18.Where(nonzero, mod, signed_zero))
    return op18.Where(op18.Equal(b, zero), mod, result)


@script()
def signed_floor_divide(n: TSigned, d: TSigned) -> TSigned:
    """NumPy's signed integer n // d: floored; n // 0 is 0 and MIN // -1 wraps to MIN."""
    zero = op18.CastLike(0, n)
    one = op18.CastLike(1, n)
    by_zero = op18.Equal(d, zero)
    by_minus_one = op18.Equal(d, op18.Neg(one))
    # Div traps on a zero divisor and on MIN / -1.
    safe = op18.Where(op18.Or(by_zero, by_minus_one), one, d)
    q = op18.Div(n, safe)
    inexact = op18.Not(op18.Equal(op18.Mul(q, safe), n))
    negative = op18.Xor(op18.Less(n, zero), op18.Less(safe, zero))
    q = op18.Where(op18.And(inexact, negative), op18.Sub(q, one), q)
    q = op18.Where(by_minus_one, op18.Sub(zero, n), q)
    return op18.Where(by_zero, zero, q)


@script()
def unsigned_floor_divide(n: TUnsigned, d: TUnsigned) -> TUnsigned:
    """NumPy's unsigned integer n // d, with n // 0 = 0."""
    by_zero = op18.Equal(d, op18.CastLike(0, d))
    q = op18.Div(n, op18.Add(d, op18.CastLike(by_zero, d)))
    return op18.Mul(q, op18.CastLike(op18.Not(by_zero), d))


@script()
def int_remainder(n: TInt, d: TInt) -> TInt:
    """NumPy's integer n % d (the divisor's sign), with n % 0 = 0."""
    by_zero = op18.Equal(d, op18.CastLike(0, d))
    return op18.Mod(n, op18.Add(d, op18.CastLike(by_zero, d)))


def _computed_in(g, function, x, y, dtype: str, via: str):
    """`function`(x, y) for values of PyTensor dtype `dtype`, computed in dtype `via`."""
    result = inline(g, function, _cast(g, x, dtype, via), _cast(g, y, dtype, via))
    return _cast(g, result, via, dtype)


@register_scalar(ps.IntDiv)
def int_div(g, node, x, y):
    """IntDiv -> NumPy's floor division (float, signed or unsigned integer)."""
    out = _dtype(node.outputs[0])
    x, y = cast_inputs_to_output(g, node, [x, y])
    if out in FLOATS:
        return inline(g, float_floor_divide, x, y)
    if out in UNSIGNED:
        return inline(g, unsigned_floor_divide, x, y)
    # Bools divide as int8, like NumPy; the division's Where needs a kernel.
    via = "int8" if out == "bool" else kernel_dtype("Where", out)
    return _computed_in(g, signed_floor_divide, x, y, out, via)


@register_scalar(ps.Mod)
def mod(g, node, x, y):
    """Mod -> NumPy's remainder (float, or integer with the divisor's sign)."""
    out = _dtype(node.outputs[0])
    x, y = cast_inputs_to_output(g, node, [x, y])
    if out in FLOATS:
        return inline(g, float_remainder, x, y)
    # Bools divide as int8, like NumPy.
    return _computed_in(g, int_remainder, x, y, out, "int8" if out == "bool" else out)


@script()
def power_by_squaring(x: TInt, e: TInt) -> TInt:
    """x ** e for integers e >= 0, wrapping around like NumPy (ONNX Pow computes in double)."""
    zero = op18.CastLike(0, x)
    one = op18.CastLike(1, x)
    two = op18.CastLike(2, x)
    base = op18.Add(x, op18.Mul(e, zero))
    exponent = op18.Add(e, op18.Mul(x, zero))
    result = op18.Add(op18.Mul(base, zero), one)
    more = op18.Greater(
        op18.ReduceSum(op18.Cast(op18.Greater(exponent, zero), to=INT64.dtype), keepdims=0),
        op18.Constant(value_int=0),
    )
    while more:
        bit = op18.BitwiseAnd(exponent, one)
        result = op18.Mul(result, op18.Add(one, op18.Mul(bit, op18.Sub(base, one))))
        base = op18.Mul(base, base)
        exponent = op18.Div(exponent, two)
        more = op18.Greater(
            op18.ReduceSum(op18.Cast(op18.Greater(exponent, zero), to=INT64.dtype), keepdims=0),
            op18.Constant(value_int=0),
        )
    return result


@register_scalar(ps.Pow)
def pow_(g, node, x, e):
    """Pow -> Pow on floats; exact integer powers by squaring.

    NumPy refuses negative integer exponents; like PyTensor's Numba backend (and its C
    backend, in PyTensor 3), x ** -n is then 1 for x = 1, (-1) ** n for x = -1, 0 for the
    other x but 0, and 0 ** -n raises ZeroDivisionError.
    """
    out = _dtype(node.outputs[0])
    x, e = cast_inputs_to_output(g, node, [x, e])
    if out in FLOATS:
        return g.Pow(x, e)
    if out in UNSIGNED:
        return inline(g, power_by_squaring, x, e)
    zero, one = _const(g, 0, out), _const(g, 1, out)
    negative = g.Less(e, zero)
    # The parity of a negative exponent decides the sign of (-1) ** e.
    exponent = where(g, negative, g.BitwiseAnd(e, one), e, out)
    power = inline(g, power_by_squaring, x, exponent)
    unit = g.Or(g.Equal(x, one), g.Equal(x, _const(g, -1, out)))
    result = where(g, g.And(negative, g.Not(unit)), zero, power, out)
    pole = g.And(negative, g.Equal(x, zero))
    return raise_if(g, pole, result, ZeroDivisionError, "0 cannot be raised to a negative power")


@register_scalar(ps.Clip)
def clip(g, node, x, low, high):
    """Clip -> Where(x < low, low, Where(x > high, high, x)): low wins when low > high."""
    out = _dtype(node.outputs[0])
    x, low, high = cast_inputs_to_output(g, node, [x, low, high])
    order = kernel_dtype("Less", out)
    cx = _cast(g, x, out, order)
    below = g.Less(cx, _cast(g, low, out, order))
    above = g.Greater(cx, _cast(g, high, out, order))
    return where(g, below, low, where(g, above, high, x, out), out)


@register_scalar(ps.Second)
def second(g, node, x, y):
    """Second -> y expanded to the broadcast shape of x and y."""
    return g.Expand(y, g.Shape(x))


@register_scalar(ps.Identity)
def scalar_identity(g, node, x):
    """Identity -> Identity."""
    return g.Identity(x)


@register_scalar(ps.Real, ps.Imag)
def real_or_imag(g, node, x):
    """Real, Imag of a real number (ONNX Runtime has no complex dtypes): x itself, and zeros
    of its dtype (+0.0 whatever x is, NaN included, as np.imag gives); PyTensor puts Real in
    a vector norm along an axis."""
    if isinstance(node.op, ps.Real):
        return g.Identity(x)
    return g.Expand(constant(g, 0, node.outputs[0].type.dtype), g.Shape(x))


@script()
def float64_to_float16(x: DOUBLE[...]) -> FLOAT16[...]:
    """Cast float64 -> float16 rounded once, as NumPy does (ORT rounds twice, via float32)."""
    one = op18.CastLike(1.0, x)
    two = op18.CastLike(2.0, x)
    magnitude = op18.Abs(x)
    # The binade of x: floor(log2 |x|), corrected where the logarithm rounds across it.
    exponent = op18.Floor(op18.Div(op18.Log(magnitude), op18.CastLike(LN2, x)))
    exponent = op18.Where(
        op18.Greater(op18.Pow(two, exponent), magnitude), op18.Sub(exponent, one), exponent
    )
    exponent = op18.Where(
        op18.LessOrEqual(op18.Pow(two, op18.Add(exponent, one)), magnitude),
        op18.Add(exponent, one),
        exponent,
    )
    # float16 keeps 10 bits after the leading one; below 2**-14 its spacing is fixed.
    lowest = op18.CastLike(-14.0, x)
    ulp = op18.Pow(two, op18.Sub(op18.Max(exponent, lowest), op18.CastLike(10.0, x)))
    rounded = op18.Mul(op18.Round(op18.Div(x, ulp)), ulp)
    special = op18.Or(op18.IsNaN(x), op18.IsInf(x))
    return op18.Cast(op18.Where(special, x, rounded), to=FLOAT16.dtype)


@register_scalar(ps.Cast)
def cast(g, node, x):
    """Cast -> Cast (float64 -> float16 rounded once, like NumPy)."""
    src, dst = _dtype(node.inputs[0]), _dtype(node.outputs[0])
    if src == dst:
        return g.Identity(x)
    if (src, dst) == ("float64", "float16"):
        return inline(g, float64_to_float16, x)
    return g.Cast(x, to=onnx_dtype(dst))


# ---------------------------------------------------------------- unary


@register_scalar(ps.Abs)
def abs_(g, node, x):
    """Abs -> Abs (a bool is its own absolute value)."""
    return g.Identity(x) if _dtype(node.outputs[0]) == "bool" else g.Abs(x)


@register_scalar(ps.Sign)
def sign(g, node, x):
    """Sign -> Sign (NaN stays NaN)."""
    if _dtype(node.inputs[0]) == "float16":
        # ORT's float16 Sign gives 0 for NaN.
        return g.Where(g.IsNaN(x), x, g.Sign(x))
    return g.Sign(x)


@register_scalar(ps.Neg)
def neg(g, node, x):
    """Neg -> Neg (0 - x for unsigned integers, which wraps like NumPy)."""
    dtype = _dtype(node.outputs[0])
    return g.Sub(_const(g, 0, dtype), x) if dtype in UNSIGNED else g.Neg(x)


@register_scalar(ps.Sqr)
def sqr(g, node, x):
    """Sqr -> Mul(x, x) (a bool is its own square)."""
    return g.Identity(x) if _dtype(node.outputs[0]) == "bool" else g.Mul(x, x)


_UNARY = {
    ps.Ceil: "Ceil",
    ps.Floor: "Floor",
    ps.RoundHalfToEven: "Round",
    ps.Reciprocal: "Reciprocal",
    ps.Log: "Log",
    ps.Exp: "Exp",
    ps.Sqrt: "Sqrt",
    ps.Tanh: "Tanh",
}


@register_scalar(*_UNARY)
def onnx_unary(g, node, x):
    """Ceil, Floor, RoundHalfToEven, Reciprocal, Log, Exp, Sqrt, Tanh -> the ONNX op."""
    (x,) = cast_inputs_to_output(g, node, [x])
    return getattr(g, lookup(_UNARY, node.op))(x)


@script()
def trunc_(x: TFloat) -> TFloat:
    """Round toward zero; Ceil's -0.0 goes in Where's third input, which keeps its sign."""
    return op18.Where(op18.Greater(x, op18.CastLike(0, x)), op18.Floor(x), op18.Ceil(x))


@script()
def round_half_away_from_zero(x: TFloat) -> TFloat:
    """PyTensor's Python implementation: floor(x + 0.5) if x > 0 else ceil(x - 0.5)."""
    half = op18.CastLike(0.5, x)
    return op18.Where(
        op18.Greater(x, op18.CastLike(0, x)),
        op18.Floor(op18.Add(x, half)),
        op18.Ceil(op18.Sub(x, half)),
    )


@register_scalar(ps.Trunc)
def trunc(g, node, x):
    """Trunc -> Where(x > 0, Floor(x), Ceil(x))."""
    return inline(g, trunc_, *cast_inputs_to_output(g, node, [x]))


@register_scalar(ps.RoundHalfAwayFromZero)
def round_half_away(g, node, x):
    """RoundHalfAwayFromZero -> Where(x > 0, Floor(x + 0.5), Ceil(x - 0.5))."""
    return inline(g, round_half_away_from_zero, x)


_SCALED = {
    ps.Log2: ("Log", 1 / math.log(2.0)),
    ps.Log10: ("Log", 1 / math.log(10.0)),
    ps.Deg2Rad: (None, math.pi / 180.0),
    ps.Rad2Deg: (None, 180.0 / math.pi),
}


@register_scalar(*_SCALED)
def scaled(g, node, x):
    """Log2, Log10 -> Log(x) / ln 2, Log(x) / ln 10; Deg2Rad, Rad2Deg -> x * pi / 180, x * 180 / pi."""
    out = _dtype(node.outputs[0])
    (x,) = cast_inputs_to_output(g, node, [x])
    name, factor = lookup(_SCALED, node.op)
    return g.Mul(getattr(g, name)(x) if name else x, _const(g, factor, out))


@register_scalar(ps.Exp2)
def exp2(g, node, x):
    """Exp2 -> Pow(2, x)."""
    (x,) = cast_inputs_to_output(g, node, [x])
    return g.Pow(_const(g, 2.0, _dtype(node.outputs[0])), x)


# ---------------------------------------------------------------- Composite


@register_scalar(ps.Composite)
def composite(g, node, *inputs, broadcastable=None):
    """Composite -> its inner scalar graph, walked with the same scalar translations.

    Every output takes the broadcast shape of all inputs, as Elemwise gives it: an output
    that does not depend on some input is expanded by that input's shape. Given the
    `broadcastable` flags of the Elemwise's inputs (`elemwise_composite`), only where that
    input can make it larger: where it has a dim no input of the output has unless
    declared broadcastable (sizes elsewhere agree, checked by the runtime-broadcast guard).
    """
    fgraph = node.op.fgraph
    nodes, unused = _inner_graph(g, fgraph)
    outputs = translate_inner_graph(g, fgraph.inputs, fgraph.outputs, nodes, inputs, scalar=True)
    for i, missing in enumerate(unused):
        used = [k for k in range(len(inputs)) if k not in missing]
        for k in missing:
            if broadcastable is None or _grows(broadcastable, used, k):
                outputs[i] = g.Expand(outputs[i], g.Shape(inputs[k]))
    return outputs


def _grows(broadcastable, used: list[int], k: int) -> bool:
    """Whether input `k` of an Elemwise (its inputs' `broadcastable` flags) can make the
    broadcast of the `used` inputs larger: none is used (a constant output, 0-d), or input
    k has a dim that every used input declares broadcastable. Dims not declared
    broadcastable agree at run time (Elemwise refuses runtime broadcasting, and the
    translation guards it)."""
    if not used:
        return True
    return any(
        not flag and all(broadcastable[j][d] for j in used)
        for d, flag in enumerate(broadcastable[k])
    )


def elemwise_composite(g, node, inputs):
    """The outputs of Elemwise `node` of a Composite on `inputs` (guarded against runtime
    broadcasting): its inner graph, expanded only where an unused input can grow an output."""
    flags = [var.type.broadcastable for var in node.inputs]
    scalar = scalar_node(node)
    return composite(g, scalar, *inputs, broadcastable=flags)


def _inner_graph(g, fgraph) -> tuple[list, list[list[int]]]:
    """The inner nodes of a Composite's `fgraph` in order and, for each output, the inputs
    it does not depend on: found once per export for the many nodes of one Composite (a
    fused layer repeated), kept by the export's builder (by identity: PyTensor 3's frozen
    graphs compare equal by structure, with variables of their own)."""
    cache = g.builder.root.inner_graphs
    if id(fgraph) not in cache:
        unused = []
        for var in fgraph.outputs:
            used = set(ancestors([var]))
            unused.append([k for k, inner in enumerate(fgraph.inputs) if inner not in used])
        nodes = list(fgraph.toposort())
        g.builder.root.shared_logistic |= shared_logistic(nodes)
        cache[id(fgraph)] = (fgraph, nodes, unused)  # fgraph, its nodes: their ids stay
    return cache[id(fgraph)][1:]
