"""Subtensor, AdvancedSubtensor(1) and the IncSubtensor family: NumPy indexing in ONNX.

Reading follows NumPy: slices become one Slice, integer indices a Gather each, a single
index array a Gather, several broadcast index arrays (boolean masks as their NonZero
indices) a GatherND. Writing applies the same indexing to the flat positions of x and
scatters into them, so every indexing form reads and writes the same elements.
"""

from dataclasses import dataclass
from functools import reduce

import numpy as np
import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.scalar.basic import ScalarType
from pytensor.tensor.subtensor import (
    AdvancedIncSubtensor,
    AdvancedIncSubtensor1,
    AdvancedSubtensor,
    AdvancedSubtensor1,
    IncSubtensor,
    Subtensor,
    indices_from_subtensor,
)
from pytensor.tensor.type_other import MakeSlice, NoneTypeT, SliceType

from pt_onnxscript.ops.common import INT64_MAX, INT64_MIN, constant, loop, raise_if, where
from pt_onnxscript.registry import register, register_check
from pt_onnxscript.translate import StaticValue, TranslationError
from pt_onnxscript.types import onnx_dtype


@dataclass(frozen=True)
class Bound:
    """An integer index or slice bound: its value when static, else its ONNX value."""

    static: int | None
    value: ir.Value | None = None

    def as_1d(self, g):
        if self.static is not None:
            return constant(g, [self.static], "int64")
        return g.Reshape(_int64(g, self.value), constant(g, [1], "int64"))

    def as_0d(self, g):
        if self.static is not None:
            return constant(g, self.static, "int64")
        return _int64(g, self.value)


@dataclass(frozen=True)
class Slice(StaticValue):
    start: Bound | None
    stop: Bound | None
    step: Bound | None

    def is_full(self) -> bool:
        return self.start is None and self.stop is None and self.step in (None, Bound(1))


@dataclass(frozen=True)
class Array:
    """An integer index array (or an integer mixed with arrays), or a boolean mask."""

    value: ir.Value
    shape: tuple[int | None, ...]
    mask: bool

    @property
    def consumed(self) -> int:
        """How many dims of x it indexes."""
        return len(self.shape) if self.mask else 1


class NewAxis:
    pass


def _int64(g, value):
    return value if value.dtype == ir.DataType.INT64 else g.Cast(value, to=ir.DataType.INT64)


def _bound(var, value) -> Bound | None:
    if var is None or isinstance(var.type, NoneTypeT):
        return None
    if isinstance(var, Constant):
        return Bound(int(var.data))
    return Bound(None, value)


def _slice_bound(item, values) -> Bound | None:
    """A bound of a slice entry: a Variable, a Python int or None."""
    if item is None or isinstance(item, int | np.integer):
        return None if item is None else Bound(int(item))
    return _bound(item, values.get(item))


def _entries(node, index_vars, index_values):
    """The index of each entry of the PyTensor index tuple of `node`."""
    values = dict(zip(index_vars, index_values, strict=True))
    indices = indices_from_subtensor(index_vars, getattr(node.op, "idx_list", None))
    advanced = not isinstance(node.op, Subtensor | IncSubtensor)
    entries = []
    for item in indices:
        if isinstance(item, slice):
            entries.append(
                Slice(*(_slice_bound(b, values) for b in (item.start, item.stop, item.step)))
            )
        elif isinstance(item.type, NoneTypeT):
            entries.append(NewAxis())
        elif isinstance(item.type, SliceType):
            entries.append(_slice_variable(item, values.get(item)))
        elif advanced and not isinstance(item.type, ScalarType):
            entries.append(Array(values[item], item.type.shape, item.type.dtype == "bool"))
        else:
            entries.append(_bound(item, values.get(item)))
    return entries


def _slice_variable(var, value) -> Slice:
    """A slice-typed input (PyTensor 2.38's advanced indexing): constant or from MakeSlice."""
    if isinstance(var, Constant):
        return Slice(
            *(
                None if b is None else Bound(int(b))
                for b in (var.data.start, var.data.stop, var.data.step)
            )
        )
    return value


