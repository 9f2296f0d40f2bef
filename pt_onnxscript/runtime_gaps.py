"""What ONNX Runtime's CPU execution provider cannot do, in one place.

Translations ask this module instead of keeping their own dtype tables:

- ``has_kernel(op_type, dtype)``: whether the CPU provider has a kernel of `op_type` (at opset
  18) for operands of PyTensor dtype `dtype`;
- ``kernel_dtype(op_type, dtype, keep=...)``: the dtype to compute in where it has none: the
  narrowest one with a kernel that holds every value of `dtype` (``keep="values"``: values and
  their order), or the same bits modulo 2**n (``keep="bits"``: for selections and wrapping
  integer arithmetic);
- ``QUIRKS``: kernels that exist but compute something else than NumPy, each with the way
  the translations work around it.

The facts were probed on onnxruntime 1.32.0 (CPU, opset 18); `tests/test_runtime_gaps.py`
probes the installed ONNX Runtime again, so an upgrade that adds or drops a kernel, or fixes
a quirk, fails there and names the entry to change. The kernels are registered in
onnxruntime/core/providers/cpu/cpu_execution_provider.cc (the files named below define them).
"""

from dataclasses import dataclass

import numpy as np

DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)

_INTEGERS = frozenset(d for d in DTYPES if d[0] in "iu")
_NARROW = frozenset({"bool", "int8", "int16", "uint8", "uint16"})
_UNSIGNED = frozenset(d for d in DTYPES if d.startswith("u"))
_NOT_FLOAT = frozenset({"bool"}) | _INTEGERS
_ALL_BUT_FLOAT64 = frozenset({"float64"}) | _NOT_FLOAT


@dataclass(frozen=True)
class Kernels:
    """The PyTensor dtypes `op_type` has no CPU kernel for, and where its kernels live."""

    missing: frozenset[str]
    source: str


def _kernels(missing, source: str) -> Kernels:
    return Kernels(frozenset(missing), f"onnxruntime/core/providers/cpu/{source}")


# Only the dtypes a translation can meet: an op PyTensor never feeds bool (Exp, ...) may
# well lack it too, and is not listed for that.
KERNELS: dict[str, Kernels] = {
    "Where": _kernels({"bool", "int16", "uint16", "uint64"}, "tensor/where_op.cc"),
    "Less": _kernels({"bool"}, "math/element_wise_ops.cc"),
    "Greater": _kernels({"bool"}, "math/element_wise_ops.cc"),
    "LessOrEqual": _kernels({"bool"}, "math/element_wise_ops.cc"),
    "GreaterOrEqual": _kernels({"bool"}, "math/element_wise_ops.cc"),
    "Max": _kernels({"bool", "int16", "uint16"}, "math/element_wise_ops.cc"),
    "Min": _kernels({"bool", "int16", "uint16"}, "math/element_wise_ops.cc"),
    "ReduceSum": _kernels(_NARROW | {"uint32", "uint64"}, "reduction/reduction_ops.cc"),
    "ReduceProd": _kernels(_NARROW | {"uint32", "uint64"}, "reduction/reduction_ops.cc"),
    "ReduceMax": _kernels(
        {"bool", "int16", "uint16", "uint32", "uint64"}, "reduction/reduction_ops.cc"
    ),
    "ReduceMin": _kernels(
        {"bool", "int16", "uint16", "uint32", "uint64"}, "reduction/reduction_ops.cc"
    ),
    "ArgMax": _kernels(
        {"bool", "int16", "uint16", "uint32", "uint64"}, "reduction/reduction_ops.cc"
    ),
    "ArgMin": _kernels(
        {"bool", "int16", "uint16", "uint32", "uint64"}, "reduction/reduction_ops.cc"
    ),
    "MatMul": _kernels(_NARROW, "math/matmul.cc"),
    "CumSum": _kernels(_NARROW | {"uint32", "uint64"}, "math/cumsum.cc"),
    "TopK": _kernels({"bool", "uint16", "uint32", "uint64"}, "math/top_k.cc"),
    "Unique": _kernels(_NARROW - {"int8"} | {"int32", "uint32", "uint64"}, "tensor/unique.cc"),
    # float16 from IsInf-20 on (opsets.at_least chooses it); IsInf-10's schema has none.
    "IsInf": _kernels(_NOT_FLOAT | {"float16"}, "tensor/isinf.cc"),
    "NonZero": _kernels(
        {"int8", "int16", "uint16", "uint32", "uint64", "float64"}, "tensor/nonzero_op.cc"
    ),
    "Conv": _kernels(_ALL_BUT_FLOAT64, "nn/conv.cc"),
    "Det": _kernels(_ALL_BUT_FLOAT64, "math/det.cc"),
    **{
        name: _kernels(_ALL_BUT_FLOAT64, "math/element_wise_ops.cc")
        for name in ("Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh")
    },
    "Erf": _kernels(_ALL_BUT_FLOAT64, "math/element_wise_ops.cc"),
}


