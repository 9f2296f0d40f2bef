"""ONNX-level optimisation of every model, with onnxscript's optimizer over onnx-ir.

The passes are those of ``onnxscript.optimizer.optimize_ir`` (what torch.onnx runs): constant
folding with shape inference, pattern rewrites, dead-value removal, constants lifted to
initializers and deduplicated, common-subexpression elimination. The rewrite rules are
onnxscript's defaults minus those that can change a value, since an exported model must
compute exactly what PyTensor computes:

- ``x + 0``, ``x - 0``, ``x * 1``, ``x / 1 -> x``: their patterns match constants only to a
  tolerance (``x - 1e-9`` matched ``x - 0``), and -0.0 + 0.0 is +0.0, not x;
- ``Cast(Cast(x, float32), float16) -> Cast(x, float16)``: rounding twice is not rounding once;
- ``Min``/``Max`` pairs to ``Clip`` and the Relu/Clip fusions: NaN handling differs;
- batch-norm fusions into Conv or Gemm: they round the folded weights;

and Slices-to-Split, whose matcher tries every pair of nodes (export time quadratic in the
graph's size). Its Flatten-to-Reshape rule and the one that writes a Reshape's shape from
the inferred output shape are taken only where they write no -1 beside a 0 (ONNX Runtime
cannot infer that -1 for a tensor of no elements; under allowzero=1 the model is invalid).

Loops with a constant trip count that always run to the end (a scripted ``for k in
range(n)``, a Scan of constant length) are unrolled when the copies stay small
(`UNROLL_BUDGET` nodes): ONNX Runtime pays microseconds per Loop iteration and a fraction of
one per node, and the copies compute the same operations on the same values.

Shape arithmetic in a Loop body that reads only values from outside the loop (the checks of
broadcasting on rows of a Scan's sequences) is moved out of it (`hoist_loop_invariants`).

A Slice that keeps one index of an axis of static size becomes a Gather of that index
(`SliceOfOneIndex`): the same elements, and ONNX Runtime's Gather kernel takes less time
than its Slice kernel, which reads four index tensors first.

A constant of one element read by an elementwise node whose output's last dim is 1 gets that
output's rank (`match_scalar_ranks`): ONNX Runtime broadcasts a lower-rank scalar against an
(..., n, 1) tensor one element per call, ~10x the time of the same operation on (1, 1).

Symbolic dims stay symbolic (nothing is folded from an unknown size).
"""

import contextlib
import logging

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.optimizer import _constant_folding
from onnxscript.rewriter import MatchResult, RewritePass, RewriteRuleClassBase, RewriteRuleSet
from onnxscript.rewriter.rules import common as rules
from onnxscript.rewriter.rules.common import _basic_rules
from onnxscript.rewriter.rules.common import _materialize_reshape_shape as _materialize
from onnxscript.rewriter.rules.common._basic_rules import ExpandIdentity

from pt_onnxscript.inference import InferenceCache, shape_dims
from pt_onnxscript.inference import key as inference_key
from pt_onnxscript.walk import all_nodes, has_subgraphs


class ExpandToOwnShape(ExpandIdentity):
    """``Expand(x, shape) -> x`` when broadcasting x with `shape` gives x's own shape: `shape`
    is a constant no longer than x's rank whose entries are 1 or x's static dim, or empty
    (onnxscript's rule takes only x's exact shape; a Composite's output expanded by a
    broadcastable input's shape, [1], and a check that folded to passing, [], are the common
    cases)."""

    def check(self, context, x, shape):
        check = MatchResult()
        if shape.const_value is None:
            return check.fail("the shape is not a constant")
        target = shape.const_value.numpy().tolist()
        if not target:
            return check  # broadcasting with a 0-d shape: x whatever its shape
        if x.shape is None:
            return check.fail("the input's rank is not known")
        dims = x.shape.dims
        if len(target) > len(dims):
            return check.fail("the expand adds dims")
        for want, have in zip(reversed(target), reversed(dims)):
            if want != 1 and want != have:
                return check.fail(f"dim {want} may broadcast {have}")
        return check


# Two of onnxscript's Reshape rules may write a -1 ("infer this dim") beside a 0, a copied
# dim or a static 0: ONNX Runtime cannot infer the -1 when the other dims' product is 0, and
# under allowzero=1 such a shape makes the model invalid. They are taken where they do not.


class FlattenToReshape(_basic_rules.Flatten2Reshape):
    """onnxscript's ``Flatten(x) -> Reshape(x, shape)``, unless `shape` holds both a 0 and a
    -1: ``Reshape(x, [0, -1])`` fails in ONNX Runtime for x of shape (0, 3, 4), which Flatten
    takes to (0, 12)."""

    def check(self, context, x):
        check = super().check(context, x)
        if check and -1 in self._new_shape and 0 in self._new_shape:
            return check.fail("a -1 beside a 0: not inferable for a tensor of no elements")
        return check


class MaterializeReshapeShape(_materialize.MaterializeReshapeShape):
    """onnxscript's rule that writes a Reshape's shape from its output's inferred shape (a -1
    for one symbolic dim, allowzero=1), unless a static dim is 0: a -1 beside a 0 under
    allowzero=1 is an invalid model."""

    def check(self, context, data, shape):
        check = super().check(context, data, shape)
        if check and -1 in self._new_dims and 0 in self._new_dims:
            return check.fail("a -1 beside a 0 under allowzero=1")
        return check


def _repaired_where(op, cond, a, b, negative_zero, zero, one, minus_one):
    """The pattern of `ops.common.where`'s repaired Where, whose "a is -0.0" test is
    `negative_zero`: ``Where(c, a, b) * Where(c and a is -0.0 and the result is +0.0, -1, 1)``."""
    result = op.Where(cond, a, b)
    lost = op.And(op.And(cond, negative_zero), op.Greater(op.Div(one, result), zero))
    return op.Mul(result, op.Where(lost, minus_one, one))


def _repair_constants(zero, one, minus_one) -> MatchResult:
    """Whether the repair's constants are 0, 1 and -1."""
    check = MatchResult()
    for value, expected in ((zero, 0), (one, 1), (minus_one, -1)):
        if not _constant_equal(value, expected):
            return check.fail(f"{value.name} is not the constant {expected}")
    return check


class SignRepairedWhere(RewriteRuleClassBase):
    """`ops.common.where`'s repair of ONNX Runtime's Where, which turns a -0.0 taken from its
    second input into +0.0: ``Where(c, a, b) * Where(c and a is -0.0, -1, 1)``, built when
    neither branch was a known constant, becomes ``Where(Not(c), b, a)`` once constant
    folding shows that `b` is a constant without -0.0 (or ``Where(c, a, b)`` for such an
    `a`): two nodes instead of eleven (the negation is a Xor with True, see `negate`)."""

    def pattern(self, op, cond, a, b, zero, one, minus_one):
        negative_zero = op.And(op.Equal(a, zero), op.Less(op.Div(one, a), zero))
        return _repaired_where(op, cond, a, b, negative_zero, zero, one, minus_one)

    def check(self, context, cond, a, b, zero, one, minus_one, **_):
        check = _repair_constants(zero, one, minus_one)
        if not check:
            return check
        if not (no_negative_zero(a) or no_negative_zero(b)):
            return check.fail("neither branch is a constant without -0.0")
        return check

    def rewrite(self, op, cond, a, b, **_):
        if no_negative_zero(a):
            return op.Where(cond, a, b)
        true = op.Constant(value=ir.tensor(np.array(True)))
        return op.Where(op.Xor(cond, true), b, a)


