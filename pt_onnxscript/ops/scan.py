"""Scan -> ONNX Loop, reproducing Scan.perform: its state buffers, taps and circular positions.

Each tapped output (mit_mot, mit_sot, sit_sot) keeps PyTensor's buffer as a loop-carried
value: a step reads its taps at (pos + tap) % length and writes its result at pos, pos moving
on by one each step. Outputs without taps (nit_sot) are stacked by the Loop. After the loop,
buffers that wrapped around are rotated oldest first and unfilled ones zeroed, as Scan does.
Each step costs a copy of the buffers it writes (ScatterND).
"""

from itertools import chain

import onnx_ir as ir
from pytensor.scan.op import Scan

from pt_onnxscript.ops.common import branch, constant, loop
from pt_onnxscript.registry import register
from pt_onnxscript.translate import TranslationError, translate_graph, value_of
from pt_onnxscript.types import onnx_dtype


def _int(g, value):
    return constant(g, value, "int64")


def _scalar(g, x):
    """A 0-d int64 from a 0-d or 1-element value of any integer dtype."""
    return g.Reshape(g.Cast(x, to=ir.DataType.INT64), _int(g, []))


def _length(g, buffer):
    return g.Squeeze(g.Shape(buffer, start=0, end=1), _int(g, [0]))


def _row(g, buffer, index):
    """buffer[index % len(buffer)]."""
    return g.Gather(buffer, g.Mod(index, _length(g, buffer)), axis=0)


def _write_step(g, buffer, index, value):
    """buffer with buffer[index % len(buffer)] = value."""
    at = g.Reshape(g.Mod(index, _length(g, buffer)), _int(g, [1, 1]))
    return g.ScatterND(buffer, at, g.Unsqueeze(value, _int(g, [0])))


@register(Scan)
def scan(g, node, n_steps, *outer):
    """Scan -> Loop over its steps (a while loop's `until` ends it early)."""
    op = node.op
    info = op.info
    inner_in, inner_out = list(op.fgraph.inputs), list(op.fgraph.outputs)
    if any(
        getattr(v.type, "dtype", None) is None for v in op.inner_untraced_sit_sot_outs(inner_out)
    ):
        raise TranslationError(f"{node}: untraced outputs that are not tensors cannot be exported")
    outer = [n_steps, *outer]
    seqs, non_seqs = op.outer_seqs(outer), op.outer_non_seqs(outer)
    buffers = op.outer_mitmot(outer) + op.outer_mitsot(outer) + op.outer_sitsot(outer)
    untraced = op.outer_untraced_sit_sot(outer)
    n_taps, n_untraced = len(buffers), len(untraced)
    in_taps = list(chain(info.mit_mot_in_slices, info.mit_sot_in_slices, info.sit_sot_in_slices))
    starts = [-min(taps) for taps in in_taps]  # the buffer row of step 0's output
    tapped = op.inner_mitmot(inner_in) + op.inner_mitsot(inner_in) + op.inner_sitsot(inner_in)
    steps = _scalar(g, n_steps)

    def step(g, i, *carried):
        values = {
            var: g.Gather(seq, i, axis=0)
            for var, seq in zip(op.inner_seqs(inner_in), seqs, strict=True)
        }
        tap_vars = iter(tapped)
        for k, taps in enumerate(in_taps):
            for tap in taps:
                values[next(tap_vars)] = _row(g, carried[k], g.Add(i, _int(g, starts[k] + tap)))
        values.update(zip(op.inner_untraced_sit_sot(inner_in), carried[n_taps:-1], strict=True))
        values.update(zip(op.inner_non_seqs(inner_in), non_seqs, strict=True))
        translate_graph(g, op.fgraph.toposort(), values, outputs=inner_out)

        def result(var):
            return value_of(g, values, var)

        new_buffers = []
        mit_mot_outs = iter(op.inner_mitmot_outs(inner_out))
        for k, out_taps in enumerate(info.mit_mot_out_slices):
            buffer = carried[k]
            for tap in out_taps:
                buffer = _write_step(
                    g, buffer, g.Add(i, _int(g, starts[k] + tap)), result(next(mit_mot_outs))
                )
            new_buffers.append(buffer)
        for k, var in enumerate(
            op.inner_mitsot_outs(inner_out) + op.inner_sitsot_outs(inner_out),
            start=len(new_buffers),
        ):
            new_buffers.append(
                _write_step(g, carried[k], g.Add(i, _int(g, starts[k])), result(var))
            )
        new_untraced = [
            g.Identity(result(var)) for var in op.inner_untraced_sit_sot_outs(inner_out)
        ]
        stacked = [g.Identity(result(var)) for var in op.inner_nitsot_outs(inner_out)]
        done = g.Add(carried[-1], _int(g, 1))
        state = [*new_buffers, *new_untraced, done, *stacked]
        if not info.as_while:
            return state
        until = g.Reshape(result(inner_out[-1]), _int(g, []))
        return [g.Not(g.Cast(until, to=ir.DataType.BOOL)), *state]

    dtypes = [onnx_dtype(var.type.dtype) for var in op.inner_nitsot_outs(inner_out)]
    results = loop(
        g,
        steps,
        [*buffers, *untraced, _int(g, 0)],
        step,
        "scan",
        condition=constant(g, True, "bool") if info.as_while else None,
        stacked=dtypes,
    )
    final_buffers, final_untraced = results[:n_taps], results[n_taps : n_taps + n_untraced]
    done, stacked = results[n_taps + n_untraced], results[n_taps + n_untraced + 1 :]

    outputs = list(final_buffers[: info.n_mit_mot])
    for k in range(info.n_mit_mot, n_taps):
        outputs.append(_settle(g, final_buffers[k], done, steps, starts[k]))
    sizes = op.outer_nitsot(outer)
    for size, rows, var in zip(sizes, stacked, op.outer_nitsot_outs(node.outputs), strict=True):
        outputs.append(_settle_stacked(g, rows, _scalar(g, size), done, steps, var))
    outputs.extend(final_untraced)
    return outputs