def has_kernel(op_type: str, dtype: str) -> bool:
    """Whether ONNX Runtime's CPU provider runs `op_type` on operands of `dtype`."""
    kernels = KERNELS.get(op_type)
    return kernels is None or dtype not in kernels.missing


def _holds(wide: str, dtype: str) -> bool:
    """Whether every value of `dtype` is exactly a value of `wide` (in the same order)."""
    source, target = np.dtype(dtype), np.dtype(wide)
    if dtype == "bool":
        return True
    if source.kind == "f":
        return target.kind == "f" and target.itemsize >= source.itemsize
    if target.kind == "f":  # an integer: does the significand hold all its bits?
        return np.finfo(target).nmant + 1 >= 8 * source.itemsize - (source.kind == "i")
    return np.can_cast(source, target, casting="safe")


def _wider(dtype: str, keep: str) -> list[str]:
    """Candidate dtypes for `dtype`: integers before floats, narrowest first, the same
    signedness first: those holding all its values, or (``keep="bits"``) the integers at least
    as wide, which keep its bits modulo 2**n."""
    if keep == "values":
        candidates = [d for d in DTYPES if d != dtype and _holds(d, dtype)]
    elif keep == "bits":
        width = np.dtype(dtype).itemsize
        candidates = (
            [d for d in _INTEGERS if d != dtype and np.dtype(d).itemsize >= width]
            if dtype in _INTEGERS | {"bool"}
            else [d for d in DTYPES if d != dtype and _holds(d, dtype)]
        )
    else:
        raise ValueError(f'keep must be "values" or "bits", not {keep!r}')
    unsigned = dtype in _UNSIGNED or dtype == "bool"
    floats_last = np.dtype(dtype).kind != "f"

    def order(d):
        wide = np.dtype(d)
        return floats_last and wide.kind == "f", wide.itemsize, (d in _UNSIGNED) != unsigned

    return sorted(candidates, key=order)


def kernel_dtype(op_type: str, dtype: str, keep: str = "values") -> str:
    """`dtype` where ONNX Runtime has an `op_type` kernel for it; otherwise the narrowest dtype
    with one that keeps what `keep` says (see the module docstring)."""
    if has_kernel(op_type, dtype):
        return dtype
    for candidate in _wider(dtype, keep):
        if has_kernel(op_type, candidate):
            return candidate
    raise ValueError(
        f"ONNX Runtime has no {op_type} kernel for {dtype}, nor for a dtype that keeps its {keep}"
    )


@dataclass(frozen=True)
class Quirk:
    """A kernel that exists but differs from NumPy, and what the translations do about it."""

    op_type: str
    what: str
    workaround: str
    shown_by: str = "tests/test_runtime_gaps.py"  # the test that fails once it is fixed