class FoldedSignRepair(RewriteRuleClassBase):
    """The same repair once constant folding has turned its "a is -0.0" into a constant that
    is false everywhere (`a` a constant such as -inf, known only after folding, the folder
    having folded that part before `SignRepairedWhere` could match): the correcting factor
    is ``Where(And(And(c, False), ...), -1, 1)``, 1 everywhere, so ``result * 1 -> result``
    (NaN, -0.0 and inf times 1 are themselves): one node instead of seven."""

    def pattern(self, op, cond, a, b, negative_zero, zero, one, minus_one):
        return _repaired_where(op, cond, a, b, negative_zero, zero, one, minus_one)

    def check(self, context, cond, a, b, negative_zero, zero, one, minus_one, **_):
        check = _repair_constants(zero, one, minus_one)
        if not check:
            return check
        flags = ir.convenience.get_const_tensor(negative_zero)
        if flags is None or flags.numpy().any():
            return check.fail("the -0.0 test is not a constant false everywhere")
        if flags.size != 1 or any(value.shape is None for value in (cond, a, b)):
            return check.fail("the test may broadcast the result to another shape")
        rank = max(len(value.shape) for value in (cond, a, b))
        if len(flags.shape) > rank:
            return check.fail("the test has more dims than the result")
        return check

    def rewrite(self, op, cond, a, b, **_):
        return op.Where(cond, a, b)


class LeadingUnsqueezeBroadcast(RewriteRuleClassBase):
    """``op(x, Unsqueeze(y, [0, .., k-1])) -> op(x, y)`` for a broadcasting binary `op`
    (and with the operands swapped) when x has at least the Unsqueeze's rank: broadcasting
    aligns trailing dims and pads with leading 1s, so the result is the same (PyTensor's
    ``b[None, :]`` of ``x @ w + b``)."""

    def __init__(self, op_type: str, unsqueezed_first: bool):
        # The Unsqueeze may feed other nodes: it stays, and goes once nothing reads it.
        name = f"LeadingUnsqueeze{op_type}{'First' if unsqueezed_first else ''}"
        super().__init__(name, remove_nodes=False)
        self.op_type, self.unsqueezed_first = op_type, unsqueezed_first

    def pattern(self, op, x, y, axes):
        unsqueezed = op.Unsqueeze(y, axes)
        operands = (unsqueezed, x) if self.unsqueezed_first else (x, unsqueezed)
        return getattr(op, self.op_type)(*operands)

    def check(self, context, x, y, axes):
        check = MatchResult()
        if axes.const_value is None or x.shape is None or y.shape is None:
            return check.fail("the axes or a rank are not known")
        added = axes.const_value.numpy().reshape(-1).tolist()
        rank = len(y.shape) + len(added)
        if sorted(a % rank for a in added) != list(range(len(added))):
            return check.fail("the Unsqueeze adds dims other than leading ones")
        if len(x.shape) < rank:
            return check.fail("the other operand's rank is lower")
        column = (
            len(x.shape) >= 2
            and (x.shape[-1] == 1 or not isinstance(x.shape[-1], int))
            and any(d != 1 for d in x.shape.dims)
        )
        wide = len(y.shape) > 0 and isinstance(y.shape[-1], int) and y.shape[-1] > 1
        if column and len(y.shape) < 2 and not wide:
            # y may be a scalar and x a column (its last dim 1 or not known): ONNX Runtime
            # broadcasts a 0-d or 1-d scalar against a column one element per call
            # (match_scalar_ranks).
            return check.fail("a possible scalar against a possible column")
        return check

    def rewrite(self, op, x, y, axes):
        operands = (y, x) if self.unsqueezed_first else (x, y)
        return getattr(op, self.op_type)(*operands)


_BROADCASTING = ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater")


class SliceOfOneIndex(RewriteRuleClassBase):
    """``Slice(x, [s], [e], [axis])`` that keeps one index i along an axis of static size
    (step 1) -> ``Gather(x, [i], axis)``: the same elements in the same shape. ONNX Runtime
    runs the Gather in less time than the Slice, whose kernel first reads its starts, ends,
    axes and steps (one thread, 50 such nodes in a row: the same time on a 32 x 32 matrix, 0.76x
    on a 100 x 100 one, 0.80x on a 1,000-vector, 0.95-0.99x for rows and columns of
    1,000 x 32 and of batched matrices; never more); the unrolled columns of a Cholesky read
    their rows and pivots so (50 x 50: 0.89x the time)."""

    def __init__(self):
        super().__init__("SliceOfOneIndex")
        self._index = self._axis = None

    def pattern(self, op, x, starts, ends):
        return op.Slice(x, starts, ends, _allow_other_inputs=True, _outputs=["sliced"])

    def check(self, context, x, starts, ends, sliced):
        check = MatchResult()
        node = sliced.producer()
        axes, steps = (list(node.inputs[3:]) + [None, None])[:2]
        values = [_small_ints(v) for v in (starts, ends, axes, steps)]
        if any(v is None for v in values[:2]) or len(values[0]) != 1 or len(values[1]) != 1:
            return check.fail("not one constant start and end")
        if (axes is not None and values[2] is None) or (steps is not None and values[3] is None):
            return check.fail("axes or steps are not one constant each")
        if values[3] not in (None, [1]) or x.shape is None:
            return check.fail("a step other than 1, or x's rank is not known")
        axis = 0 if axes is None else values[2][0]
        if not -x.shape.rank() <= axis < x.shape.rank():
            return check.fail("the axis is out of range")
        axis %= x.shape.rank()
        size = x.shape[axis]
        if not isinstance(size, int):
            return check.fail("the sliced axis is of symbolic size")
        start, end = (
            min(max(v + size if v < 0 else v, 0), size) for v in (values[0][0], values[1][0])
        )
        if end - start != 1:
            return check.fail("the Slice keeps other than one index")
        self._index, self._axis = start, axis
        return check

    def rewrite(self, op, x, **_):
        index = op.Constant(value=ir.tensor(np.array([self._index], np.int64)))
        return op.Gather(x, index, axis=self._axis)


def _small_ints(value: ir.Value | None) -> list[int] | None:
    """The entries of `value`, a constant integer tensor of at most one element, as ints
    (None if it is not one)."""
    tensor = None if value is None else ir.convenience.get_const_tensor(value)
    if (
        tensor is None
        or tensor.size > 1
        or tensor.dtype not in (ir.DataType.INT64, ir.DataType.INT32)
    ):
        return None
    return [int(v) for v in tensor.numpy().reshape(-1)]


def _constant_equal(value: ir.Value, expected: float) -> bool:
    tensor = ir.convenience.get_const_tensor(value)
    return tensor is not None and tensor.size == 1 and float(tensor.numpy().item()) == expected


def no_negative_zero(value: ir.Value) -> bool:
    """Whether `value` is a constant known to hold no -0.0, or a value `non_negative` shows
    holds none (`ops.common.where` asks too)."""
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return non_negative(value)
    array = tensor.numpy()
    return not np.any((array == 0) & np.signbit(array))


# Operators whose results are >= +0.0 or NaN, never -0.0, whatever their inputs; and those
# whose results are when every input is.
_NON_NEGATIVE = frozenset({"Exp", "Abs", "Sigmoid", "Softplus"})
_NON_NEGATIVE_OF_NON_NEGATIVE = frozenset({"Add", "Mul", "Div", "Reciprocal", "Sqrt", "Max", "Min"})
# The metadata key with which a translation marks a value it knows is >= +0.0 or NaN.
NON_NEGATIVE = "pt_onnxscript.non_negative"


