"""Rewrites for mode "ONNX" and export (tag "onnx"): the usual CNN idioms as one ONNX op each.

- sum over input channels of a batched convolve2d, written as
  ``convolve2d(x[:, None], w[None], mode="valid"|"full").sum(axis=2)`` (a Squeeze of that axis
  once PyTensor knows there is one channel), becomes ChannelConv2d (one ONNX Conv in float32);
- non-overlapping max pooling, written as
  ``h.reshape((n, c, h // p, p, w // p, p)).max(axis=(3, 5))``, becomes Pool2d (MaxPool);
- a reduction of a checked value, ``Sum(Check(x, conditions))`` (a PyMC log-density's sum of
  checked terms), becomes ``Check(Sum(x), conditions)``, so the check's failure guard holds
  up the scalar (reduce_before_check);
- calls of one scalar function whose translation is a decomposition (gammaln, digamma, erf
  in float64, ...) on values of static shape and a few thousand elements in all that do not
  depend on each other become one call on their arguments flattened and joined
  (StackScalarCalls);
- after specialize, identical nodes are merged by a merge that looks at every node again
  (MergeAfresh): PyTensor's own merge misses copies made while its scheduled merges wait;
  before it, a DimShuffle dropping a length-1 slice's axis reads an index instead
  (dropped_slices_indexed), and after it, a DimShuffle of an Elemwise's result becomes the
  same Elemwise of DimShuffled inputs where the graph computes that already
  (dimshuffle_of_elemwise_computed), and a second merge follows;
- for what export rewrites again (the copy of a compiled graph whose shared variables are
  baked, Scan and OpFromGraph inner graphs: tag "onnx_folding", in place of PyTensor's
  topo_constant_folding and constant_folding_for_scan2), constant folding that runs an
  in-place Op on copies of the constants it destroys and leaves the C backend's fused
  reductions to the translation (constant_folding_on_copies).

All are exact replacements; graphs that do not match are translated op by op.
"""

import copy
from collections import defaultdict

import numpy as np
import pytensor.scalar.basic as ps
import pytensor.scalar.math as scalar_math
from pytensor.compile import optdb
from pytensor.graph.basic import Apply, Constant
from pytensor.graph.op import Op
from pytensor.graph.rewriting.basic import (
    GraphRewriter,
    MergeOptimizer,
    copy_stack_trace,
    dfs_rewriter,
    in2out,
    node_rewriter,
)
from pytensor.graph.traversal import ancestors
from pytensor.raise_op import CheckAndRaise
from pytensor.scalar import Composite, Exp, Log, upcast
from pytensor.tensor.basic import MakeVector, as_tensor_variable, cast, concatenate
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.extra_ops import broadcast_to
from pytensor.tensor.math import Max, Sum, exp, isinf, log, makeKeepDims, switch
from pytensor.tensor.math import sum as pt_sum
from pytensor.tensor.rewriting.basic import unconditional_constant_folding
from pytensor.tensor.rewriting.elemwise import is_dimshuffle_useless
from pytensor.tensor.rewriting.uncanonicalize import local_dimshuffle_subtensor
from pytensor.tensor.shape import Reshape, Shape, Shape_i
from pytensor.tensor.signal.conv import Convolve2d
from pytensor.tensor.subtensor import Subtensor
from pytensor.tensor.type import TensorType


class ChannelConv2d(Op):
    """(N, Cin, H, W), (Cout, Cin, kh, kw) -> (N, Cout, H', W'): the sum over input channels of
    2-d true convolutions, "valid" or "full"."""

    __props__ = ("full",)

    def __init__(self, full: bool):
        self.full = full

    def make_node(self, x, w):
        x, w = as_tensor_variable(x), as_tensor_variable(w)
        grow = 1 if self.full else -1
        spatial = [
            None if n is None or k is None else n + grow * (k - 1)
            for n, k in zip(x.type.shape[2:], w.type.shape[2:], strict=True)
        ]
        out = TensorType(
            upcast(x.dtype, w.dtype), shape=(x.type.shape[0], w.type.shape[0], *spatial)
        )
        return Apply(self, [x, w], [out()])

    def infer_shape(self, fgraph, node, shapes):
        (n, _, h, w), (cout, _, kh, kw) = shapes
        grow = 1 if self.full else -1
        return [(n, cout, h + grow * (kh - 1), w + grow * (kw - 1))]

    def perform(self, node, inputs, outputs):
        import scipy.signal  # only here: importing it takes longer than pt_onnxscript

        x, w = inputs
        mode = "full" if self.full else "valid"
        rows = [
            [
                sum(scipy.signal.convolve(xn[c], wo[c], mode=mode) for c in range(x.shape[1]))
                for wo in w
            ]
            for xn in x
        ]
        outputs[0][0] = np.asarray(rows, dtype=node.outputs[0].type.dtype).reshape(
            _conv_shape(x.shape, w.shape, self.full)
        )


