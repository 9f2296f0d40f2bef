"""Scan -> ONNX Loop, reproducing Scan.perform: its state buffers, taps and circular positions.

A mit_sot or sit_sot output carries only the rows its taps read back (the value itself for a
single tap of -1), and each step's new row is a scan output of the Loop, as are the outputs
without taps (nit_sot): a step costs its own work, not a copy of a whole buffer. After the loop
each buffer is rebuilt from its initial rows and the rows written: the last of them if they
fill it (a buffer PyTensor shortened keeps only those), zeros after them if a while loop
stopped early, as Scan does. mit_mot outputs (gradients of Scans) keep PyTensor's whole
buffer as a carried value, written at (pos + tap) % length each step.
"""

from itertools import chain

import numpy as np
import onnx_ir as ir
from pytensor.graph.basic import Constant
from pytensor.scan.op import Scan
from pytensor.tensor.shape import Shape_i

from pt_onnxscript.ops.common import INT64_MAX, constant, ints, loop, raise_if
from pt_onnxscript.registry import register
from pt_onnxscript.rng import is_random_state
from pt_onnxscript.translate import (
    TranslationError,
    bind_sparse_constants,
    translate_graph,
    value_of,
)
from pt_onnxscript.types import onnx_dtype


def _scalar(g, x):
    """A 0-d int64 from a 0-d or 1-element value of any integer dtype."""
    return g.Reshape(g.Cast(x, to=ir.DataType.INT64), ints(g, []))


def _non_negative(n_steps) -> bool:
    """Whether Scan's `n_steps` is known not to be negative: a constant, or a dim of a sequence
    (what `scan` computes from its sequences' lengths)."""
    if isinstance(n_steps, Constant):
        return bool(np.all(n_steps.data >= 0))
    return n_steps.owner is not None and isinstance(n_steps.owner.op, Shape_i)


def _length(g, buffer):
    return g.Squeeze(g.Shape(buffer, start=0, end=1), ints(g, [0]))


def _row(g, buffer, index):
    """buffer[index % len(buffer)]."""
    return g.Gather(buffer, g.Mod(index, _length(g, buffer)), axis=0)


def _write_step(g, buffer, index, value):
    """buffer with buffer[index % len(buffer)] = value."""
    at = g.Reshape(g.Mod(index, _length(g, buffer)), ints(g, [1, 1]))
    return g.ScatterND(buffer, at, g.Unsqueeze(value, ints(g, [0])))