def _settle(g, buffer, done, steps, start: int):
    """Scan's final buffer: rotated oldest first if it wrapped; zeroed past the written rows
    and shortened by the steps not taken if a while loop stopped early."""
    length = _length(g, buffer)
    written = g.Add(done, _int(g, start))
    wrapped = g.LessOrEqual(length, written)
    position = g.Mod(written, length)
    index = g.Range(_int(g, 0), length, _int(g, 1))
    rotated = g.Gather(buffer, g.Mod(g.Add(index, position), length), axis=0)
    keep = g.Less(index, written)
    mask_shape = g.Concat(
        g.Shape(index),
        g.Expand(_int(g, [1]), g.Sub(g.Shape(g.Shape(buffer)), _int(g, [1]))),
        axis=0,
    )
    zero = g.CastLike(_int(g, 0), buffer)
    zeroed = g.Where(g.Reshape(keep, mask_shape, allowzero=1), buffer, zero)
    unfinished = g.Sub(length, g.Sub(steps, done))
    shortened = g.Slice(
        zeroed,
        g.Reshape(_int(g, 0), _int(g, [1])),
        g.Reshape(unfinished, _int(g, [1])),
        _int(g, [0]),
    )
    return g.If(wrapped, then_branch=_branch(g, rotated), else_branch=_branch(g, shortened))


def _branch(g, value):
    return branch(g, "settled", lambda g: [g.Identity(value)], [value.dtype])


def _settle_stacked(g, rows, size, done, steps, var):
    """A nit_sot output: its last `size` rows (all of them, then zeros, if fewer were made)."""
    start = g.Max(g.Sub(done, size), _int(g, 0))
    last = g.Slice(
        rows, g.Reshape(start, _int(g, [1])), g.Reshape(done, _int(g, [1])), _int(g, [0])
    )
    missing = g.Max(g.Sub(g.Sub(size, done), g.Sub(steps, done)), _int(g, 0))
    pad_shape = g.Concat(g.Reshape(missing, _int(g, [1])), g.Shape(rows, start=1), axis=0)
    padding = g.Expand(g.CastLike(_int(g, 0), rows), pad_shape)
    return g.Concat(last, padding, axis=0)