def _conv_shape(x_shape, w_shape, full: bool):
    n, _, h, w = x_shape
    cout, _, kh, kw = w_shape
    grow = 1 if full else -1
    return (n, cout, h + grow * (kh - 1), w + grow * (kw - 1))


class Pool2d(Op):
    """(N, C, rows * p, cols * p) -> (N, C, rows, cols): the max over p x p windows."""

    __props__ = ("size", "rows", "cols")

    def __init__(self, size: int, rows: int, cols: int):
        self.size, self.rows, self.cols = size, rows, cols

    def make_node(self, x):
        x = as_tensor_variable(x)
        shape = (*x.type.shape[:2], self.rows, self.cols)
        return Apply(self, [x], [TensorType(x.dtype, shape=shape)()])

    def infer_shape(self, fgraph, node, shapes):
        n, c, _, _ = shapes[0]
        return [(n, c, self.rows, self.cols)]

    def perform(self, node, inputs, outputs):
        (x,) = inputs
        p = self.size
        if x.shape[2:] != (self.rows * p, self.cols * p):
            raise ValueError(f"cannot pool {x.shape} into {self.rows} x {self.cols} windows of {p}")
        n, c = x.shape[:2]
        outputs[0][0] = x.reshape(n, c, self.rows, p, self.cols, p).max(axis=(3, 5))


def _expanded(var, new_order, depth: int = 3):
    """The 4-d tensor that `var` expands with `new_order`, if it does: directly, or through
    an elementwise op of such expansions and of values of length 1 there (a ReLU of the
    previous layer, whose expansion PyTensor's rewrites moved under it)."""
    node = var.owner
    if node is None:
        return None
    if isinstance(node.op, DimShuffle) and tuple(node.op.new_order) == new_order:
        return node.inputs[0]
    if not isinstance(node.op, Elemwise) or depth == 0:
        return None
    axis = new_order.index("x")
    inputs = []
    for value in node.inputs:
        inner = _expanded(value, new_order, depth - 1)
        if inner is None:
            if not value.type.broadcastable[axis]:
                return None
            inner = value.squeeze(axis)
        inputs.append(inner)
    if not any(isinstance(value.owner and value.owner.op, DimShuffle) for value in node.inputs):
        return None
    return node.op(*inputs)


def _channel_sum(node):
    """How `node` sums a convolution's input channels (axis 2 of a Blockwise Convolve2d's
    output): a Sum over axis 2, or, for one channel, a DimShuffle dropping axis 2 (and
    perhaps inserting others, where PyTensor merged the next layer's expansion into it).
    Returns the 4-d result's DimShuffle order after the sum ((0, 1, 2, 3) for none), or
    None."""
    if isinstance(node.op, Sum):
        return (0, 1, 2, 3) if tuple(node.op.axis or ()) == (2,) else None
    if not isinstance(node.op, DimShuffle) or 2 not in node.op.drop:
        return None
    order = node.op.new_order
    kept = [d for d in order if d != "x"]
    if kept != [0, 1, 3, 4]:
        return None
    return tuple(d if d == "x" else {0: 0, 1: 1, 3: 2, 4: 3}[d] for d in order)


@node_rewriter([Sum, DimShuffle])
def channel_convolution(fgraph, node):
    # The sum over the input channels, or the dropping of that axis when there is one channel.
    order = _channel_sum(node)
    if order is None:
        return None
    conv = node.inputs[0].owner
    if conv is None or not (
        isinstance(conv.op, Blockwise) and isinstance(conv.op.core_op, Convolve2d)
    ):
        return None
    x = _expanded(conv.inputs[0], (0, "x", 1, 2, 3))
    w = _expanded(conv.inputs[1], ("x", 0, 1, 2, 3))
    mode = conv.inputs[2]
    if x is None or w is None or not isinstance(mode, Constant):
        return None
    out = ChannelConv2d(bool(mode.data))(x, w)
    if out.type.dtype != node.outputs[0].type.dtype:
        return None
    return [out if order == (0, 1, 2, 3) else out.dimshuffle(order)]