def non_negative(value: ir.Value, depth: int = 8) -> bool:
    """Whether every element of float `value` is >= +0.0 or NaN, so never -0.0: a constant
    so, an Exp, Abs, Sigmoid or Softplus, a sum, product, quotient, reciprocal, square root,
    maximum or minimum of such values, a Where choosing between them, a cast of booleans or
    unsigned integers (a logistic's probability, 1 / (1 + exp(-x)), is one), or a value a
    translation marked so (`NON_NEGATIVE` in its metadata)."""
    if value.meta.get(NON_NEGATIVE):
        return True
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is not None:
        array = tensor.numpy()
        return array.dtype.kind == "f" and not np.any(
            (array < 0) | ((array == 0) & np.signbit(array))
        )
    node = value.producer()
    if node is None or depth == 0 or node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type in _NON_NEGATIVE:
        return True
    if node.op_type == "Cast":
        source = node.inputs[0].dtype
        return source is not None and (source == ir.DataType.BOOL or source.name.startswith("UINT"))
    inputs = node.inputs[1:] if node.op_type == "Where" else node.inputs
    if node.op_type == "Where" or node.op_type in _NON_NEGATIVE_OF_NON_NEGATIVE:
        return all(v is not None and non_negative(v, depth - 1) for v in inputs)
    return False


# onnxscript's default rules (onnxscript.rewriter._DEFAULT_REWRITE_RULES), minus those above.
EXACT_RULES = RewriteRuleSet(
    [
        rules.dropout_zero_rule,
        rules.dropout_inference_rule,
        rules.one_reshape_matmul_reshape_rule,
        rules.two_reshapes_matmul_reshape_rule,
        rules.cast_constant_of_shape_rule,
        rules.cast_constant_of_shape_without_value_rule,
        rules.collapse_slice_rule,
        rules.collapse_slice2_rule,
        MaterializeReshapeShape.rule(),
        rules.max_max_rule,
        rules.min_min_rule,
        rules.successive_relu_rule,
        rules.no_op_cast_rule,
        ExpandToOwnShape.rule(),
        SignRepairedWhere.rule(),
        FoldedSignRepair.rule(),
        FlattenToReshape.rule(),
        rules.reshape_reshape_rule,
        rules.no_op_transpose_rule,
        rules.transpose_transpose_rule,
        rules.unsqueeze_unsqueeze_rule,
        rules.squeeze_reshape_1d_rule,
        rules.no_op_dynamic_scatter_nd_rule,
        rules.no_op_static_scatter_nd_rule,
        rules.normalize_pad_format_conv_rule,
        rules.fuse_pad_into_conv_rule,
        rules.remove_optional_bias_from_conv_rule,
        rules.remove_optional_bias_from_gemm_rule,
        SliceOfOneIndex.rule(),
        *(
            LeadingUnsqueezeBroadcast.rule(op_type, first)
            for op_type in _BROADCASTING
            for first in (False, True)
        ),
    ]
)


def _rules_for(model: ir.Model) -> RewriteRuleSet | None:
    """The rules whose pattern ends in an operator the model has, as one set that tries each
    only on the nodes of that operator (`_ByRoot`). The set leaves removing what the
    rewrites left unread to `optimize`, which does it when a rule applied (the set would run
    RemoveUnusedNodesPass after every pass, applied or not)."""
    present = {(node.domain or "", node.op_type) for node in all_nodes(model.graph)}
    rules = [rule for rule in EXACT_RULES.rules if _root(rule) in present]
    if not rules:
        return None
    rule_set = RewriteRuleSet([_ByRoot(rules)])
    rule_set.remove_unused_nodes = False
    return rule_set


def _root(rule) -> tuple[str, str]:
    """The (domain, operator) of the one node a rule's pattern ends in."""
    outputs = rule._target_pattern.output_nodes
    if len(outputs) != 1:
        raise TypeError(f"rewrite rule {rule.name} must end in one node, not {len(outputs)}")
    (output,) = outputs
    domain, op_type, _ = output.op_identifier()
    return domain or "", op_type


class _ByRoot:
    """Rewrite rules acting as one rule of a RewriteRuleSet that tries, on each node, only
    the rules whose pattern ends in that node's operator, in their order in the set.

    onnxscript's RewriteRuleSet tries every rule on every node, and a rule fails a node of
    another operator only after its matcher's set-up: 44 rules on each of the ~6,500 nodes
    of a betaincinv took 0.28 s of its 3 s export, in rounds that rewrote nothing. The set reads
    a rule's `name`, `remove_nodes` and `as_function` after the rule applied: this object
    takes them from the rule that did."""

    def __init__(self, rules):
        self._rules = list(rules)
        self._by_root: dict[tuple[str, str], list] = {}
        for rule in self._rules:
            self._by_root.setdefault(_root(rule), []).append(rule)
        self.name, self.remove_nodes, self.as_function = None, True, False

    def graph_pre_visitor(self) -> None:
        for rule in self._rules:
            if rule.graph_pre_visitor:
                rule.graph_pre_visitor()

    def graph_post_visitor(self) -> None:
        for rule in self._rules:
            if rule.graph_post_visitor:
                rule.graph_post_visitor()
            _forget_last_match(rule)

    def try_rewrite(self, model, graph_or_function, node, **kwargs):
        for rule in self._by_root.get((node.domain or "", node.op_type), ()):
            delta = rule.try_rewrite(model, graph_or_function, node, **kwargs)
            if delta is not None:
                self.name, self.remove_nodes = rule.name, rule.remove_nodes
                self.as_function = rule.as_function
                return delta
        return None


# What onnxscript's SimplePatternMatcher keeps of the last node it tried (0.7.2): the graph,
# the node and the match result, each reaching the whole model.
_MATCH_STATE = ("_graph", "_current_node", "_match", "_tracer")


def _forget_last_match(rule) -> None:
    """Drop what `rule`'s matcher keeps of the graph it last tried. The rules are module-level
    objects (EXACT_RULES), so an export's whole model, its weights and folded constants
    included, stayed alive after the export returned, until the next export's rewrites
    replaced it; each match sets these again before reading them."""
    state = getattr(getattr(rule, "_matcher", None), "__dict__", {})
    for name in _MATCH_STATE:
        if name in state:
            state[name] = None


def _fails_on_constants(node: ir.Node) -> bool:
    """Whether `node` is a failure check (ops.common.failure_guard's Gather) whose index is a
    constant that fails it: folding it fails too (onnxscript logs that evaluation failed)."""
    from pt_onnxscript.ops.common import CHECK

    if CHECK not in node.meta:
        return False
    index = node.inputs[1].const_value if node.inputs[1] is not None else None
    return index is not None and bool(np.any(index.numpy() != 0))


# The operators `_FoldConstants` folds itself: its method for each.
_FOLDED_HERE = {"GatherElements": "_gather_elements", "Split": "_split"}


