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

from pt_onnxscript.ops.common import constant, subgraph_tag
from pt_onnxscript.registry import register
from pt_onnxscript.translate import TranslationError, constant_value, translate_graph
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
    if info.n_untraced_sit_sot and any(
        getattr(v.type, "dtype", None) is None for v in op.fgraph.outputs
    ):
        raise TranslationError(f"{node}: untraced outputs that are not tensors cannot be exported")
    n_seqs, n_mit_mot, n_mit_sot, n_sit_sot = (
        info.n_seqs, info.n_mit_mot, info.n_mit_sot, info.n_sit_sot,
    )
    n_taps = n_mit_mot + n_mit_sot + n_sit_sot
    seqs = outer[:n_seqs]
    buffers = outer[n_seqs : n_seqs + n_taps]
    untraced = outer[n_seqs + n_taps : n_seqs + n_taps + info.n_untraced_sit_sot]
    nit_sot_sizes = outer[n_seqs + n_taps + info.n_untraced_sit_sot :][: info.n_nit_sot]
    non_seqs = outer[n_seqs + n_taps + info.n_untraced_sit_sot + info.n_nit_sot :]
    in_taps = list(chain(info.mit_mot_in_slices, info.mit_sot_in_slices, info.sit_sot_in_slices))
    mintaps = [min(taps) for taps in in_taps]
    inner_inputs = list(op.fgraph.inputs)
    inner_outputs = list(op.fgraph.outputs)
    steps = _scalar(g, n_steps)
    tag = subgraph_tag(g, "scan")

    def body(g, i, condition, *carried):
        g.builder.push_module(tag)  # keeps value names apart from the outer graph's
        values = {}
        position = iter(inner_inputs)
        for seq in seqs:
            values[next(position)] = g.Gather(seq, i, axis=0)
        for k, taps in enumerate(in_taps):
            start = _int(g, -mintaps[k])
            for tap in taps:
                values[next(position)] = _row(g, carried[k], g.Add(g.Add(i, start), _int(g, tap)))
        for k in range(info.n_untraced_sit_sot):
            values[next(position)] = carried[n_taps + k]
        for value in non_seqs:
            values[next(position)] = value
        translate_graph(g, op.fgraph.toposort(), values, outputs=inner_outputs)
        results = [values[v] if v in values else constant_value(g, v) for v in inner_outputs]
        out = iter(results)
        new_buffers = []
        for k, out_taps in enumerate(info.mit_mot_out_slices):
            buffer = carried[k]
            for tap in out_taps:
                buffer = _write_step(g, buffer, g.Add(g.Add(i, _int(g, -mintaps[k])), _int(g, tap)), next(out))
            new_buffers.append(buffer)
        for k in range(n_mit_mot, n_taps):
            start = _int(g, -mintaps[k])
            new_buffers.append(_write_step(g, carried[k], g.Add(i, start), next(out)))
        stacked = [g.Identity(next(out)) for _ in range(info.n_nit_sot)]
        new_untraced = [g.Identity(next(out)) for _ in range(info.n_untraced_sit_sot)]
        done = g.Add(carried[-1], _int(g, 1))
        if info.as_while:
            until = next(out)
            go_on = g.Not(g.Cast(g.Reshape(until, _int(g, [])), to=ir.DataType.BOOL))
        else:
            go_on = g.Identity(condition)
        return [go_on, *new_buffers, *new_untraced, done, *stacked]

    carried_types = [
        ir.val(f"{tag}_carried_{k}", onnx_dtype(var.type.dtype))
        for k, var in enumerate(chain(node.inputs[1 + n_seqs : 1 + n_seqs + n_taps + info.n_untraced_sit_sot]))
    ]
    nit_sot_vars = inner_outputs[info.n_mit_mot_outs + n_mit_sot + n_sit_sot :][: info.n_nit_sot]
    graph = g.builder.subgraph(
        body,
        inputs=[ir.val(f"{tag}_i", ir.DataType.INT64, []), ir.val(f"{tag}_condition", ir.DataType.BOOL, []),
                *carried_types, ir.val(f"{tag}_done", ir.DataType.INT64, [])],
        outputs=[ir.val(f"{tag}_condition_out", ir.DataType.BOOL, []),
                 *[ir.val(f"{v.name}_out") for v in carried_types],
                 ir.val(f"{tag}_done_out", ir.DataType.INT64, []),
                 *[ir.val(f"{tag}_stacked_{k}", onnx_dtype(v.type.dtype)) for k, v in enumerate(nit_sot_vars)]],
        name="scan_body",
    )
    results = g.Loop(
        steps, constant(g, True, "bool"), *buffers, *untraced, _int(g, 0),
        body=graph,
        _outputs=n_taps + info.n_untraced_sit_sot + 1 + info.n_nit_sot,
    )
    results = list(results) if isinstance(results, list | tuple) else [results]
    final_buffers = results[:n_taps]
    final_untraced = results[n_taps : n_taps + info.n_untraced_sit_sot]
    done = results[n_taps + info.n_untraced_sit_sot]
    stacked = results[n_taps + info.n_untraced_sit_sot + 1 :]

    outputs = list(final_buffers[:n_mit_mot])
    for k in range(n_mit_mot, n_taps):
        outputs.append(_settle(g, final_buffers[k], done, steps, mintaps[k]))
    for k, (size, rows, var) in enumerate(zip(nit_sot_sizes, stacked, node.outputs[n_taps:], strict=False)):
        outputs.append(_settle_stacked(g, rows, _scalar(g, size), done, steps, var))
    outputs.extend(final_untraced)
    return outputs if len(outputs) > 1 else outputs[0]