@node_rewriter([Max])
def max_pooling(fgraph, node):
    reshape = node.inputs[0].owner
    if (
        tuple(node.op.axis or ()) != (3, 5)
        or reshape is None
        or not isinstance(reshape.op, Reshape)
    ):
        return None
    x = reshape.inputs[0]
    # Made again: sizes that were symbolic when the graph was built may be constants now (the
    # kernel of a baked convolution), which the node's own type does not know yet.
    _, c, rows, p, cols, q = reshape.op.make_node(*reshape.inputs).outputs[0].type.shape
    if (
        x.type.ndim != 4
        or None in (rows, p, cols)
        or p != q
        or c is None
        or x.type.shape[1] not in (c, None)
    ):
        return None
    return [Pool2d(p, rows, cols)(x)]


@node_rewriter([Reshape])
def flatten_own_batch(fgraph, node):
    """``v.reshape((w.shape[0], ...))`` where PyTensor knows v and w have the same first dim
    -> ``v.reshape((v.shape[0], ...))``: the flatten before a dense layer (``h.reshape((x.shape[0],
    -1))``) reads v's own leading dim, which its translation makes one ONNX Flatten."""
    v, shape = node.inputs
    if shape.owner is None or not isinstance(shape.owner.op, MakeVector):
        return None
    first, *rest = shape.owner.inputs
    if first.owner is None or not isinstance(first.owner.op, Shape_i) or first.owner.op.i != 0:
        return None
    w = first.owner.inputs[0]
    shape_feature = getattr(fgraph, "shape_feature", None)
    if w is v or shape_feature is None or not shape_feature.same_shape(v, w, 0, 0):
        return None
    new_shape = shape.owner.op(Shape_i(0)(v), *rest)
    return [node.op(v, new_shape)]


@node_rewriter([CAReduce])
def reduce_before_check(fgraph, node):
    """A reduction of a checked value nothing else reads, ``Sum(Check(x, *conditions))`` ->
    ``Check(Sum(x), *conditions)``: the same value and the same failure, since the conditions
    do not depend on x. A PyMC log-density sums checked terms, and a check's failure guard
    copies the value it holds up (an ONNX Expand): a scalar, not every term."""
    [checked] = node.inputs
    check = checked.owner
    if check is None or not isinstance(check.op, CheckAndRaise):
        return None
    if len(fgraph.clients[checked]) != 1:
        return None
    value, *conditions = check.inputs
    reduced = node.op(value)
    copy_stack_trace(node.outputs[0], reduced)
    result = check.op(reduced, *conditions)
    copy_stack_trace(checked, result)
    return [result]


# Scalar functions translated as decompositions of dozens to thousands of ONNX nodes, and the
# dtypes where they are (None: all; ONNX Runtime has float32 Erf).
DECOMPOSED = {
    **dict.fromkeys(
        (
            scalar_math.GammaLn,
            scalar_math.Psi,
            scalar_math.TriGamma,
            scalar_math.Gamma,
            scalar_math.GammaInc,
            scalar_math.GammaIncC,
            scalar_math.GammaU,
            scalar_math.GammaL,
            scalar_math.BetaInc,
            scalar_math.Erfinv,
            scalar_math.Erfcinv,
            scalar_math.Erfcx,
            scalar_math.I0,
            scalar_math.I1,
            scalar_math.Ive,
            scalar_math.Kve,
            scalar_math.Log1mexp,
        )
    ),
    scalar_math.Erf: {"float64"},
    scalar_math.Erfc: {"float64"},
}
# The most calls stacked into one (each candidate's ancestors are walked once), and the most
# elements they may have in all: ONNX Runtime pays ~0.5 us a node, so stacking pays where
# the nodes' fixed cost outweighs their work on the elements (gammaln and digamma of x and
# of y stacked, against apart: 0.61x the time at 100 elements each, 0.88x at 1,000, 0.95x
# at 2,000, 1.11x at 16,000).
MOST_STACKED = 64
MOST_STACKED_ELEMENTS = 4096