class _FoldConstants(_constant_folding.FoldConstantsPass):
    """onnxscript's constant folding with shape inference (`fold_constants_ir`'s defaults),
    its per-node inference cached (`pt_onnxscript.inference`; onnxscript is pinned below
    0.8, whose folder this extends).

    A later round visits only what changed: a node an earlier round visited and left in
    place is passed over while it reads the same values, of the same types, shapes and
    constant values (`visited`, shared by the rounds), since its visit would decide the same
    again. The rounds after the first change a few nodes of thousands (a rewrite, an unrolled
    loop), and their new nodes and those reading what they replaced are visited."""

    def __init__(self, inferred: InferenceCache, visited: dict[ir.Node, tuple]):
        super().__init__(
            shape_inference=True,
            input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
            output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
        )
        self._inferred = inferred
        self._visited = visited
        self.added_nodes = False

    def visit_node(self, node: ir.Node, root) -> None:
        visited = self._visited.get(node)
        if visited is not None and visited == _what_it_reads(node):
            for attr in node.attributes.values():
                self.visit_attribute(attr)  # a subgraph's nodes are looked at one by one
        else:
            super().visit_node(node, root)
            if node.graph is None:
                return  # replaced
            self._visited[node] = _what_it_reads(node)
        if node.op_type == "If" and node.domain in ("", "ai.onnx"):
            type_if_outputs(node)

    def replace_node(self, node: ir.Node, replacement, root) -> None:
        # The pass visits nodes in order, so the readers of a replaced node's outputs come
        # after it; but it does not visit the nodes a replacement puts in. A Constant put in
        # (a Shape of static dims, say) is given its value here, which is all a visit would
        # do; any other node (a Concat replaced by an Identity) leaves work for another pass.
        for new in replacement.new_nodes:
            if new.op_type == "Constant" and new.domain in ("", "ai.onnx"):
                _constant_folding._process_constant_node(new)
            else:
                self.added_nodes = True
        super().replace_node(node, replacement, root)

    def process_node(self, node: ir.Node, is_function: bool):
        if _fails_on_constants(node):
            return None  # to raise when run, not to log "Evaluation failed" now
        own = _FOLDED_HERE.get(node.op_type)
        if own is not None and node.domain in ("", "ai.onnx") and not is_function:
            folded = getattr(self, own)(node)
            if folded is not None:
                return folded
        return super().process_node(node, is_function)

    def _split(self, node: ir.Node):
        """A Split of a constant folded with NumPy, within the pass's size limits: onnxscript
        folds nodes of one output only, and warned of each Split it met ("Skipping constant
        folding for op Split with multiple outputs": the Sturm recurrence's rows, in the
        eigenvalues of a constant matrix), leaving what reads it to every call."""
        data, sizes = (list(node.inputs) + [None])[:2]
        if data.is_graph_input() or data.const_value is None:
            return None
        if sizes is not None and (sizes.is_graph_input() or sizes.const_value is None):
            return None
        if data.const_value.size > self.input_size_limit:
            return None
        array = data.const_value.numpy()
        if array.ndim == 0:
            return None
        axis = node.attributes.get_int("axis", 0) % array.ndim
        length, count = array.shape[axis], len(node.outputs)
        if sizes is not None:
            sizes = sizes.const_value.numpy().reshape(-1).astype(np.int64).tolist()
        elif "split" in node.attributes:  # opset 11
            sizes = list(node.attributes.get_ints("split"))
        else:  # num_outputs (or as many as outputs): equal parts, the last one smaller
            chunk = -(-length // count)
            sizes = [min(chunk, max(length - i * chunk, 0)) for i in range(count)]
        if len(sizes) != count or sum(sizes) != length or min(sizes) < 0:
            return None  # ONNX Runtime's error, at run time
        parts = np.split(array, np.cumsum(sizes)[:-1].tolist(), axis=axis)
        folded = []
        for part, output in zip(parts, node.outputs, strict=True):
            tensor = self._prepare_folded_tensor(node, output.name, np.ascontiguousarray(part))
            if tensor is None:
                return None
            folded.append(
                ir.Value(
                    name=output.name,
                    type=ir.TensorType(ir.DataType(tensor.dtype)),
                    shape=tensor.shape,
                    const_value=tensor,
                )
            )
        for value in folded:
            node.graph.register_initializer(value)
        return _constant_folding.Replacement(folded, [])

    def _gather_elements(self, node: ir.Node):
        """A GatherElements of constants folded with NumPy, within the pass's size limits: onnx's
        reference GatherElements (np.choose) fails past 64 entries along the axis ("Evaluation
        failed: Need at least 0 and at most 64 array objects"), which left the positions of a
        write at constant indices (5,000 of them into a 1,000-vector) to every call."""
        data, indices = node.inputs
        if any(value.is_graph_input() or value.const_value is None for value in (data, indices)):
            return None
        if max(data.const_value.size, indices.const_value.size) > self.input_size_limit:
            return None
        if indices.const_value.size > self.output_size_limit:
            return None
        array, index = data.const_value.numpy(), indices.const_value.numpy().astype(np.int64)
        axis = node.attributes.get_int("axis", 0) % max(array.ndim, 1)
        if array.ndim != index.ndim or array.ndim == 0:
            return None
        size = array.shape[axis]
        if np.any((index < -size) | (index >= size)):
            return None  # out of range: ONNX Runtime's error, at run time
        value = np.take_along_axis(array, np.where(index < 0, index + size, index), axis)
        folded = self.new_initializer(node, value)
        if folded is None:
            return None
        node.graph.register_initializer(folded)
        return _constant_folding.Replacement([folded], [])

    def _do_inference(self, node: ir.Node) -> None:
        key = inference_key(node, self._opset_imports.get(node.domain))
        if key is not None and self._inferred.replay(node, key):
            return
        super()._do_inference(node)
        if key is not None:
            self._inferred.record(node, key)


def type_if_outputs(node: ir.Node) -> None:
    """ONNX's type and shape inference of an If, which onnx's inference of a single node
    cannot run (it needs the branches' graphs, and the folder visits them after the node):
    each output has the type of both branches' outputs and the dims on which their shapes
    agree. Without it, everything computed from an If's outputs had no shape, and the Shape
    and Expand nodes reading them stayed in the model (a PyMC log-density calling gammaln
    or digamma kept a dozen)."""
    then_branch = node.attributes["then_branch"].as_graph()
    else_branch = node.attributes["else_branch"].as_graph()
    for output, then, other in zip(node.outputs, then_branch.outputs, else_branch.outputs):
        if then.type is None or then.type != other.type:
            continue
        if output.type is None:
            output.type = then.type
        if output.shape is not None or then.shape is None or other.shape is None:
            continue
        if len(then.shape) != len(other.shape):
            continue
        output.shape = ir.Shape(
            [
                a if _same_dim(a, b) else ir.SymbolicDim(None)
                for a, b in zip(then.shape, other.shape)
            ]
        )


def _same_dim(a, b) -> bool:
    """Whether dims `a` and `b` are known to be equal: equal sizes, or the same dim name."""
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a.value is not None and a.value == b.value


def _what_it_reads(node: ir.Node) -> tuple:
    """The values `node` reads, with their types, shapes and constant tensors: equal to an
    earlier one when the node reads the same values and tensors (compared by identity) of
    equal types and shapes."""
    return tuple(
        None if value is None else (value, value.type, shape_dims(value.shape), value.const_value)
        for value in node.inputs
    )


# Initializers of at most this many elements with equal values become one before the
# common-subexpression pass, which tells values apart by identity: onnx-ir's default (1,024)
# left a static solve's (50, 32) gather indices apart, and with them three computations of
# one matrix's diagonal-block inverses.
DEDUPLICATED_ELEMENTS = 65536


def optimize(model: ir.Model) -> None:
    """Optimise `model` in place, keeping every value exactly."""
    inferred, visited = InferenceCache(), {}
    subgraphs = has_subgraphs(model.graph)  # whose removal may leave dead readers
    changed = True  # since unread nodes were last removed: the translation leaves some
    for _ in range(4):
        # onnx's reference evaluator folds constants with NumPy, which warns where IEEE
        # arithmetic gives inf or NaN (1 / 0, log 0): those are the values ONNX Runtime
        # computes, so the warnings say nothing wrong.
        fold = _FoldConstants(inferred, visited)
        with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
            changed = fold(model).modified or changed
        # What the fold left unread goes before the rewrites: a dead reader still counts as
        # a use, and a pattern whose inner values must have one reader would not match.
        if changed:
            remove_unread(model, subgraphs)
        hoisted = unrolled = False
        if has_subgraphs(model.graph):  # Loops and Ifs: their passes (each walks the graph)
            common_passes.LiftSubgraphInitializersToMainGraphPass()(model)  # folded constants
            hoisted = hoist_loop_invariants(model.graph)
            unrolled = unroll_loops(model.graph) | unroll_by_factor(model.graph)
        rules = _rules_for(model)
        rewritten = rules is not None and RewritePass(rules)(model).modified
        if rewritten:
            remove_unread(model, subgraphs)
        changed = unrolled or hoisted  # what they replaced may be left unread
        # Another round only for what this one left to fold or rewrite: what the later
        # passes changed, or nodes the fold put in and did not visit (a fold right after a
        # fold that only replaced nodes by constants finds nothing, at the cost of the
        # first).
        if not (fold.added_nodes or unrolled or hoisted or rewritten):
            break
    match_scalar_ranks(model)
    with _without_output_initializer_warnings():
        ir.passes.Sequential(
            common_passes.RemoveUnusedOpsetsPass(),
            common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
            *(
                [common_passes.LiftSubgraphInitializersToMainGraphPass()]
                if has_subgraphs(model.graph)
                else []
            ),
            common_passes.DeduplicateInitializersPass(size_limit=DEDUPLICATED_ELEMENTS),
            common_passes.CommonSubexpressionEliminationPass(),
        )(model)
    remove_unread(model, subgraphs)  # what the merged copies read
    if model.functions or _outputs_to_fix(model.graph):
        common_passes.OutputFixPass()(model)


def _outputs_to_fix(graph: ir.Graph) -> bool:
    """Whether onnx-ir's OutputFixPass has something to do (it walks every subgraph twice,
    ~15 ms on 10,000 nodes, to find none): an output of `graph` listed twice or that is an
    input, or a subgraph, whose outputs it checks alike."""
    outputs = list(graph.outputs)
    return (
        len(set(outputs)) < len(outputs)
        or any(value.is_graph_input() for value in outputs)
        or has_subgraphs(graph)
    )


class _OutputInitializerWarning(logging.Filter):
    """onnx-ir's warning that an initializer which is a graph output is not deduplicated: a
    constant output (a gradient that does not depend on the inputs, say) is a model's right."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "as it is a graph input or output" not in record.getMessage()


@contextlib.contextmanager
def _without_output_initializer_warnings():
    logger = logging.getLogger(common_passes.DeduplicateInitializersPass.__module__)
    quiet = _OutputInitializerWarning()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def remove_unread(model: ir.Model, subgraphs: bool = True) -> None:
    """onnx-ir's RemoveUnusedNodesPass, when it has something to do (`_has_unread`): it looks
    up each node's schema, ~5 us a node, a fifth of the optimiser's time on a graph with
    nothing to remove. Readers left by removed subgraphs are dropped first
    (`drop_dead_readers`), where the model had `subgraphs`."""
    if subgraphs:
        drop_dead_readers(model)
    if _has_unread(model.graph) or any(
        not value.uses() and not value.is_graph_output()
        for value in model.graph.initializers.values()
    ):
        common_passes.RemoveUnusedNodesPass()(model)


def drop_dead_readers(model: ir.Model) -> None:
    """Detach the nodes outside the model that still read its values. Removing a node (the
    folder's removal of an If whose branch it inlines, say) detaches the node's own inputs
    but not those its subgraphs' nodes read from outside them, so a root constant read only
    by a removed branch kept a reader and stayed in the model (94 unused initializers in a
    batched static discrete Lyapunov solve), and a value's dead readers count as uses to the
    rewriter's patterns."""
    live = set(all_nodes(model.graph))
    values = [*model.graph.inputs, *model.graph.initializers.values()]
    values += [output for node in live for output in node.outputs]
    for value in values:
        for node, index in list(value.uses()):
            if node not in live:
                node.replace_input_with(index, None)


def _has_unread(graph: ir.Graph) -> bool:
    """Whether RemoveUnusedNodesPass would change a node of `graph` or of its subgraphs: a
    node with an output nothing reads or returns (the node goes, or that optional output), or
    with trailing empty inputs (they go)."""
    for node in graph:
        if node.inputs and node.inputs[-1] is None:
            return True
        for output in node.outputs:
            if not output.uses() and not output.is_graph_output():
                return True
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH and _has_unread(attr.as_graph()):
                return True
            if attr.type == ir.AttributeType.GRAPHS and any(map(_has_unread, attr.as_graphs())):
                return True
    return False


# Elementwise operators that broadcast their inputs (all of them).
ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Where"}
    | {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}
    | {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "PRelu"}
)


def match_scalar_ranks(model: ir.Model) -> None:
    """Give a constant of one element the rank of the output of the elementwise node that
    reads it when that output's last dim is 1: ONNX Runtime broadcasts a lower-rank scalar
    against an (..., n, 1) tensor one element per call (Add on a (500, 1) column and a 0-d
    constant: 12 us; with a (1, 1) constant: 1 us, same values)."""
    reshaped: dict[tuple[ir.Value, int], ir.Value] = {}
    for node in all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx") or node.op_type not in ELEMENTWISE:
            continue
        shape = node.outputs[0].shape
        if shape is None or len(shape) < 2 or shape[-1] != 1:
            continue
        rank = len(shape)
        for index, value in enumerate(node.inputs):
            if value is None or value.is_graph_input():  # an input may override it
                continue
            tensor = ir.convenience.get_const_tensor(value)
            if tensor is None or tensor.size != 1 or len(tensor.shape) >= rank:
                continue
            if (value, rank) not in reshaped:
                reshaped[value, rank] = _scalar_of_rank(model, value, tensor, rank)
            node.replace_input_with(index, reshaped[value, rank])


_FLOATS = frozenset([ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE])


def guard_against_runtime_rewrites(model: ir.Model) -> None:
    """Keep three of ONNX Runtime's graph rewrites from changing values, in one walk of the
    graph and its subgraphs: NoopElimination and DivMulFusion, which every optimisation level
    but none runs (`shield_unit_like_constants`, `reciprocal`), and MatmulTransposeFusion,
    which the "extended" and "all" (the default) levels run (`vector_times_matrix`). A
    constant 1 that only a Div read is dropped (ONNX Runtime warned of the unused
    initializer)."""
    ones = []
    for node in list(all_nodes(model.graph)):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Div":
            one = node.inputs[0]
            if reciprocal(node):
                ones.append(one)
                continue
        if node.op_type == "MatMul":
            vector_times_matrix(node)
        if node.op_type in _NOOP_OPERANDS:
            shield_unit_like_constants(node)
    initializers = model.graph.initializers
    for one in ones:
        if one.uses() or one.is_graph_output() or one.is_graph_input():
            continue
        producer = one.producer()
        if producer is not None and producer.op_type == "Constant":
            producer.graph.remove(producer, safe=True)
        elif initializers.get(one.name) is one:
            initializers.pop(one.name)


def vector_times_matrix(node: ir.Node) -> None:
    """``MatMul(Transpose(a), b)``, the Transpose swapping a's last two axes and b a vector,
    as ``MatMul(b, a)``: the same product, out of the reach of ONNX Runtime's
    MatmulTransposeFusion, whose FusedMatMul (transA) of a vector b computes a wrong one
    (every entry of x.T @ v for a 5 x 4 x, in float32 and float64; ONNX Runtime 1.32).
    PyTensor 2.38's C graphs carry such products: Gemv of a transposed matrix, as in the
    gradient of ((x @ v - w) ** 2).sum() with respect to v."""
    transposed, b = node.inputs
    transpose = transposed.producer() if transposed is not None else None
    if (
        transpose is None
        or transpose.op_type != "Transpose"
        or transpose.domain not in ("", "ai.onnx")
    ):
        return
    if b is None or b.shape is None or len(b.shape) != 1:
        return
    a = transpose.inputs[0]
    perm = transpose.attributes.get_ints("perm")
    if perm is None and a.shape is not None:  # reversed axes
        perm = list(reversed(range(len(a.shape))))
    if perm is None or len(perm) < 2:
        return
    rank = len(perm)
    if list(perm) != [*range(rank - 2), rank - 1, rank - 2]:
        return
    node.replace_input_with(0, b)
    node.replace_input_with(1, a)
    if not transposed.uses() and not transposed.is_graph_output():
        transpose.graph.remove(transpose, safe=True)


def reciprocal(node: ir.Node) -> bool:
    """``Div(1, x) -> Reciprocal(x)`` for a float `x` and a constant 1 of no higher rank: the
    same IEEE value (ONNX Runtime's Reciprocal is 1 / x to the bit in float16, float32 and
    float64), out of the reach of ONNX Runtime's DivMulFusion, which rewrites
    ``Mul(Div(1, x), y)`` into ``Div(y, x)``: one rounding where PyTensor makes two (a
    quarter of random float64 products differ by an ulp). Whether the Div `node` was
    replaced."""
    one, x = node.inputs
    tensor = ir.convenience.get_const_tensor(one)
    if tensor is None or tensor.dtype not in _FLOATS or tensor.size != 1:
        return False
    if float(tensor.numpy().item()) != 1:
        return False
    rank = len(tensor.shape)
    if rank > 0 and (x.shape is None or len(x.shape) < rank):
        return False  # the 1 may broadcast x to more dims
    replacement = ir.Node("", "Reciprocal", [x], name=node.name)
    ir.convenience.replace_nodes_and_values(
        node.graph, node, [node], [replacement], node.outputs, replacement.outputs
    )
    return True


# The operands of each operator that ONNX Runtime's NoopElimination drops when constant.
_NOOP_OPERANDS = {"Add": (0, 1), "Sub": (1,), "Mul": (0, 1), "Div": (1,)}


def shield_unit_like_constants(node: ir.Node) -> None:
    """A constant c of one element, an operand of the Add, Sub, Mul or Div `node`, that ONNX
    Runtime's NoopElimination would drop although the operation changes values is read
    through ``Where(IsNaN(x), c, c)``, x the other operand: the same values, but not a
    constant, so neither ONNX Runtime's constant folding nor NoopElimination reaches it
    (``Expand(c, Shape(x))`` was folded back into a constant where x's shape is static: a
    scalar's).

    NoopElimination removes ``x + c``, ``x - c``, ``x * c`` and ``x / c`` when c has one
    element and is 0 or 1, a float64 c compared once rounded to float32:
    ``log(abs(x) + 1e-300)`` gave -inf at 0 and a product by 1 + 4e-8 was dropped; and
    ``x + 0.0`` and ``x - (-0.0)``, which turn -0.0 into +0.0, were dropped in every float
    dtype. Such constants are rare (a float64 c below 7e-46 or within 6e-8 of 1, a zero
    of that sign, as ``+ 0.0`` in det and several special functions): the two extra nodes run
    only for them (ONNX Runtime's Where turns a -0.0 taken from its second input into +0.0,
    but that input is taken only where x is NaN, and the result is NaN there)."""
    for index in _NOOP_OPERANDS[node.op_type]:
        value, other = node.inputs[index], node.inputs[1 - index]
        tensor = ir.convenience.get_const_tensor(value)
        if tensor is None or tensor.dtype not in _FLOATS or tensor.size != 1:
            continue
        if not _dropped_wrongly(node.op_type, tensor.numpy().item(), tensor.dtype):
            continue
        # c where x is NaN and c elsewhere: c, of x's shape, known only at run time.
        nan = ir.Node("", "IsNaN", [other], name=f"{node.name}_shield_test")
        shield = ir.Node("", "Where", [nan.outputs[0], value, value], name=f"{node.name}_shield")
        node.graph.insert_before(node, [nan, shield])
        node.replace_input_with(index, shield.outputs[0])


def _dropped_wrongly(op_type: str, number: float, dtype: ir.DataType) -> bool:
    """Whether NoopElimination drops `op_type` with the constant `number` (of `dtype`) as
    the operand it checks although the operation is not the identity."""
    float64 = dtype == ir.DataType.DOUBLE
    if op_type in ("Mul", "Div"):
        return float64 and number != 1 and np.float32(number) == 1
    if number == 0:  # -0.0 + 0.0 = +0.0 and -0.0 - (-0.0) = +0.0
        return bool(np.signbit(number)) == (op_type == "Sub")
    return float64 and np.float32(number) == 0


def _scalar_of_rank(model: ir.Model, value: ir.Value, tensor, rank: int) -> ir.Value:
    """A constant holding the one element of `tensor` (`value`'s) with shape (1,) * rank, in
    `value`'s scope: next to its Constant node, or an initializer of the main graph."""
    name = f"{value.name}_rank{rank}"
    array = tensor.numpy().reshape((1,) * rank)
    producer = value.producer()
    if producer is None:
        copy = ir.Value(
            name=name, shape=ir.Shape(array.shape), type=value.type, const_value=ir.tensor(array)
        )
        model.graph.register_initializer(copy)
        return copy
    node = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(array))], name=name)
    node.outputs[0].name = name
    node.outputs[0].shape, node.outputs[0].type = ir.Shape(array.shape), value.type
    producer.graph.insert_after(producer, node)
    return node.outputs[0]