def _settle(g, buffer, done, steps, mintap: int):
    """Scan's final buffer: rotated oldest first if it wrapped; zeroed past the written rows
    and shortened by the steps not taken if a while loop stopped early."""
    length = _length(g, buffer)
    written = g.Add(done, _int(g, -mintap))
    wrapped = g.LessOrEqual(length, written)
    position = g.Mod(written, length)
    index = g.Range(_int(g, 0), length, _int(g, 1))
    rotated = g.Gather(buffer, g.Mod(g.Add(index, position), length), axis=0)
    keep = g.Less(index, written)
    mask_shape = g.Concat(g.Shape(index), g.Expand(_int(g, [1]), g.Sub(g.Shape(g.Shape(buffer)), _int(g, [1]))), axis=0)
    zero = g.CastLike(_int(g, 0), buffer)
    zeroed = g.Where(g.Reshape(keep, mask_shape, allowzero=1), buffer, zero)
    unfinished = g.Sub(length, g.Sub(steps, done))
    shortened = g.Slice(zeroed, g.Reshape(_int(g, 0), _int(g, [1])), g.Reshape(unfinished, _int(g, [1])), _int(g, [0]))
    return g.If(wrapped, then_branch=_branch(g, rotated), else_branch=_branch(g, shortened))


def _branch(g, value):
    name = subgraph_tag(g, "settled")
    return g.builder.subgraph(lambda g: g.Identity(value), inputs=[], outputs=[ir.val(name, value.dtype)], name=name)


def _settle_stacked(g, rows, size, done, steps, var):
    """A nit_sot output: its last `size` rows (all of them, then zeros, if fewer were made)."""
    start = g.Max(g.Sub(done, size), _int(g, 0))
    last = g.Slice(rows, g.Reshape(start, _int(g, [1])), g.Reshape(done, _int(g, [1])), _int(g, [0]))
    missing = g.Max(g.Sub(g.Sub(size, done), g.Sub(steps, done)), _int(g, 0))
    pad_shape = g.Concat(g.Reshape(missing, _int(g, [1])), g.Shape(rows, start=1), axis=0)
    padding = g.Expand(g.CastLike(_int(g, 0), rows), pad_shape)
    return g.Concat(last, padding, axis=0)