@register(Scan)
def scan(g, node, n_steps, *outer):
    """Scan -> Loop over its steps (a while loop's `until` ends it early)."""
    op = node.op
    info = op.info
    inner_in, inner_out = list(op.fgraph.inputs), list(op.fgraph.outputs)
    if any(
        getattr(v.type, "dtype", None) is None and not is_random_state(v)
        for v in op.inner_untraced_sit_sot_outs(inner_out)
    ):
        raise TranslationError(
            f"{node}: untraced outputs that are neither tensors nor random generators cannot "
            "be exported"
        )
    outer = [n_steps, *outer]
    seqs, non_seqs = op.outer_seqs(outer), op.outer_non_seqs(outer)
    mit_mot = op.outer_mitmot(outer)
    buffers = op.outer_mitsot(outer) + op.outer_sitsot(outer)
    untraced = op.outer_untraced_sit_sot(outer)
    n_mit_mot, n_buffers, n_untraced = len(mit_mot), len(buffers), len(untraced)
    mit_mot_starts = [-min(taps) for taps in info.mit_mot_in_slices]
    in_taps = list(chain(info.mit_sot_in_slices, info.sit_sot_in_slices))
    depths = [-min(taps) for taps in in_taps]  # the rows a step reads back: step 0's output row
    tapped = op.inner_mitsot(inner_in) + op.inner_sitsot(inner_in)
    tap_outs = op.inner_mitsot_outs(inner_out) + op.inner_sitsot_outs(inner_out)
    buffer_vars = op.outer_mitsot(node.inputs) + op.outer_sitsot(node.inputs)
    steps = _scalar(g, n_steps)
    if not _non_negative(node.inputs[0]):
        negative = g.Less(steps, ints(g, 0))
        steps = raise_if(
            g, negative, steps, IndexError, "Scan was asked to run a negative number of steps"
        )
    first_rows = [_first_rows(g, buffer, depth) for buffer, depth in zip(buffers, depths)]
    shape_sources: dict[ir.Value, tuple[ir.Value, int, int]] = {}

    def step(g, i, *carried):
        values = {}
        for var, seq in zip(op.inner_seqs(inner_in), seqs, strict=True):
            values[var] = g.Gather(seq, i, axis=0)
            shape_sources[values[var]] = (seq, 1, var.type.ndim)
        mit_mot_vars = iter(op.inner_mitmot(inner_in))
        for k, taps in enumerate(info.mit_mot_in_slices):
            for tap in taps:
                at = g.Add(i, ints(g, mit_mot_starts[k] + tap))
                values[next(mit_mot_vars)] = _row(g, carried[k], at)
        windows = carried[n_mit_mot : n_mit_mot + n_buffers]
        tap_vars = iter(tapped)
        for window, rows, depth, taps, buffer_var in zip(
            windows, first_rows, depths, in_taps, buffer_vars, strict=True
        ):
            for tap in taps:
                var = next(tap_vars)
                row = window if depth == 1 else g.Gather(window, ints(g, depth + tap), axis=0)
                _declare_static_dims(row, var, buffer_var)
                values[var] = row
                shape_sources[row] = (rows, 1, var.type.ndim)
        values.update(
            zip(op.inner_untraced_sit_sot(inner_in), carried[n_mit_mot + n_buffers :][:n_untraced])
        )
        values.update(zip(op.inner_non_seqs(inner_in), non_seqs, strict=True))
        bind_sparse_constants(g, op.inner_non_seqs(inner_in), op.outer_non_seqs(node.inputs))
        translate_graph(g, op.fgraph.toposort(), values, outputs=inner_out)

        def result(var):
            return value_of(g, values, var)

        new_mit_mot = []
        mit_mot_outs = iter(op.inner_mitmot_outs(inner_out))
        for k, out_taps in enumerate(info.mit_mot_out_slices):
            buffer = carried[k]
            for tap in out_taps:
                at = g.Add(i, ints(g, mit_mot_starts[k] + tap))
                buffer = _write_step(g, buffer, at, result(next(mit_mot_outs)))
            new_mit_mot.append(buffer)
        new_rows = [
            _as_row(g, result(out), out, var, rows)
            for out, var, rows in zip(tap_outs, buffer_vars, first_rows, strict=True)
        ]
        new_windows = [
            row if depth == 1 else _shift(g, window, row)
            for window, row, depth in zip(windows, new_rows, depths, strict=True)
        ]
        new_untraced = [
            g.Identity(result(var)) for var in op.inner_untraced_sit_sot_outs(inner_out)
        ]
        stacked = [g.Identity(row) for row in new_rows]
        stacked += [g.Identity(result(var)) for var in op.inner_nitsot_outs(inner_out)]
        state = [*new_mit_mot, *new_windows, *new_untraced]
        if not info.as_while:
            return [*state, *stacked]
        done = g.Add(carried[-1], ints(g, 1))  # steps taken: a while loop may stop early
        state = [*state, done, *stacked]
        until = g.Reshape(result(inner_out[-1]), ints(g, []))
        return [g.Not(g.Cast(until, to=ir.DataType.BOOL)), *state]

    windows = [
        g.Gather(rows, ints(g, 0), axis=0) if depth == 1 else rows
        for rows, depth in zip(first_rows, depths, strict=True)
    ]
    dtypes = [onnx_dtype(var.type.dtype) for var in tap_outs + op.inner_nitsot_outs(inner_out)]
    results = loop(
        g,
        steps,
        [*mit_mot, *windows, *untraced, *([ints(g, 0)] if info.as_while else [])],
        step,
        "scan",
        condition=constant(g, True, "bool") if info.as_while else None,
        stacked=dtypes,
    )
    _shapes_from_outside(g, results[0].producer(), shape_sources)
    final_mit_mot = results[:n_mit_mot]
    position = n_mit_mot + n_buffers
    final_untraced = results[position : position + n_untraced]
    if info.as_while:
        done = results[position + n_untraced]
        stacked = results[position + n_untraced + 1 :]
    else:
        done, stacked = steps, results[position + n_untraced :]

    outputs = list(final_mit_mot)
    for buffer, rows, new in zip(buffers, first_rows, stacked, strict=False):
        # Reshaped: ONNX Runtime gives a Loop that ran no step scan outputs of shape (0,).
        shape = g.Concat(g.Reshape(done, ints(g, [1])), g.Shape(rows, start=1), axis=0)
        new = g.Reshape(new, shape, allowzero=1)
        outputs.append(_settle(g, buffer, g.Concat(rows, new, axis=0), done, steps))
    sizes = op.outer_nitsot(outer)
    nit_sot = zip(sizes, stacked[n_buffers:], op.outer_nitsot_outs(node.outputs), strict=True)
    for size, rows, var in nit_sot:
        outputs.append(_settle_stacked(g, rows, _scalar(g, size), done, steps, var))
    outputs.extend(final_untraced)
    return outputs