# The most nodes (Constants aside: they are lifted and shared) one Loop's copies may add up to.
UNROLL_BUDGET = 2048


def unroll_loops(graph: ir.Graph) -> bool:
    """Replace each Loop of `graph` (and of its subgraphs, innermost first) that runs a
    constant number of times to the end by copies of its body; True if any was."""

    def visit(loop: ir.Node) -> bool:
        count = _fixed_trip_count(loop)
        if count is None:
            return False
        _unroll(loop, count)
        return True

    return _each_loop(graph, visit)


def _each_loop(graph: ir.Graph, visit) -> bool:
    """Call ``visit(loop)`` on each Loop of `graph` and of its subgraphs, innermost first;
    True if any call returned True."""
    changed = False
    for node in list(graph):
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                changed |= _each_loop(attr.as_graph(), visit)
            elif attr.type == ir.AttributeType.GRAPHS:
                for sub in attr.as_graphs():
                    changed |= _each_loop(sub, visit)
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
            changed |= visit(node)
    return changed


def _fixed_trip_count(loop: ir.Node) -> int | None:
    """The number of iterations of `loop` if it is a constant, the loop runs them all, and
    the copies stay within the budget; otherwise None."""
    trip, condition = (list(loop.inputs) + [None, None])[:2]
    if trip is None or (condition is not None and not _is_true(condition)):
        return None
    tensor = ir.convenience.get_const_tensor(trip)
    if tensor is None:
        return None
    count = int(tensor.numpy().reshape(()))
    body = loop.attributes["body"].as_graph()
    carried = len(loop.inputs) - 2
    stacked = len(body.outputs) - 1 - carried
    if count < 0 or (count == 0 and stacked):
        return None  # nothing to copy, and stacked outputs would need their element shape
    size = sum(1 for n in all_nodes(body) if n.op_type != "Constant")
    if count * (size + stacked) > UNROLL_BUDGET or body.initializers:
        return None
    if not _runs_to_the_end(body):
        return None
    return count