@register(MakeSlice)
def make_slice(g, node, *inputs):
    """MakeSlice -> no ONNX value: the slice's bounds, read by the indexing op that uses it."""
    bounds = [_bound(var, value) for var, value in zip(node.inputs, inputs, strict=True)]
    return Slice(*bounds, *([None] * (3 - len(bounds))))


def _slice_bounds(g, x, axis: int, dim: int | None, s: Slice):
    """ONNX Slice's start, end and step for `s` on `axis` (1-d int64 values), NumPy's semantics."""
    step = s.step or Bound(1)
    if step.static == 0:
        raise TranslationError("slice step cannot be zero")
    negative = None if step.static is None else step.static < 0

    def default(positive_value, negative_value):
        if negative is not None:
            return constant(g, [negative_value if negative else positive_value], "int64")
        return g.Where(
            g.Less(step.as_1d(g), constant(g, [0], "int64")),
            constant(g, [negative_value], "int64"),
            constant(g, [positive_value], "int64"),
        )

    start = default(0, INT64_MAX) if s.start is None else s.start.as_1d(g)
    stop = default(INT64_MAX, INT64_MIN) if s.stop is None else s.stop.as_1d(g)
    # With a negative step, NumPy gives nothing for a start below -n; ONNX clamps it to 0.
    may_start_below = s.start is not None and (
        s.start.static is None or s.start.static < 0 and (dim is None or s.start.static < -dim)
    )
    if negative is not False and may_start_below:
        n = g.Shape(x, start=axis, end=axis + 1)
        below = g.Less(start, g.Neg(n))
        if negative is None:
            below = g.And(below, g.Less(step.as_1d(g), constant(g, [0], "int64")))
        zero = constant(g, [0], "int64")
        start, stop = g.Where(below, zero, start), g.Where(below, zero, stop)
    return start, stop, step.as_1d(g)


def _basic(g, x, static_shape, entries):
    """Apply slices (Slice) and integer indices (Gather); entries cover the first dims of x."""
    sliced = [
        (axis, entry)
        for axis, entry in enumerate(entries)
        if isinstance(entry, Slice) and not entry.is_full()
    ]
    if sliced:
        bounds = [_slice_bounds(g, x, axis, static_shape[axis], entry) for axis, entry in sliced]
        starts, stops, steps = (g.Concat(*parts, axis=0) for parts in zip(*bounds))
        axes = constant(g, [axis for axis, _ in sliced], "int64")
        x = g.Slice(x, starts, stops, axes, steps)
    integers = [(axis, entry) for axis, entry in enumerate(entries) if isinstance(entry, Bound)]
    for axis, entry in reversed(integers):
        x = g.Gather(x, entry.as_0d(g), axis=axis)
    return x


def _check_dims(g, mask_shape, x_shape):
    """Zero (int64) that makes ONNX Runtime raise unless the two shapes are equal."""
    mismatch = g.ReduceSum(g.Abs(g.Sub(mask_shape, x_shape)), keepdims=0)
    return g.Gather(constant(g, [0], "int64"), mismatch, axis=0)


def _index_arrays(g, x, static_shape, dims):
    """(axis, int64 index array, ndim) per indexed dim; a mask gives its NonZero coordinates."""
    arrays = []
    for axis, entry in dims:
        if not isinstance(entry, Array):
            continue
        if not entry.mask:
            arrays.append((axis, _int64(g, entry.value), len(entry.shape)))
            continue
        if not entry.shape:
            raise TranslationError("indexing with a 0-d boolean is not supported")
        coords = g.NonZero(entry.value)
        x_dims = static_shape[axis : axis + len(entry.shape)]
        if None in x_dims or x_dims != entry.shape:
            # NumPy raises when the mask's shape differs from the dims it indexes.
            x_shape = g.Shape(x, start=axis, end=axis + len(entry.shape))
            coords = g.Add(coords, _check_dims(g, g.Shape(entry.value), x_shape))
        for k in range(len(entry.shape)):
            arrays.append((axis + k, g.Gather(coords, constant(g, k, "int64"), axis=0), 1))
    return arrays