class StackScalarCalls(GraphRewriter):
    """Calls of one DECOMPOSED scalar function on values of static shape, none depending on
    another and a few thousand elements in all, become one call on their arguments
    flattened and joined, each result its part of the result, reshaped: a PyMC logp calls
    gammaln on (nu + 1) / 2 and on nu / 2, its gradient digamma on both, a beta-binomial's
    gammaln and digamma on three arrays of the observations' shape, and ONNX Runtime pays
    per node, so the decomposition's nodes run once for all of them (two gammaln and two
    digamma of one element: 150 -> 93 us). The values are the same: an elementwise function
    of each element."""

    def apply(self, fgraph):
        calls = defaultdict(list)
        elements = defaultdict(int)
        for node in fgraph.toposort():
            key = _stackable(node)
            if key is None or len(calls[key]) == MOST_STACKED:
                continue
            size = _size(node.outputs[0])
            if elements[key] + size <= MOST_STACKED_ELEMENTS:
                calls[key].append(node)
                elements[key] += size
        # One function at a time, on the graph as the previous stackings left it: nodes that
        # are independent there stay so once stacked (a cycle would need one of them to read
        # another's result).
        for nodes in calls.values():
            chosen = _independent(nodes)
            if len(chosen) < 2:
                continue
            results = chosen[0].op(*(_joined(chosen, i) for i in range(len(chosen[0].inputs))))
            parts, start = [], 0
            for node in chosen:
                parts.append((node.outputs[0], _part(results, start, node.outputs[0])))
                start += _size(node.outputs[0])
            fgraph.replace_all_validate(parts, reason="onnx_stack_scalar_calls")


def _size(var) -> int:
    return int(np.prod(var.type.shape, dtype=np.int64))


def _stackable(node):
    """The key of the calls `node` can be stacked with (a DECOMPOSED function whose result
    has a static shape of at most MOST_STACKED_ELEMENTS elements), or None."""
    if not isinstance(node.op, Elemwise) or len(node.outputs) != 1:
        return None
    scalar_op = node.op.scalar_op
    dtypes = DECOMPOSED.get(type(scalar_op), ())
    out = node.outputs[0]
    if dtypes == () or (dtypes is not None and out.type.dtype not in dtypes):
        return None
    if None in out.type.shape or _size(out) > MOST_STACKED_ELEMENTS:
        return None
    return scalar_op, tuple(var.type.dtype for var in node.inputs)


def _joined(nodes, i):
    """The `i`-th arguments of `nodes`, each broadcast to its call's result and flattened,
    one after the other."""
    arguments = []
    for node in nodes:
        x, shape = node.inputs[i], node.outputs[0].type.shape
        if x.type.shape != shape:
            x = broadcast_to(x, shape)
        arguments.append(x[None] if x.type.ndim == 0 else x.ravel() if x.type.ndim > 1 else x)
    return concatenate(arguments)


def _part(results, start, out):
    """The part of the stacked `results` from `start` that is the call whose result was `out`."""
    if out.type.ndim == 0:
        return results[start]
    part = results[start : start + _size(out)]
    return part if out.type.ndim == 1 else part.reshape(out.type.shape)


def _independent(nodes):
    """The first of `nodes` and each next one that neither reads nor feeds those chosen."""
    chosen, above = [], []
    for node in nodes:
        read = set(ancestors(node.inputs))
        if any(
            other.outputs[0] in read or node.outputs[0] in seen
            for other, seen in zip(chosen, above)
        ):
            continue
        chosen.append(node)
        above.append(read)
    return chosen


LOOKUP_DEPTH = 8  # Elemwise levels _existing_dimshuffled looks through