def _is_true(value: ir.Value) -> bool:
    tensor = ir.convenience.get_const_tensor(value)
    return tensor is not None and bool(tensor.numpy().reshape(()))


def _constant(graph: ir.Graph, before: ir.Node, array: np.ndarray, name: str) -> ir.Value:
    node = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(array))], name=name)
    node.outputs[0].name = name
    graph.insert_before(before, node)
    return node.outputs[0]


def _splice(body, graph, before, prefix, iteration, condition, carried) -> list[ir.Value]:
    """Copy the nodes of Loop body `body` into `graph` (before node `before`, or at its end),
    reading `iteration`, `condition` and `carried` for the body's inputs (each a value or a
    function making one when the copy reads it); the copy's outputs."""
    copy = body.clone(allow_outer_scope_values=True)
    inputs, outputs = list(copy.inputs), list(copy.outputs)
    copy.inputs.clear()
    copy.outputs.clear()
    nodes = list(copy)
    copy.remove(nodes)
    for node in nodes:
        node.name = f"{prefix}/{node.name}"
        for value in node.outputs:
            value.name = f"{prefix}/{value.name}"
    if before is None:
        graph.extend(nodes)
    else:
        graph.insert_before(before, nodes)
    actual: dict[ir.Value, ir.Value] = {}
    for formal, value in zip(inputs[:2], [iteration, condition], strict=True):
        if formal.uses() or formal in outputs:
            actual[formal] = value(nodes[0] if nodes else before) if callable(value) else value
    actual.update(zip(inputs[2:], carried, strict=True))
    for formal, value in actual.items():
        ir.convenience.replace_all_uses_with(formal, value)
    return [actual.get(value, value) for value in outputs]