def _advanced(g, x, static_shape, entries):
    """NumPy's advanced indexing: newaxis and slices first, then the broadcast index arrays."""
    static_shape = tuple(static_shape)
    dims: list[tuple[int, Slice | Array]] = []
    axis = 0
    for entry in entries:
        if isinstance(entry, NewAxis):
            x = g.Unsqueeze(x, constant(g, [axis], "int64"))
            static_shape = static_shape[:axis] + (1,) + static_shape[axis:]
            entry = Slice(None, None, None)
        elif isinstance(entry, Bound):
            # An integer among index arrays is a 0-d index array, broadcast with them.
            entry = Array(entry.as_0d(g), (), False)
        dims.append((axis, entry))
        axis += entry.consumed if isinstance(entry, Array) else 1
    per_axis = [e for _, e in dims for _ in range(e.consumed if isinstance(e, Array) else 1)]
    x = _basic(g, x, static_shape, [e if isinstance(e, Slice) else FULL for e in per_axis])
    arrays = _index_arrays(g, x, static_shape, dims)
    if len(arrays) == 1:
        ((axis, index, index_ndim),) = arrays
        return take(g, x, index, axis, len(static_shape), index_ndim)
    axes = [axis for axis, _, _ in arrays]
    others = [axis for axis in range(len(static_shape)) if axis not in axes]
    if axes + others != sorted(axes + others):
        x = g.Transpose(x, perm=axes + others)
    indices = [index for _, index, _ in arrays]
    zero = g.Mul(reduce(g.Add, indices), constant(g, 0, "int64"))
    last = constant(g, [-1], "int64")
    result = g.GatherND(x, g.Concat(*(g.Unsqueeze(g.Add(i, zero), last) for i in indices), axis=-1))
    if axes == list(range(axes[0], axes[0] + len(axes))) and axes[0] > 0:
        # NumPy puts the dims of adjacent index arrays where the dims they index were.
        batch = max(ndim for _, _, ndim in arrays)
        perm = [
            *range(batch, batch + axes[0]),
            *range(batch),
            *range(batch + axes[0], batch + len(others)),
        ]
        result = g.Transpose(result, perm=perm)
    return result


FULL = Slice(None, None, None)


@register(Subtensor)
def subtensor(g, node, x, *indices):
    """Subtensor -> one Slice for the slices, a Gather per integer index."""
    return _basic(g, x, node.inputs[0].type.shape, _entries(node, node.inputs[1:], indices))


@register(AdvancedSubtensor1)
def advanced_subtensor1(g, node, x, index):
    """AdvancedSubtensor1 -> Gather on axis 0 (GatherElements for a vector)."""
    return take(g, x, _int64(g, index), 0, node.inputs[0].type.ndim, node.inputs[1].type.ndim)


def take(g, x, index, axis: int, ndim: int, index_ndim: int):
    """x[..., index, ...] on `axis`: GatherElements when x and the index are vectors (ONNX
    Runtime's Gather copies element by element: 6x slower on 5,000 indices), else Gather.
    Both reject an index out of bounds."""
    if ndim == 1 and index_ndim == 1:
        return g.GatherElements(x, index, axis=0)
    return g.Gather(x, index, axis=axis)


@register(AdvancedSubtensor)
def advanced_subtensor(g, node, x, *indices):
    """AdvancedSubtensor -> Slice, then Gather (one index array) or GatherND (several)."""
    return _advanced(g, x, node.inputs[0].type.shape, _entries(node, node.inputs[1:], indices))


def _flat_positions(g, x):
    """The flat position of every element of x, shaped like x."""
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    return g.Reshape(g.Range(zero, g.Size(x), one), g.Shape(x), allowzero=1)


