"""CumOp, Repeat, SearchsortedOp, Unique, FillDiagonal, FillDiagonalOffset, UnravelIndex,
RavelMultiIndex, Bartlett, CpuContiguous."""

import numpy as np
import onnx_ir as ir
from pytensor.tensor.extra_ops import (
    Bartlett,
    CpuContiguous,
    CumOp,
    FillDiagonal,
    FillDiagonalOffset,
    RavelMultiIndex,
    Repeat,
    SearchsortedOp,
    Unique,
    UnravelIndex,
)

from pt_onnxscript.ops.common import binary_search, constant, loop, raise_if, where
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.runtime_gaps import kernel_dtype
from pt_onnxscript.translate import TranslationError
from pt_onnxscript.types import onnx_dtype


def _flatten(g, x):
    return g.Reshape(x, constant(g, [-1], "int64"))


@register_check(CumOp)
def cumsum_dtype(node):
    dtype = node.outputs[0].type.dtype
    if node.op.mode == "add" and dtype == "float16":
        return f"no exact ONNX cumulative sum of {dtype}"
    return None


@register(CumOp)
def cumop(g, node, x):
    """CumOp -> CumSum (add); a Loop of running products (mul), as NumPy multiplies in order.
    Of bools (typed bool by PyTensor): a running OR (add) or AND (mul), from a CumSum of
    counts."""
    axis = node.op.axis
    if axis is None:
        x, axis = _flatten(g, x), 0
    dtype = node.outputs[0].type.dtype
    if dtype == "bool":
        return _running_or_and(g, x, axis, node.op.mode)
    if node.op.mode == "add":
        via = kernel_dtype("CumSum", dtype, keep="bits")  # wraps back like NumPy
        x = x if via == dtype else g.Cast(x, to=onnx_dtype(via))
        total = g.CumSum(x, constant(g, axis, "int64"))
        return total if via == dtype else g.Cast(total, to=onnx_dtype(dtype))
    return _cumprod(g, node, x, axis, node.outputs[0].type.ndim if node.op.axis is not None else 1)


def _running_or_and(g, x, axis: int, mode: str):
    """Running OR of `x` along `axis` (some True so far), or running AND (no False so far)."""
    marks = x if mode == "add" else g.Not(x)
    seen = g.Cast(
        g.CumSum(g.Cast(marks, to=ir.DataType.INT64), constant(g, axis, "int64")),
        to=ir.DataType.BOOL,
    )
    return seen if mode == "add" else g.Not(seen)


def _cumprod(g, node, x, axis: int, ndim: int):
    """Running products along `axis`: a Loop carrying the product, its steps as scan outputs."""
    perm = [axis] + [a for a in range(ndim) if a != axis]
    front = g.Transpose(x, perm=perm) if axis else x
    dtype = onnx_dtype(node.outputs[0].type.dtype)
    ones = g.Expand(constant(g, 1, node.outputs[0].type.dtype), g.Shape(front, start=1))

    def step(g, i, product):
        product = g.Mul(product, g.Gather(front, i, axis=0))
        return [product, g.Identity(product)]

    count = g.Squeeze(g.Shape(front, start=0, end=1), constant(g, [0], "int64"))
    _, steps = loop(g, count, [ones], step, "cumprod", stacked=[dtype])
    # With no steps the scan output has no shape of its own: give it the input's.
    steps = g.Reshape(steps, g.Shape(front), allowzero=1)
    if not axis:
        return steps
    inverse = sorted(range(ndim), key=perm.__getitem__)
    return g.Transpose(steps, perm=inverse)


@register(Repeat)
def repeat(g, node, x, repeats):
    """Repeat -> Gather of each element's index, repeated: the running count of boundaries.

    As NumPy's repeat: a scalar or one repeat applies to every element; other repeats must be
    one per element and not negative (ValueError)."""
    axis = node.op.axis
    if axis is None:
        x, axis = _flatten(g, x), 0
    repeats = g.Cast(repeats, to=ir.DataType.INT64)
    count = g.Shape(x, start=axis, end=axis + 1)
    if node.inputs[1].type.ndim == 1 and node.inputs[1].type.shape[0] != 1:
        length = g.Shape(repeats)
        one_each = g.Or(g.Equal(length, count), g.Equal(length, constant(g, [1], "int64")))
        smallest = g.ReduceMin(g.Concat(repeats, constant(g, [0], "int64"), axis=0), keepdims=0)
        negative = g.Less(smallest, constant(g, 0, "int64"))
        repeats = raise_if(
            g,
            [g.Not(one_each), negative],
            repeats,
            ValueError,
            f"{node.op}: the repeats must be one, or one per element along the axis, and not "
            "negative",
        )
    repeats = g.Expand(repeats, count)
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    ends = g.CumSum(repeats, zero)
    total = g.ReduceSum(repeats, keepdims=1)
    # A mark at each element's end (an extra slot takes the ends equal to the total).
    marks = g.Expand(zero, g.Add(total, one))
    marks = g.ScatterElements(marks, ends, g.Expand(one, g.Shape(ends)), axis=0, reduction="add")
    index = g.CumSum(
        g.Slice(marks, constant(g, [0], "int64"), total, constant(g, [0], "int64")), zero
    )
    return g.Gather(x, index, axis=axis)