def _detach(loop: ir.Node) -> None:
    """Remove `loop`, first detaching its body's nodes (they would still count as users of
    the outer values they read)."""
    for node in all_nodes(loop.attributes["body"].as_graph()):
        for i in range(len(node.inputs)):
            node.replace_input_with(i, None)
    loop.graph.remove(loop, safe=True)


def _unroll(loop: ir.Node, count: int) -> None:
    """Put `count` copies of `loop`'s body before it, chained through the carried values, and
    give the loop's users the last values (and the per-iteration values stacked)."""
    graph = loop.graph
    body = loop.attributes["body"].as_graph()
    carried = list(loop.inputs[2:])
    stacked_steps: list[list[ir.Value]] = [[] for _ in body.outputs[1 + len(carried) :]]
    prefix = loop.name or "loop"
    for k in range(count):
        outputs = _splice(
            body,
            graph,
            loop,
            f"{prefix}/{k}",
            lambda at, k=k: _constant(graph, at, np.array(k, np.int64), f"{prefix}/{k}/iteration"),
            lambda at, k=k: _constant(graph, at, np.array(True), f"{prefix}/{k}/condition"),
            carried,
        )
        carried = outputs[1 : 1 + len(carried)]
        for steps, value in zip(stacked_steps, outputs[1 + len(carried) :], strict=True):
            steps.append(value)
    results = list(carried)
    for i, steps in enumerate(stacked_steps):
        results.append(_stack(graph, loop, steps, f"{prefix}/stack_{i}"))
    for old, new in zip(loop.outputs, results, strict=True):
        if old.is_graph_output():  # keeps its name: give it a node of its own
            identity = ir.Node("", "Identity", [new], name=f"{prefix}/output")
            graph.insert_before(loop, identity)
            new = identity.outputs[0]
            new.name, old.name = old.name, f"{prefix}/replaced"
        if new.type is None:
            new.type = old.type
        if new.shape is None:
            new.shape = old.shape
        ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=True)
    _detach(loop)


def _stack(graph: ir.Graph, before: ir.Node | None, steps: list[ir.Value], name: str) -> ir.Value:
    """`steps` stacked along a new first axis, by nodes put in `graph` before `before` (or at
    its end)."""
    axes = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array([0])))])
    axes.name = axes.outputs[0].name = f"{name}/axes"
    nodes = [axes]
    for k, value in enumerate(steps):
        nodes.append(ir.Node("", "Unsqueeze", [value, axes.outputs[0]], name=f"{name}/{k}"))
    if len(steps) > 1:
        rows = [node.outputs[0] for node in nodes[1:]]
        nodes.append(ir.Node("", "Concat", rows, [ir.AttrInt64("axis", 0)], name=name))
    if before is None:
        graph.extend(nodes)
    else:
        graph.insert_before(before, nodes)
    return nodes[-1].outputs[0]


# The most nodes (Constants aside) of a Loop body that `unroll_by_factor` copies, and the most
# nodes of the copies in one iteration.
SMALL_BODY, UNROLLED_BODY = 32, 128
UNROLL_FACTOR = 16
_UNROLLED = "pt_onnxscript.unrolled"


def unroll_by_factor(graph: ir.Graph) -> bool:
    """Make each Loop of `graph` (and of its subgraphs, innermost first) with a small body that
    runs its trip count to the end, however many steps that is, do several steps per
    iteration: a Loop of the first ((M - 1) % k) + 1 steps with the body as it was, then a
    Loop of the others, k at a time, with k copies of the body. True if any was."""

    def visit(loop: ir.Node) -> bool:
        factor = 1 if _UNROLLED in loop.meta else _factor(loop)
        if factor == 1:
            return False
        _unroll_by(loop, factor)
        return True

    return _each_loop(graph, visit)