def _add(g, a, b, dtype):
    return g.Or(a, b) if dtype == "bool" else g.Add(a, b)


def _scatter_last(g, x, positions, values):
    """x with x[positions[k]] = values[k], the last k winning where positions repeat."""
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    count = g.Size(positions)
    nothing = g.Expand(constant(g, -1, "int64"), g.Shape(x))
    winner = g.ScatterElements(
        nothing, positions, g.Range(zero, count, one), axis=0, reduction="max"
    )
    # Unwritten elements take themselves from x, placed after the values.
    own = g.Add(g.Range(zero, g.Size(x), one), count)
    picked = g.Where(g.Less(winner, zero), own, winner)
    return take(g, g.Concat(values, x, axis=0), picked, axis=0, ndim=1, index_ndim=1)


def _scatter_add(g, x, positions, values, dtype):
    """x with values[k] added at positions[k], repeated positions accumulating (np.add.at)."""
    if dtype == "bool":
        x64, v64 = (g.Cast(v, to=ir.DataType.INT64) for v in (x, values))
        total = g.ScatterElements(x64, positions, v64, axis=0, reduction="add")
        return g.Cast(total, to=ir.DataType.BOOL)
    return g.ScatterElements(x, positions, values, axis=0, reduction="add")


def _add_truncating(g, x, positions, values, dtype: str, y_dtype: str, one_by_one: bool):
    """x (integers) with float values[k] added at positions[k] in the float dtype, each sum
    truncated back; `one_by_one` where positions may repeat (np.add.at's order)."""

    def add(g, x, at, value):
        total = g.Add(
            g.Cast(take(g, x, at, axis=0, ndim=1, index_ndim=1), to=onnx_dtype(y_dtype)), value
        )
        return g.ScatterElements(x, at, g.Cast(total, to=onnx_dtype(dtype)), axis=0)

    if not one_by_one:
        return add(g, x, positions, values)

    def step(g, k, x):
        at = g.Unsqueeze(g.Gather(positions, k, axis=0), constant(g, [0], "int64"))
        return [add(g, x, at, g.Unsqueeze(g.Gather(values, k, axis=0), constant(g, [0], "int64")))]

    count = g.Squeeze(g.Shape(positions), constant(g, [0], "int64"))
    return loop(g, count, [x], step, "add_at")[0]


def _set_or_increment(g, node, x, y, read, *, unique: bool):
    """x with the elements `read` selects set to y, incremented by y, or y added at (np.add.at)."""
    mode = _write_mode(node.op)
    dtype = node.outputs[0].type.dtype
    y_dtype = node.inputs[1].type.dtype
    # NumPy adds a float increment to an integer x in the float dtype and truncates the sum,
    # once per update: cast first and the fractions would be lost.
    in_float = mode != "set" and np.dtype(y_dtype).kind == "f" and np.dtype(dtype).kind != "f"
    if y_dtype != dtype and not in_float:
        y = g.Cast(y, to=onnx_dtype(dtype))
    selected = read(_flat_positions(g, x))
    flat = constant(g, [-1], "int64")
    positions = g.Reshape(selected, flat, allowzero=1)
    x_flat = g.Reshape(x, flat, allowzero=1)
    values = g.Reshape(_fitted(g, node, y, g.Shape(selected)), flat, allowzero=1)
    if in_float:
        result = _add_truncating(
            g, x_flat, positions, values, dtype, y_dtype, one_by_one=not unique and mode == "add_at"
        )
    elif mode == "add_at" and not unique:
        result = _scatter_add(g, x_flat, positions, values, dtype)
    else:
        if mode != "set":
            values = _add(
                g, take(g, x_flat, positions, axis=0, ndim=1, index_ndim=1), values, dtype
            )
        if unique:
            result = g.ScatterElements(x_flat, positions, values, axis=0)
        else:
            result = _scatter_last(g, x_flat, positions, values)
    result = g.Reshape(result, g.Shape(x), allowzero=1)
    if x.shape is not None:  # with its type: onnx-ir does not write a shape without one
        result.type, result.shape = ir.TensorType(onnx_dtype(dtype)), ir.Shape(x.shape.dims)
    return result