def _before(g, a, b, side: str):
    """a comes before b in NumPy's order (NaN last): a < b (left) or a <= b (right)."""
    if side == "left":
        return g.Or(g.Less(a, b), g.And(g.IsNaN(b), g.Not(g.IsNaN(a))))
    return g.Or(g.LessOrEqual(a, b), g.IsNaN(b))


@register_check(SearchsortedOp)
def searchsorted_dtypes(node):
    x, v = (var.type.dtype for var in node.inputs[:2])
    return None if x == v else f"x is {x} and v is {v}: cast them to one dtype"


# Up to this many x (static), each v is compared with all of them. Measured on one thread,
# 100,000 float64 v, compared against binary search: 8 x 3.5 against 7.0 ms; 64 x 35 against
# 14 ms; 1,000 x 3.2 s (a (100,000, 1,000) comparison in memory) against 21 ms.
COUNTED = 16


@register(SearchsortedOp)
def searchsorted(g, node, x, v, sorter=None):
    """SearchsortedOp -> the count of the x before each v where x is short (at most COUNTED,
    static), else NumPy's binary search of each v (log2(len(x)) gathers per v)."""
    if sorter is not None:
        x = g.Gather(x, sorter, axis=0)
    side, length, dtype = node.op.side, node.inputs[0].type.shape[0], node.inputs[0].type.dtype
    # ONNX Runtime compares no bools: as the narrowest dtype it compares
    via = kernel_dtype("Less" if side == "left" else "LessOrEqual", dtype)
    if via != dtype:
        x, v = (g.Cast(a, to=onnx_dtype(via)) for a in (x, v))

    def before(g, a, b):
        if dtype.startswith("float"):
            return _before(g, a, b, side)
        return g.Less(a, b) if side == "left" else g.LessOrEqual(a, b)

    if length is not None and length <= COUNTED:
        counted = g.Cast(
            before(g, x, g.Unsqueeze(v, constant(g, [-1], "int64"))), to=ir.DataType.INT64
        )
        return g.ReduceSum(counted, constant(g, [-1], "int64"), keepdims=0)
    keys = g.Reshape(v, constant(g, [-1], "int64"))
    return g.Reshape(binary_search(g, x, keys, before, length), g.Shape(v))


def _diagonal_mask(g, a, offset):
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    rows = g.Range(zero, g.Squeeze(g.Shape(a, start=0, end=1), constant(g, [0], "int64")), one)
    cols = g.Range(zero, g.Squeeze(g.Shape(a, start=1, end=2), constant(g, [0], "int64")), one)
    rows = g.Unsqueeze(rows, constant(g, [1], "int64"))
    return g.Equal(g.Sub(cols, rows), offset)


@register(FillDiagonal)
def fill_diagonal(g, node, a, value):
    """FillDiagonal -> Where(row == col, value, a) (matrices)."""
    if node.inputs[0].type.ndim != 2:
        raise TranslationError(f"{node}: only matrices are supported")
    dtype = node.outputs[0].type.dtype
    value = value if node.inputs[1].type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))
    return where(
        g, _diagonal_mask(g, a, constant(g, 0, "int64")), g.Expand(value, g.Shape(a)), a, dtype
    )


@register(FillDiagonalOffset)
def fill_diagonal_offset(g, node, a, value, offset):
    """FillDiagonalOffset -> Where(col - row == offset, value, a)."""
    dtype = node.outputs[0].type.dtype
    value = value if node.inputs[1].type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))
    mask = _diagonal_mask(g, a, g.Cast(offset, to=ir.DataType.INT64))
    return where(g, mask, g.Expand(value, g.Shape(a)), a, dtype)


@register_check(Unique)
def unique_dtype(node):
    if node.inputs[0].type.dtype == "uint64":
        return "no ONNX Runtime Unique keeps the order of uint64"
    return None


@register(Unique)
def unique(g, node, x):
    """Unique -> Unique(sorted=1): values, first indices, inverse and counts, as np.unique.

    Floats are flattened into (is NaN, value or 0) rows: NaNs then count as one value, last,
    as np.unique has them (ONNX Runtime's Unique mishandles NaN).
    """
    op = node.op
    dtype = node.inputs[0].type.dtype
    if op.axis is None and dtype.startswith("float"):
        flat = g.Reshape(x, constant(g, [-1], "int64"))
        nan = g.IsNaN(flat)
        column = constant(g, [1], "int64")
        rows = g.Concat(
            g.Unsqueeze(g.Cast(nan, to=onnx_dtype(dtype)), column),
            g.Unsqueeze(g.Where(nan, constant(g, 0, dtype), flat), column),
            axis=1,
        )
        keys, first, inverse, counts = g.Unique(rows, sorted=1, axis=0, _outputs=4)
        flags, numbers = (g.Gather(keys, constant(g, k, "int64"), axis=1) for k in (0, 1))
        values = g.Where(
            g.Greater(flags, constant(g, 0, dtype)), constant(g, np.nan, dtype), numbers
        )
    else:
        via = kernel_dtype("Unique", dtype)
        kwargs = {} if op.axis is None else {"axis": op.axis}
        keys = x if via == dtype else g.Cast(x, to=onnx_dtype(via))
        values, first, inverse, counts = g.Unique(keys, sorted=1, _outputs=4, **kwargs)
        values = values if via == dtype else g.Cast(values, to=onnx_dtype(dtype))
    wanted = [values]
    wanted += [first] if op.return_index else []
    wanted += [inverse] if op.return_inverse else []
    wanted += [counts] if op.return_counts else []
    return wanted