def _existing_dimshuffled(fgraph, x, order, depth=LOOKUP_DEPTH):
    """A variable of `fgraph` (or a constant) equal to ``x.dimshuffle(order)``, or None: the
    DimShuffle itself, or an Elemwise already applied to DimShuffles of the inputs of the
    Elemwise that computes `x` (looked for through up to `depth` Elemwise levels)."""
    while x.owner is not None and isinstance(x.owner.op, DimShuffle):
        inner = x.owner.op.new_order
        order = tuple(i if i == "x" else inner[i] for i in order)
        x = x.owner.inputs[0]
    if is_dimshuffle_useless(order, x):
        return x
    if isinstance(x, Constant):
        return _dimshuffled_constant(x, order)
    for client, _ in fgraph.clients[x]:
        if isinstance(client.op, DimShuffle) and tuple(client.op.new_order) == order:
            return client.outputs[0]
    return _existing_elemwise_of_dimshuffled(fgraph, x, order, depth)


def _existing_elemwise_of_dimshuffled(fgraph, x, order, depth):
    """The variable of `fgraph` that applies the Elemwise computing `x` to its inputs
    DimShuffled by `order`, or None."""
    owner = x.owner
    if depth == 0 or owner is None or not isinstance(owner.op, Elemwise):
        return None
    inputs = []
    for i in owner.inputs:
        inputs.append(_existing_dimshuffled(fgraph, i, order, depth - 1))
        if inputs[-1] is None:
            return None
    readers = [fgraph.clients[i] for i in inputs if not isinstance(i, Constant)]
    for client, _ in readers[0] if readers else ():
        if (
            client.op == owner.op
            and len(client.inputs) == len(inputs)  # Elemwise(Add) takes any number
            and all(
                a is b or (isinstance(a, Constant) and a.equals(b))
                for a, b in zip(client.inputs, inputs, strict=True)
            )
        ):
            return client.outputs[x.index]
    return None


def _dimshuffled_constant(x, order):
    """The constant ``x.dimshuffle(order)``."""
    kept = [i for i in order if i != "x"]
    dropped = tuple(i for i in range(x.type.ndim) if i not in kept)
    value = np.squeeze(x.data, axis=dropped).transpose(np.argsort(np.argsort(kept)))
    return as_tensor_variable(value.reshape([1 if i == "x" else x.data.shape[i] for i in order]))


@node_rewriter([DimShuffle])
def dropped_slices_indexed(fgraph, node):
    """DimShuffle(x[i:i+1]) dropping that axis (and maybe adding others) -> DimShuffle(x[i]).
    PyTensor's local_dimshuffle_subtensor, which this calls, does it (late) for DimShuffles
    that only drop axes; a scalar parameter of a PyMC model is read both ways."""
    x = node.inputs[0]
    if x.owner is None or not isinstance(x.owner.op, Subtensor):
        return False
    kept = [i for i in node.op.new_order if i != "x"]
    if len(kept) == x.type.ndim:  # nothing dropped
        return False
    indexed = local_dimshuffle_subtensor.transform(fgraph, x.dimshuffle(kept).owner)
    if not indexed:
        return False
    order = [i if i == "x" else kept.index(i) for i in node.op.new_order]
    result = indexed[0].dimshuffle(order) if "x" in order else indexed[0]
    if not node.outputs[0].type.is_super(result.type):
        return False
    copy_stack_trace(node.outputs, result)
    return [result]


@node_rewriter([DimShuffle])
def dimshuffle_of_elemwise_computed(fgraph, node):
    """DimShuffle(Elemwise(x, ...)) -> the Elemwise(DimShuffle(x), ...) the graph already
    computes. PyTensor's local_dimshuffle_lift moves a DimShuffle below an Elemwise only if
    nothing else reads the Elemwise, so a log-density and its gradient can compute one value
    in both orders (``exp(eta)[None, None]`` and ``exp(eta[None, None])``), and every node
    downstream, a GP's Cholesky included, twice. Nothing is computed anew."""
    order = tuple(node.op.new_order)
    found = _existing_elemwise_of_dimshuffled(fgraph, node.inputs[0], order, LOOKUP_DEPTH)
    if found is None or found.type != node.outputs[0].type:
        return False
    return [found]


class MergeAfresh(GraphRewriter):
    """PyTensor's MergeOptimizer with a new MergeFeature, which looks at every node again.
    The feature attached at the start only compares a new node with nodes it has seen and
    found distinct: while merges it scheduled wait (specialize has no merge of its own; the
    next is at position 49) a copy made of a node waiting to be merged is never compared
    with it, and both stay. A PyMC GP's marginal likelihood and gradient kept four Choleskys
    of one matrix, where PyTensor's own modes run two (dimshuffle_of_elemwise_computed and
    the merge after it made it one)."""

    def apply(self, fgraph):
        feature = getattr(fgraph, "merge_feature", None)
        if feature is not None:
            fgraph.remove_feature(feature)
            del fgraph.merge_feature
        MergeOptimizer().rewrite(fgraph)


