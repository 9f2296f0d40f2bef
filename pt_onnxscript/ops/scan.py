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


def _int(op, value):
    return constant(op, value, "int64")


def _scalar(op, x):
    """A 0-d int64 from a 0-d or 1-element value of any integer dtype."""
    return op.Reshape(op.Cast(x, to=ir.DataType.INT64), _int(op, []))


def _length(op, buffer):
    return op.Squeeze(op.Shape(buffer, start=0, end=1), _int(op, [0]))


def _row(op, buffer, index):
    """buffer[index % len(buffer)]."""
    return op.Gather(buffer, op.Mod(index, _length(op, buffer)), axis=0)


def _write(op, buffer, index, value):
    """buffer with buffer[index % len(buffer)] = value."""
    at = op.Reshape(op.Mod(index, _length(op, buffer)), _int(op, [1, 1]))
    return op.ScatterND(buffer, at, op.Unsqueeze(value, _int(op, [0])))


@register(Scan)
def scan(op, node, n_steps, *outer):
    """Scan -> Loop over its steps (a while loop's `until` ends it early)."""
    scan_op = node.op
    info = scan_op.info
    if info.n_untraced_sit_sot and any(
        getattr(v.type, "dtype", None) is None for v in scan_op.fgraph.outputs
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
    inner_inputs = list(scan_op.fgraph.inputs)
    inner_outputs = list(scan_op.fgraph.outputs)
    steps = _scalar(op, n_steps)
    tag = subgraph_tag(op, "scan")

    def body(op, i, condition, *carried):
        op.builder.push_module(tag)  # keeps value names apart from the outer graph's
        values = {}
        position = iter(inner_inputs)
        for seq in seqs:
            values[next(position)] = op.Gather(seq, i, axis=0)
        for k, taps in enumerate(in_taps):
            start = _int(op, -mintaps[k])
            for tap in taps:
                values[next(position)] = _row(op, carried[k], op.Add(op.Add(i, start), _int(op, tap)))
        for k in range(info.n_untraced_sit_sot):
            values[next(position)] = carried[n_taps + k]
        for value in non_seqs:
            values[next(position)] = value
        translate_graph(op, scan_op.fgraph.toposort(), values, outputs=inner_outputs)
        results = [values[v] if v in values else constant_value(op, v) for v in inner_outputs]
        out = iter(results)
        new_buffers = []
        for k, out_taps in enumerate(info.mit_mot_out_slices):
            buffer = carried[k]
            for tap in out_taps:
                buffer = _write(op, buffer, op.Add(op.Add(i, _int(op, -mintaps[k])), _int(op, tap)), next(out))
            new_buffers.append(buffer)
        for k in range(n_mit_mot, n_taps):
            start = _int(op, -mintaps[k])
            new_buffers.append(_write(op, carried[k], op.Add(i, start), next(out)))
        stacked = [op.Identity(next(out)) for _ in range(info.n_nit_sot)]
        new_untraced = [op.Identity(next(out)) for _ in range(info.n_untraced_sit_sot)]
        done = op.Add(carried[-1], _int(op, 1))
        if info.as_while:
            until = next(out)
            go_on = op.Not(op.Cast(op.Reshape(until, _int(op, [])), to=ir.DataType.BOOL))
        else:
            go_on = op.Identity(condition)
        return [go_on, *new_buffers, *new_untraced, done, *stacked]

    carried_types = [
        ir.val(f"{tag}_carried_{k}", onnx_dtype(var.type.dtype))
        for k, var in enumerate(chain(node.inputs[1 + n_seqs : 1 + n_seqs + n_taps + info.n_untraced_sit_sot]))
    ]
    nit_sot_vars = inner_outputs[info.n_mit_mot_outs + n_mit_sot + n_sit_sot :][: info.n_nit_sot]
    graph = op.builder.subgraph(
        body,
        inputs=[ir.val(f"{tag}_i", ir.DataType.INT64, []), ir.val(f"{tag}_condition", ir.DataType.BOOL, []),
                *carried_types, ir.val(f"{tag}_done", ir.DataType.INT64, [])],
        outputs=[ir.val(f"{tag}_condition_out", ir.DataType.BOOL, []),
                 *[ir.val(f"{v.name}_out") for v in carried_types],
                 ir.val(f"{tag}_done_out", ir.DataType.INT64, []),
                 *[ir.val(f"{tag}_stacked_{k}", onnx_dtype(v.type.dtype)) for k, v in enumerate(nit_sot_vars)]],
        name="scan_body",
    )
    results = op.Loop(
        steps, constant(op, True, "bool"), *buffers, *untraced, _int(op, 0),
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
        outputs.append(_settle(op, final_buffers[k], done, steps, mintaps[k]))
    for k, (size, rows, var) in enumerate(zip(nit_sot_sizes, stacked, node.outputs[n_taps:], strict=False)):
        outputs.append(_settle_stacked(op, rows, _scalar(op, size), done, steps, var))
    outputs.extend(final_untraced)
    return outputs if len(outputs) > 1 else outputs[0]


def _settle(op, buffer, done, steps, mintap: int):
    """Scan's final buffer: rotated oldest first if it wrapped; zeroed past the written rows
    and shortened by the steps not taken if a while loop stopped early."""
    length = _length(op, buffer)
    written = op.Add(done, _int(op, -mintap))
    wrapped = op.LessOrEqual(length, written)
    position = op.Mod(written, length)
    index = op.Range(_int(op, 0), length, _int(op, 1))
    rotated = op.Gather(buffer, op.Mod(op.Add(index, position), length), axis=0)
    keep = op.Less(index, written)
    mask_shape = op.Concat(op.Shape(index), op.Expand(_int(op, [1]), op.Sub(op.Shape(op.Shape(buffer)), _int(op, [1]))), axis=0)
    zero = op.CastLike(_int(op, 0), buffer)
    zeroed = op.Where(op.Reshape(keep, mask_shape, allowzero=1), buffer, zero)
    unfinished = op.Sub(length, op.Sub(steps, done))
    shortened = op.Slice(zeroed, op.Reshape(_int(op, 0), _int(op, [1])), op.Reshape(unfinished, _int(op, [1])), _int(op, [0]))
    return op.If(wrapped, then_branch=_branch(op, rotated), else_branch=_branch(op, shortened))


def _branch(op, value):
    name = subgraph_tag(op, "settled")
    return op.builder.subgraph(lambda op: op.Identity(value), inputs=[], outputs=[ir.val(name, value.dtype)], name=name)


def _settle_stacked(op, rows, size, done, steps, var):
    """A nit_sot output: its last `size` rows (all of them, then zeros, if fewer were made)."""
    start = op.Max(op.Sub(done, size), _int(op, 0))
    last = op.Slice(rows, op.Reshape(start, _int(op, [1])), op.Reshape(done, _int(op, [1])), _int(op, [0]))
    missing = op.Max(op.Sub(op.Sub(size, done), op.Sub(steps, done)), _int(op, 0))
    pad_shape = op.Concat(op.Reshape(missing, _int(op, [1])), op.Shape(rows, start=1), axis=0)
    padding = op.Expand(op.CastLike(_int(op, 0), rows), pad_shape)
    return op.Concat(last, padding, axis=0)