def _fitted(g, node, y, shape):
    """y broadcast to `shape` (1-d int64), the indexed part's: PyTensor's ValueError where a
    dim of y is neither 1 nor the part's. ONNX's Expand broadcasts both ways, so a y longer
    than a part of length 1 made x longer (set_subtensor(x[1:2], [0, 1, 2]))."""
    values = g.Expand(y, shape)
    if all(node.inputs[1].type.broadcastable):
        return values  # y's dims are all 1: it cannot outgrow the part
    grew = g.Not(g.Equal(g.Shape(values), shape))
    message = f"{node.op}: the value's shape does not broadcast to the shape of the part indexed"
    return raise_if(g, grew, values, ValueError, message)


def _write_mode(op) -> str:
    if op.set_instead_of_inc:
        return "set"
    return "add" if getattr(op, "ignore_duplicates", False) else "add_at"


@register_check(IncSubtensor, AdvancedIncSubtensor1, AdvancedIncSubtensor)
def increment_dtypes(node):
    """PyTensor raises NumPy's casting error for float increments of integers but one element:
    so does export. ONNX Runtime cannot accumulate float16 at repeated indices."""
    x, y = node.inputs[:2]
    if (
        node.outputs[0].type.dtype == "float16"
        and not isinstance(node.op, IncSubtensor)
        and _write_mode(node.op) == "add_at"
    ):
        return (
            "ONNX Runtime cannot accumulate float16 values at repeated indices; "
            "compute the increment in float32"
        )
    if node.op.set_instead_of_inc or not (
        np.dtype(y.type.dtype).kind == "f" and np.dtype(x.type.dtype).kind != "f"
    ):
        return None
    if isinstance(node.op, IncSubtensor):
        # NumPy's in-place add raises unless one element is indexed.
        idx_list = node.op.idx_list
        raises = len(idx_list) < x.type.ndim or any(isinstance(e, slice) for e in idx_list)
    else:
        raises = getattr(node.op, "ignore_duplicates", False)
    if not raises:
        return None
    return (
        f"incrementing {x.type.dtype} by {y.type.dtype} here raises in PyTensor (NumPy's "
        "same_kind casting); cast the increment to the integer dtype"
    )


def _unit_slices(entries) -> bool:
    """Whether `entries` are all slices of step 1: they select a box."""
    return all(isinstance(e, Slice) and e.step in (None, Bound(1)) for e in entries)