optdb.register(
    "onnx_dropped_slices_indexed", dfs_rewriter(dropped_slices_indexed), "onnx", position=2.38
)
optdb.register("onnx_merge_afresh", MergeAfresh(), "onnx", position=2.4)
optdb.register(
    "onnx_dimshuffle_of_elemwise_computed",
    dfs_rewriter(dimshuffle_of_elemwise_computed),
    "onnx",
    position=2.42,
)
optdb.register("onnx_merge_computed", MergeAfresh(), "onnx", position=2.44)
optdb.register("onnx_stack_scalar_calls", StackScalarCalls(), "onnx", position=2.5)


def is_length(var) -> bool:
    """Whether `var` is a length PyTensor computes from a shape (Shape_i, an entry of a
    Shape), hence >= 0."""
    owner = var.owner
    if owner is None:
        return False
    if isinstance(owner.op, Shape_i):
        return True
    return (
        isinstance(owner.op, Subtensor)
        and owner.inputs[0].owner is not None
        and isinstance(owner.inputs[0].owner.op, Shape)
    )


def is_zero(var) -> bool:
    return isinstance(var, Constant) and var.type.ndim == 0 and var.data == 0


def length_at_least_zero_of(node, root=lambda var: var):
    """n if Elemwise `node` is ``maximum(n, 0)`` or ``switch(0 < n, n, 0)`` of a length n
    (>= 0, `is_length`), its operands read through `root`; else None."""
    scalar_op = node.op.scalar_op
    if isinstance(scalar_op, ps.ScalarMaximum):
        a, b = (root(var) for var in node.inputs)
        n = a if is_zero(b) else b if is_zero(a) else None
    elif isinstance(scalar_op, ps.Switch):
        condition, then, other = node.inputs
        test = condition.owner
        if test is None or not isinstance(test.op, Elemwise):
            return None
        if not isinstance(test.op.scalar_op, ps.LT):
            return None
        zero, n = (root(var) for var in test.inputs)
        if not (is_zero(zero) and is_zero(root(other)) and root(then) is n):
            return None
    else:
        return None
    return n if n is not None and is_length(n) else None


@node_rewriter([Elemwise])
def length_at_least_zero(fgraph, node):
    """``switch(0 < n, n, 0)`` and ``maximum(n, 0)`` of a length n (>= 0) -> n. PyTensor's
    shape inference writes them for the leading dim of a vectorized graph (the symbolic
    number of points of a batched log-density), and then cannot see that two of its dims are
    one: each of its "Could not broadcast dimensions" Asserts compared n with max(n, 0)
    (14 in a hierarchical model's batched logp and gradient, ~5 ONNX nodes each)."""
    n = length_at_least_zero_of(node)
    if n is None or n.type != node.outputs[0].type:
        return None
    return [n]


class StabilizingMax(Max):
    """The maximum that the stabilized log-sum-exp subtracts (`onnx_log_sum_exp`): -inf over
    an empty slice, as PyTensor 3's C and Numba backends give every Max there, where NumPy's
    max, PyTensor's Python backend (2.38's C backend too) and our Max raise.
    log(sum(exp(x))) of an empty slice is -inf in every backend; stabilized with a Max that
    raises, mode "ONNX" raised."""

    empty_is_identity = True