QUIRKS: dict[str, Quirk] = {
    "where_negative_zero": Quirk(
        "Where",
        "turns a -0.0 taken from its second input into +0.0 (its third input keeps it)",
        "ops.common.where puts a constant without -0.0 second, or restores the sign",
    ),
    "not_where_fusion": Quirk(
        "Where",
        "its graph optimizer rewrites Where(Not(c), x, y) into Where(c, y, x), moving y to "
        "where a -0.0 is lost",
        "ops.common.negate writes Not(c) as Xor(c, True) for Where's condition",
    ),
    "integer_reduce_saturates": Quirk(
        "ReduceSum",
        "int64 ReduceSum and ReduceProd saturate instead of wrapping",
        "integer sums run as MatMul with ones, products as a tree of Mul (ops/math.py)",
    ),
    "unsigned_matmul_empty": Quirk(
        "MatMul",
        "the unsigned MatMul kernels fail when the inner dimension is 0",
        "unsigned products run in int64 (same bits modulo 2**64)",
    ),
    "unique_nan": Quirk(
        "Unique",
        "NaNs are not one value (np.unique puts them last, as one)",
        "float Unique sorts (is NaN, value) rows (ops/extra_ops.py)",
    ),
    "float16_sign_nan": Quirk(
        "Sign",
        "the float16 Sign of NaN is 0, not NaN",
        "Sign puts NaN back (ops/scalar/basic.py)",
    ),
    "float16_scatter_add": Quirk(
        "ScatterElements",
        "no float16 kernel with reduction='add' (it fails at run time)",
        "float16 increments at repeated indices are refused before export",
    ),
    "expand_to_constant_empty": Quirk(
        "Expand",
        "the graph optimizer drops an Expand to a constant shape that holds a 0",
        "Alloc to a constant 0 size uses ConstantOfShape (ops/basic.py)",
        "tests/test_basic.py::test_alloc_with_a_constant_zero_size_survives_onnx_runtimes_optimizer",
    ),
    "pad_axes_transpose": Quirk(
        "Pad",
        "its transpose optimizer, moving a Transpose through a Pad that has the `axes` input, "
        "permutes the pads as if they covered every axis (the Pad then fails or pads the "
        "wrong axis)",
        "ops.common.pad_zeros pads by Concat with zeros; no Pad with `axes`",
    ),
    "float64_sin_cos": Quirk(
        "Sin",
        "float64 Sin and Cos lose their relative accuracy near their zeros",
        "float64 sin and cos below 2**20 use fdlibm's kernels (ops/scalar/math.py)",
    ),
    "noop_elimination_float32_unit": Quirk(
        "Mul",
        "its graph optimizer (NoopElimination) drops x + c, x - c, x * c and x / c for a "
        "float64 constant c of one element that is 0 or 1 once rounded to float32 "
        "(log(abs(x) + 1e-300) is -inf at 0, x * (1 + 4e-8) is x)",
        "optimize.shield_unit_like_constants reads such a c through Where(IsNaN(x), c, c)",
    ),
    "reduce_max_skips_nan": Quirk(
        "ReduceMax",
        "ReduceMax and ReduceMin skip a NaN that is not the first element of what they reduce "
        "([4, nan] -> 4; NumPy's max and min give NaN)",
        "float max and min put NaN back where the reduced slice holds one (ops/math.py)",
    ),
    "max_pool_skips_nan": Quirk(
        "MaxPool",
        "MaxPool skips a NaN in a window in most positions (float64: unless it comes "
        "first), where PyTensor's max over the reshaped windows gives NaN",
        "none: Pool2d (rewrites.py) keeps MaxPool, as torch.onnx's exports do and as PyTensor "
        "3.0's Numba mode also skips NaN; putting NaN back (a second pooling that finds "
        "the NaNs, and a Where) took 1.3-1.4x the digits CNN's time at batch 1, 2x at 64",
    ),
    "log_softmax_non_finite": Quirk(
        "LogSoftmax",
        "LogSoftmax of a slice holding NaN or +inf is finite in places ([1, 2, nan] -> "
        "[45.05, 46.05, nan]) where PyTensor's compiled modes give NaN all along it",
        "LogSoftmax is x - max - log(sum(exp(x - max))), PyTensor's own form (ops/special.py)",
    ),
    "concat_skips_empty": Quirk(
        "Concat",
        "Concat skips an empty input without checking its other dims ((2, 3) and (0, 2) "
        "along axis 0 give the (2, 3) one; NumPy raises)",
        "Join checks the other dims where they are not known equal (ops/basic.py)",
    ),
    "div_mul_fusion": Quirk(
        "Div",
        "its graph optimizer (DivMulFusion) rewrites Mul(Div(1, x), y) into Div(y, x), one "
        "rounding for two",
        "optimize.reciprocal writes Div(1, x) as Reciprocal(x), the same value",
    ),
    "matmul_transpose_vector": Quirk(
        "MatMul",
        "its graph optimizer (MatmulTransposeFusion) makes MatMul(Transpose(a), b), the "
        "Transpose swapping a's last two axes and b a vector, a FusedMatMul that computes a "
        "wrong product (every entry of x.T @ v for a 5 x 4 x)",
        "optimize.vector_times_matrix writes it MatMul(b, a), the same product",
    ),
}