def _write_box(g, node, x, y, entries):
    """IncSubtensor on a box (slices of step 1): y, broadcast to the box and padded to x's
    shape, added to x (padded with -0.0, which leaves every x as it is, -0.0 included) or
    written over x where a padded mask is true: no table of flat positions. A box that
    slices one axis only is x's part before it, the box set or incremented and x's part
    after it, concatenated (a Scan's buffer with its first rows set: the Where and two Pads
    over the whole buffer took 18% of a 1,000-step Scan of 100-vectors)."""
    dtype = node.outputs[0].type.dtype
    rank = node.inputs[0].type.ndim
    if node.inputs[1].type.dtype != dtype:
        y = g.Cast(y, to=onnx_dtype(dtype))
    zero, one = constant(g, 0, "int64"), constant(g, 1, "int64")
    shape = node.inputs[0].type.shape
    lengths, before, dims, sliced = [], [], [], []
    for axis in range(rank):
        dim = g.Shape(x, start=axis, end=axis + 1)
        dims.append(dim)
        entry = entries[axis] if axis < len(entries) else Slice(None, None, None)
        if entry.is_full():
            lengths.append(dim)
            before.append(constant(g, [0], "int64"))
            continue
        start, stop, step = _slice_bounds(g, x, axis, shape[axis], entry)
        positions = g.Slice(
            g.Range(zero, g.Squeeze(dim, constant(g, [0], "int64")), one),
            start,
            stop,
            constant(g, [0], "int64"),
            step,
        )
        # The box's first index (0 for an empty box).
        first = g.Slice(
            g.Concat(positions, constant(g, [0], "int64"), axis=0),
            constant(g, [0], "int64"),
            constant(g, [1], "int64"),
        )
        lengths.append(g.Shape(positions))
        before.append(first)
        sliced.append(axis)
    box = g.Concat(*lengths, axis=0)
    values = _fitted(g, node, y, box)
    if len(sliced) == 1:
        (axis,) = sliced
        return _write_slab(g, node, x, values, axis, before[axis], lengths[axis])
    after = [
        g.Sub(g.Sub(dims[axis], before[axis]), lengths[axis])
        if axis in sliced
        else constant(g, [0], "int64")
        for axis in range(rank)
    ]
    pads = g.Concat(*before, *after, axis=0)
    if _write_mode(node.op) == "set":
        inside = g.Pad(g.Expand(constant(g, True, "bool"), box), pads, constant(g, False, "bool"))
        return where(g, inside, g.Pad(values, pads), x, dtype)
    if dtype == "bool":
        return g.Or(x, g.Pad(values, pads, constant(g, False, "bool")))
    nothing = -0.0 if np.dtype(dtype).kind == "f" else 0
    return g.Add(x, g.Pad(values, pads, constant(g, nothing, dtype)))


def _write_slab(g, node, x, values, axis: int, first, length):
    """x with its `length` entries from `first` (1-element int64s) along `axis` set to, or
    incremented by, `values` (the slab's shape): x's part before the slab, the slab, and x's
    part after it, concatenated."""
    dtype = node.outputs[0].type.dtype
    end = g.Add(first, length)
    axes = constant(g, [axis], "int64")
    head = g.Slice(x, constant(g, [0], "int64"), first, axes)
    tail = g.Slice(x, end, constant(g, [INT64_MAX], "int64"), axes)
    if _write_mode(node.op) != "set":
        slab = g.Slice(x, first, end, axes)
        values = g.Or(slab, values) if dtype == "bool" else g.Add(slab, values)
    return g.Concat(head, values, tail, axis=axis)


@register(IncSubtensor)
def inc_subtensor(g, node, x, y, *indices):
    """IncSubtensor -> on a box (slices of step 1), y concatenated with x's parts around it
    (one sliced axis) or padded to x's shape and added or written by Where; otherwise
    ScatterElements into the flat positions x[indices] selects."""
    entries = _entries(node, node.inputs[2:], indices)
    shape = node.inputs[0].type.shape
    in_float = not node.op.set_instead_of_inc and (
        np.dtype(node.inputs[1].type.dtype).kind == "f"
        and np.dtype(node.outputs[0].type.dtype).kind != "f"
    )
    if _unit_slices(entries) and not in_float:
        return _write_box(g, node, x, y, entries)
    return _set_or_increment(
        g,
        node,
        x,
        y,
        lambda v: _basic(g, v, shape, entries),
        unique=True,
    )


@register(AdvancedIncSubtensor1)
def advanced_inc_subtensor1(g, node, x, y, index):
    """AdvancedIncSubtensor1 -> ScatterElements at Gather(positions, index): repeats accumulate."""
    index, ndim = _int64(g, index), node.inputs[0].type.ndim
    return _set_or_increment(g, node, x, y, lambda v: take(g, v, index, 0, ndim, 1), unique=False)


@register(AdvancedIncSubtensor)
def advanced_inc_subtensor(g, node, x, y, *indices):
    """AdvancedIncSubtensor -> ScatterElements at the positions x[indices] selects."""
    entries = _entries(node, node.inputs[2:], indices)
    shape = node.inputs[0].type.shape
    return _set_or_increment(
        g,
        node,
        x,
        y,
        lambda v: _advanced(g, v, shape, entries),
        unique=False,
    )