@register(CpuContiguous)
def cpu_contiguous(g, node, x):
    """CpuContiguous -> Identity: ONNX values have no memory layout."""
    return g.Identity(x)


@register(Bartlett)
def bartlett(g, node, m):
    """Bartlett -> np.bartlett(M): n = arange(1 - M, M, 2), 1 + n / (M - 1) where n <= 0, else
    1 - n / (M - 1); [1.0] for M = 1, empty for M < 1."""
    m = g.Cast(m, to=ir.DataType.INT64)
    n = g.Cast(
        g.Range(g.Sub(constant(g, 1, "int64"), m), m, constant(g, 2, "int64")),
        to=ir.DataType.DOUBLE,
    )
    one = constant(g, 1, "float64")
    scale = g.Sub(g.Cast(m, to=ir.DataType.DOUBLE), one)
    ratio = g.Div(n, scale)
    window = g.Where(
        g.LessOrEqual(n, constant(g, 0, "float64")), g.Add(one, ratio), g.Sub(one, ratio)
    )
    return g.Where(g.Equal(m, constant(g, 1, "int64")), g.Expand(one, g.Shape(n)), window)


def _strides(count: int, order: str):
    """Which dims multiply into each axis's stride: those after it (C order) or before (F)."""
    return [range(k + 1, count) if order == "C" else range(k) for k in range(count)]


def _dims(g, dims, count: int):
    """The `count` entries of the int vector `dims`, as 0-d int64 values."""
    dims = g.Cast(dims, to=ir.DataType.INT64)
    return [g.Gather(dims, constant(g, k, "int64"), axis=0) for k in range(count)]


def _product(g, values):
    """The product of the 0-d int64 `values` (1 for none)."""
    if not values:
        return constant(g, 1, "int64")
    result, *rest = values
    for value in rest:
        result = g.Mul(result, value)
    return result


@register(UnravelIndex)
def unravel_index(g, node, indices, dims):
    """UnravelIndex -> the coordinates (index // stride) % dim for each axis (strides the
    products of the later dims, or of the earlier ones in F order); NumPy's ValueError where an
    index is outside [0, prod(dims))."""
    count = len(node.outputs)
    sizes = _dims(g, dims, count)
    index = g.Cast(indices, to=ir.DataType.INT64)
    zero = constant(g, 0, "int64")
    outside = g.Or(g.Less(index, zero), g.GreaterOrEqual(index, _product(g, sizes)))
    message = "index out of bounds in unravel_index: each index must be in [0, prod(dims))"
    index = raise_if(g, outside, index, ValueError, message)
    one = constant(g, 1, "int64")
    coordinates = []
    for k, later in enumerate(_strides(count, node.op.order)):
        # Max(.., 1): no division by a zero dim (its indices are all out of bounds and raise)
        stride = g.Max(_product(g, [sizes[j] for j in later]), one)
        coordinates.append(g.Mod(g.Div(index, stride), g.Max(sizes[k], one)))
    return coordinates


@register(RavelMultiIndex)
def ravel_multi_index(g, node, *inputs):
    """RavelMultiIndex -> the sum of each coordinate times its stride, the coordinates first
    wrapped or clipped into [0, dim) (mode "wrap", "clip") or checked (mode "raise": NumPy's
    ValueError for one outside)."""
    *multi_index, dims = inputs
    count = len(multi_index)
    sizes = _dims(g, dims, count)
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    coordinates, outside = [], []
    for coordinate, size in zip(multi_index, sizes, strict=True):
        coordinate = g.Cast(coordinate, to=ir.DataType.INT64)
        if node.op.mode == "wrap":
            coordinate = g.Mod(coordinate, g.Max(size, one))
        elif node.op.mode == "clip":
            coordinate = g.Max(g.Min(coordinate, g.Sub(size, one)), zero)
        else:
            outside.append(g.Or(g.Less(coordinate, zero), g.GreaterOrEqual(coordinate, size)))
        coordinates.append(coordinate)
    strides = _strides(count, node.op.order)
    flat, *terms = (
        g.Mul(coordinate, _product(g, [sizes[j] for j in k]))
        for k, coordinate in zip(strides, coordinates, strict=True)
    )
    for term in terms:
        flat = g.Add(flat, term)
    if outside:
        message = "invalid entry in coordinates array (ravel_multi_index with mode='raise')"
        flat = raise_if(g, outside, flat, ValueError, message)
    return flat