def _declare_static_dims(row, var, buffer_var) -> None:
    """Give a Loop body's carried `row` of Scan buffer `buffer_var` the dims PyTensor fixes
    for every step: the inner variable's static dims, or the buffer's (a row of a buffer of
    static rows: PyTensor makes each step's output fit it). The runtime-broadcast and Join
    guards leave out what they prove equal from these."""
    shape = row.shape
    if shape is None or len(shape) != var.type.ndim:
        return
    static = [
        a if a is not None else b
        for a, b in zip(var.type.shape, buffer_var.type.shape[1:], strict=True)
    ]
    merged = [
        dim if isinstance(dim, int) or d is None else d
        for d, dim in zip(static, shape, strict=True)
    ]
    if merged != list(shape):
        row.shape = ir.Shape(merged)


def _first_rows(g, buffer, depth: int):
    """The `depth` rows of initial state at the start of `buffer`."""
    return g.Slice(buffer, ints(g, [0]), ints(g, [depth]), ints(g, [0]))


def _shift(g, window, row):
    """`window` without its oldest row, `row` after its newest."""
    rest = g.Slice(window, ints(g, [1]), ints(g, [INT64_MAX]), ints(g, [0]))
    return g.Concat(rest, g.Unsqueeze(row, ints(g, [0])), axis=0)


def _settle(g, buffer, sequence, done, steps):
    """Scan's final buffer from the `sequence` of its initial rows and the rows written: the
    last len(buffer) of them (oldest first) if they fill it; otherwise the rows written, zeros
    after them, shortened by the steps not taken if a while loop stopped early."""
    length = _length(g, buffer)
    written = _length(g, sequence)
    missing = g.Max(g.Sub(length, written), ints(g, 0))
    pad_shape = g.Concat(g.Reshape(missing, ints(g, [1])), g.Shape(sequence, start=1), axis=0)
    padded = g.Concat(sequence, g.Expand(g.CastLike(ints(g, 0), sequence), pad_shape), axis=0)
    wrapped = g.LessOrEqual(length, written)
    begin = g.Max(g.Sub(written, length), ints(g, 0))
    end = g.Where(wrapped, written, g.Sub(length, g.Sub(steps, done)))
    return g.Slice(
        padded, g.Reshape(begin, ints(g, [1])), g.Reshape(end, ints(g, [1])), ints(g, [0])
    )


def _as_row(g, value, var, buffer_var, rows):
    """Inner output `value` (of `var`) as a row of the buffer of `buffer_var` that Scan writes
    it into, which broadcasts it where `var` is broadcastable and the buffer is not."""
    if var.type.broadcastable == buffer_var.type.broadcastable[1:]:
        return value
    return g.Expand(value, g.Shape(rows, start=1))


def _shapes_from_outside(g, loop_node, sources):
    """Make the Shape nodes of `loop_node`'s body that read a value of `sources` (a row of a
    sequence, of a buffer: the same shape every step) read its outer source instead, so the
    shape arithmetic and checks on them can leave the loop (optimize.hoist_loop_invariants)."""
    body = loop_node.attributes["body"].as_graph()
    for shape_node in [n for n in body if n.op_type == "Shape" and n.inputs[0] in sources]:
        source, offset, rank = sources[shape_node.inputs[0]]
        start = shape_node.attributes.get_int("start", 0)
        end = shape_node.attributes.get_int("end", None)
        start = start + rank if start < 0 else start
        shape_node.attributes["start"] = ir.AttrInt64("start", min(max(start, 0), rank) + offset)
        if end is not None:
            end = end + rank if end < 0 else end
            shape_node.attributes["end"] = ir.AttrInt64("end", min(max(end, 0), rank) + offset)
        shape_node.replace_input_with(0, source)


def _settle_stacked(g, rows, size, done, steps, var):
    """A nit_sot output: its last `size` rows (all of them, then zeros, if fewer were made)."""
    start = g.Max(g.Sub(done, size), ints(g, 0))
    last = g.Slice(
        rows, g.Reshape(start, ints(g, [1])), g.Reshape(done, ints(g, [1])), ints(g, [0])
    )
    missing = g.Max(g.Sub(g.Sub(size, done), g.Sub(steps, done)), ints(g, 0))
    pad_shape = g.Concat(g.Reshape(missing, ints(g, [1])), g.Shape(rows, start=1), axis=0)
    padding = g.Expand(g.CastLike(ints(g, 0), rows), pad_shape)
    return g.Concat(last, padding, axis=0)