def _factor(loop: ir.Node) -> int:
    """How many copies of `loop`'s body an iteration should run (1: leave it)."""
    trip, condition = (list(loop.inputs) + [None, None])[:2]
    if trip is None or condition is None or not _is_true(condition):
        return 1
    body = loop.attributes["body"].as_graph()
    if body.initializers or not _runs_to_the_end(body):
        return 1
    size = sum(1 for n in all_nodes(body) if n.op_type != "Constant")
    if size > SMALL_BODY:
        return 1
    return min(UNROLL_FACTOR, max(1, UNROLLED_BODY // max(size, 1)))


def _runs_to_the_end(body: ir.Graph) -> bool:
    """Whether a Loop with `body` passes its condition through (or sets it to true)."""
    condition_out = body.outputs[0]
    while condition_out.producer() is not None and condition_out.producer().op_type == "Identity":
        condition_out = condition_out.producer().inputs[0]
    return condition_out is body.inputs[1] or _is_true(condition_out)


def _unroll_by(loop: ir.Node, factor: int) -> None:
    graph = loop.graph
    body = loop.attributes["body"].as_graph()
    prefix = loop.name or "loop"
    n_carried = len(loop.inputs) - 2
    n_stacked = len(body.outputs) - 1 - n_carried
    trip, condition = loop.inputs[0], loop.inputs[1]

    def node(op_type, *inputs, **attributes):
        made = ir.Node(
            "",
            op_type,
            inputs,
            [ir.Attr(k, ir.AttributeType.INT, v) for k, v in attributes.items()],
        )
        made.name = f"{prefix}/by{factor}/{op_type}_{len(graph)}"
        made.outputs[0].name = made.name
        graph.insert_before(loop, made)
        return made.outputs[0]

    def const(value):
        return _constant(
            graph, loop, np.array(value, np.int64), f"{prefix}/by{factor}/c{len(graph)}"
        )

    # The first loop runs r = min(M, ((M - 1) % k) + 1) steps: at least one whenever M > 0, so
    # its stacked outputs have their element shape (ONNX Runtime gives a Loop that ran no
    # step stacked outputs of shape (0,)); the second runs q = (M - r) / k iterations.
    steps = node("Max", trip, const(0))
    k, one = const(factor), const(1)
    first = node("Min", steps, node("Add", node("Mod", node("Sub", steps, one), k), one))
    iterations = node("Div", node("Sub", steps, first), k)

    head_body = body.clone(allow_outer_scope_values=True)
    head = ir.Node(
        "",
        "Loop",
        [first, condition, *loop.inputs[2:]],
        [ir.AttrGraph("body", head_body)],
        num_outputs=len(loop.outputs),
        name=f"{prefix}/head",
    )
    for i, value in enumerate(head.outputs):
        value.name = f"{prefix}/head_{i}"
    graph.insert_before(loop, head)

    tag = f"{prefix}/by{factor}"
    j = ir.Value(name=f"{tag}/j", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    go = ir.Value(name=f"{tag}/cond", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    carried = [
        ir.Value(name=f"{tag}/carried_{i}", type=v.type, shape=v.shape)
        for i, v in enumerate(body.inputs[2:])
    ]
    main = ir.Graph([j, go, *carried], [], nodes=[], name=tag)
    base = ir.Node("", "Add", [ir.Node("", "Mul", [j, k], name=f"{tag}/Mul").outputs[0], first])
    main.append(base.inputs[0].producer())
    base.name = base.outputs[0].name = f"{tag}/base"
    main.append(base)
    stacked_steps: list[list[ir.Value]] = [[] for _ in range(n_stacked)]
    state = list(carried)
    for c in range(factor):
        offset = const(c)

        def iteration(at, c=c, offset=offset):
            step = ir.Node("", "Add", [base.outputs[0], offset], name=f"{tag}/{c}/iteration")
            step.outputs[0].name = step.name
            if at is None:
                main.append(step)
            else:
                main.insert_before(at, step)
            return step.outputs[0]

        outputs = _splice(body, main, None, f"{tag}/{c}", iteration, go, state)
        state = outputs[1 : 1 + n_carried]
        for steps_i, value in zip(stacked_steps, outputs[1 + n_carried :], strict=True):
            steps_i.append(value)
    results = [
        _stack(main, None, steps_i, f"{tag}/stack_{i}") for i, steps_i in enumerate(stacked_steps)
    ]
    outs = []
    for i, value in enumerate([go, *state, *results]):
        identity = ir.Node("", "Identity", [value], name=f"{tag}/out_{i}")
        identity.outputs[0].name = identity.name
        main.append(identity)
        outs.append(identity.outputs[0])
    main.outputs.extend(outs)
    rest = ir.Node(
        "",
        "Loop",
        [iterations, condition, *head.outputs[:n_carried]],
        [ir.AttrGraph("body", main)],
        num_outputs=len(loop.outputs),
        name=tag,
    )
    for i, value in enumerate(rest.outputs):
        value.name = f"{tag}_{i}"
    graph.insert_before(loop, rest)
    head.meta[_UNROLLED] = rest.meta[_UNROLLED] = True

    results = list(rest.outputs[:n_carried])
    for i in range(n_stacked):
        first_rows = head.outputs[n_carried + i]
        rows = node("Unsqueeze", node("Mul", iterations, k), const([0]))
        shape = node("Concat", rows, node("Shape", first_rows, start=1), axis=0)
        flat = node("Reshape", rest.outputs[n_carried + i], shape, allowzero=1)
        results.append(node("Concat", first_rows, flat, axis=0))
    for old, new in zip(loop.outputs, results, strict=True):
        new.type, new.shape = old.type, old.shape
        if old.is_graph_output():
            new.name, old.name = old.name, f"{prefix}/replaced"
        ir.convenience.replace_all_uses_with(old, new, replace_graph_outputs=True)
    _detach(loop)


# Operators that shape arithmetic uses: on values computed from shapes and constants they fail
# only for ranks that are wrong whatever the data (no division, no Range) (so moving them out of a Loop that would run
# no step cannot make a model fail that did not).
SHAPE_ARITHMETIC = frozenset(
    {
        *("Add", "Sub", "Mul", "Max", "Min", "Neg", "Abs", "Where", "Cast", "Identity"),
        *("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not"),
        *("Concat", "Gather", "Unsqueeze", "Squeeze", "Reshape", "Slice"),
        *("ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"),
    }
)


def hoist_loop_invariants(graph: ir.Graph) -> bool:
    """Move the shape arithmetic of each Loop body in `graph` (and its subgraphs, innermost
    first) that reads only values from outside the loop to just before the Loop: nodes
    computing shapes (Shape, Size) of outer values and SHAPE_ARITHMETIC on those and on
    constants. Failure checks stay in the body (they must fail only when a step runs). True
    if any node moved."""
    from pt_onnxscript.ops.common import CHECK

    def visit(loop: ir.Node) -> bool:
        body = loop.attributes["body"].as_graph()
        outputs = set(body.outputs)
        moved = False
        for inner in list(body):
            if (
                CHECK in inner.meta
                or any(a.type in _GRAPH_ATTRIBUTES for a in inner.attributes.values())
                or any(v in outputs for v in inner.outputs)
                or not _is_shape_arithmetic(inner, body)
            ):
                continue
            body.remove(inner)
            loop.graph.insert_before(loop, inner)
            moved = True
        return moved

    return _each_loop(graph, visit)


_GRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def _is_shape_arithmetic(node: ir.Node, body: ir.Graph) -> bool:
    """Whether `node` of Loop body `body` computes from outer values' shapes and constants."""
    inputs = [v for v in node.inputs if v is not None]
    if any(
        v.graph is body or (v.producer() is not None and v.producer().graph is body) for v in inputs
    ):
        return False
    if node.op_type in ("Shape", "Size"):
        return True
    return node.op_type in SHAPE_ARITHMETIC and all(_shape_valued(v) for v in inputs)


def _shape_valued(value: ir.Value) -> bool:
    """Whether `value` is a constant or computed by shape arithmetic from shapes."""
    if ir.convenience.get_const_tensor(value) is not None:
        return True
    producer = value.producer()
    if producer is None:
        return False
    if producer.op_type in ("Shape", "Size"):
        return True
    return producer.op_type in SHAPE_ARITHMETIC and all(
        _shape_valued(v) for v in producer.inputs if v is not None
    )