@node_rewriter([Elemwise])
def log_sum_exp(fgraph, node):
    """PyTensor's local_log_sum_exp with a StabilizingMax: log(sum(exp(x))) ->
    max(x) + log(sum(switch(isinf(max), exp(max), exp(x - max)))), over the Sum's axes (a
    DimShuffle after the Sum kept), with x in the float dtype its Exp computes in.

    Of integers, isinf(max) folds to False and the switch to exp(x - max), which the rewrite
    matched again, without end: compiling ``logsumexp`` of an integer tensor never finished
    (nor does it in PyTensor's own modes, whose rewrite this is)."""
    if not isinstance(node.op.scalar_op, Log):
        return None
    sum_node = node.inputs[0].owner
    dimshuffle = None
    if sum_node is not None and isinstance(sum_node.op, DimShuffle):
        dimshuffle, sum_node = sum_node.op, sum_node.inputs[0].owner
    if sum_node is None or not isinstance(sum_node.op, Sum):
        return None
    exp_node, axis = sum_node.inputs[0].owner, sum_node.op.axis
    if not (
        exp_node is not None
        and isinstance(exp_node.op, Elemwise)
        and isinstance(exp_node.op.scalar_op, Exp)
    ):
        return None
    x = exp_node.inputs[0]
    dtype = exp_node.outputs[0].type.dtype
    if x.type.dtype != dtype:
        x = cast(x, dtype)  # the values Exp reads, exactly: it casts them so itself
    high = StabilizingMax(axis=axis)(x)
    kept = makeKeepDims(x, high, axis)
    result = high + log(pt_sum(switch(isinf(kept), exp(kept), exp(x - kept)), axis=axis))
    return [dimshuffle(result) if dimshuffle is not None else result]


# In place of PyTensor's (excluded by mode "ONNX", ONNXLinker.incompatible_rewrites), where it
# runs: stabilize and specialize.
for _db in ("stabilize", "specialize"):
    optdb[_db].register("onnx_log_sum_exp", log_sum_exp, "onnx")


@node_rewriter(None)
def constant_folding_on_copies(fgraph, node):
    """PyTensor's constant_folding, but an in-place Op (t + 1 written into t, a Cholesky
    overwriting its matrix) is run on copies of the constants it destroys, and a reduction
    fused with an Elemwise is not folded (_fused_reduction). A compiled graph holds in-place
    Ops, which PyTensor orders after the other readers of what they destroy; once its shared
    variables are baked (translate.baked_copy), PyTensor's folding ran them on the constants'
    own arrays, in an order of its own, and the other readers' folded values and the
    constants themselves became the destroyed ones."""
    if not node.op.do_constant_folding(fgraph, node) or _fused_reduction(node):
        return False
    destroyed = {i for positions in node.op.destroy_map.values() for i in positions}
    if destroyed and all(isinstance(var, Constant) for var in node.inputs):
        node = node.clone_with_new_inputs(
            [
                type(var)(var.type, copy.deepcopy(var.data), name=var.name)
                if i in destroyed
                else var
                for i, var in enumerate(node.inputs)
            ]
        )
    return unconditional_constant_folding.transform(fgraph, node)


def _fused_reduction(node) -> bool:
    """A reduction fused with an elementwise function (PyTensor's C backend makes
    ``sum(exp(x))`` one CAReduce of Composite{i0 + exp(i1)}: 2.38's default mode, and the
    inner graphs of Scans its C linker compiled, 3.0's too), whose Python implementation
    does not apply the function to the first element it reduces (it starts from x[0], not
    exp(x[0])): its translation computes it, and ONNX's folding of that."""
    return isinstance(node.op, CAReduce) and isinstance(node.op.scalar_op, Composite)


_folding_on_copies = in2out(
    constant_folding_on_copies, ignore_newtrees=True, name="onnx_constant_folding_on_copies"
)
for _phase in ("canonicalize", "uncanonicalize", "stabilize", "specialize"):
    optdb[_phase].register(
        "onnx_constant_folding_on_copies", _folding_on_copies, "onnx_folding", final_rewriter=True
    )
# Scan's own rewrites fold what they push out of a loop (the constants a bake pushed in).
optdb["scan_eqopt2"].register(
    "onnx_constant_folding_for_scan2",
    dfs_rewriter(constant_folding_on_copies, ignore_newtrees=True),
    "onnx_folding",
)
optdb["canonicalize"].register("onnx_reduce_before_check", reduce_before_check, "onnx")
optdb["canonicalize"].register("onnx_length_at_least_zero", length_at_least_zero, "onnx")
optdb["specialize"].register("onnx_length_at_least_zero", length_at_least_zero, "onnx")
optdb["specialize"].register("onnx_channel_convolution", channel_convolution, "onnx")
optdb["specialize"].register("onnx_flatten_own_batch", flatten_own_batch, "onnx")
optdb["specialize"].register("onnx_max_pooling", max_pooling, "onnx")
