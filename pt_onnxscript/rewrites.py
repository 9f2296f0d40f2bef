"""Rewrites for mode "ONNX" and export (tag "onnx"): the usual CNN idioms as one ONNX op each.

- sum over input channels of a batched convolve2d, written as
  ``convolve2d(x[:, None], w[None], mode="valid"|"full").sum(axis=2)`` (a Squeeze of that axis
  once PyTensor knows there is one channel), becomes ChannelConv2d (one ONNX Conv in float32);
- non-overlapping max pooling, written as
  ``h.reshape((n, c, h // p, p, w // p, p)).max(axis=(3, 5))``, becomes Pool2d (MaxPool).

Both are exact replacements; graphs that do not match are translated op by op.
"""

from pytensor.compile import optdb
from pytensor.graph.basic import Constant
from pytensor.graph.rewriting.basic import node_rewriter
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import DimShuffle
from pytensor.tensor.math import Max, Sum
from pytensor.tensor.shape import Reshape
from pytensor.tensor.signal.conv import Convolve2d

from pt_onnxscript.ops.signal import ChannelConv2d, Pool2d


def _expanded(var, new_order):
    """The 4-d tensor that `var` expands with `new_order`, if it does."""
    node = var.owner
    if node is not None and isinstance(node.op, DimShuffle) and tuple(node.op.new_order) == new_order:
        return node.inputs[0]
    return None


@node_rewriter([Sum, DimShuffle])
def channel_convolution(fgraph, node):
    # The sum over the input channels, or the dropping of that axis when there is one channel.
    if isinstance(node.op, Sum):
        if tuple(node.op.axis or ()) != (2,):
            return None
    elif tuple(node.op.new_order) != (0, 1, 3, 4):
        return None
    conv = node.inputs[0].owner
    if conv is None or not (isinstance(conv.op, Blockwise) and isinstance(conv.op.core_op, Convolve2d)):
        return None
    x = _expanded(conv.inputs[0], (0, "x", 1, 2, 3))
    w = _expanded(conv.inputs[1], ("x", 0, 1, 2, 3))
    mode = conv.inputs[2]
    if x is None or w is None or not isinstance(mode, Constant):
        return None
    out = ChannelConv2d(bool(mode.data))(x, w)
    if out.type.dtype != node.outputs[0].type.dtype:
        return None
    return [out]


@node_rewriter([Max])
def max_pooling(fgraph, node):
    reshape = node.inputs[0].owner
    if tuple(node.op.axis or ()) != (3, 5) or reshape is None or not isinstance(reshape.op, Reshape):
        return None
    x = reshape.inputs[0]
    _, c, rows, p, cols, q = reshape.outputs[0].type.shape
    if x.type.ndim != 4 or None in (rows, p, cols) or p != q or c is None or x.type.shape[1] not in (c, None):
        return None
    return [Pool2d(p, rows, cols)(x)]


optdb["specialize"].register("onnx_channel_convolution", channel_convolution, "onnx")
optdb["specialize"].register("onnx_max_pooling", max_pooling, "onnx")
