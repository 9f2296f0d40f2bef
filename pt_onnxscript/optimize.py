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
graph's size).

Loops with a constant trip count that always run to the end (a scripted ``for k in
range(n)``, a Scan of constant length) are unrolled when the copies stay small
(`UNROLL_BUDGET` nodes): ONNX Runtime pays microseconds per Loop iteration and a fraction of
one per node, and the copies compute the same operations on the same values.

Symbolic dims stay symbolic (nothing is folded from an unknown size).
"""

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.optimizer import fold_constants_ir
from onnxscript.rewriter import MatchResult, RewritePass, RewriteRuleClassBase, RewriteRuleSet
from onnxscript.rewriter.rules import common as rules
from onnxscript.rewriter.rules.common._basic_rules import ExpandIdentity


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


class SignRepairedWhere(RewriteRuleClassBase):
    """`ops.common.where`'s repair of ONNX Runtime's Where, which turns a -0.0 taken from its
    second input into +0.0: ``Where(c, a, b) * Where(c and a is -0.0, -1, 1)``, built when
    neither branch was a known constant, becomes ``Where(Not(c), b, a)`` once constant
    folding shows that `b` is a constant without -0.0 (or ``Where(c, a, b)`` for such an
    `a`): two nodes instead of eleven (the negation is a Xor with True, see `negate`)."""

    def pattern(self, op, cond, a, b, zero, one, minus_one):
        negative_zero = op.And(op.Equal(a, zero), op.Less(op.Div(one, a), zero))
        result = op.Where(cond, a, b)
        lost = op.And(op.And(cond, negative_zero), op.Greater(op.Div(one, result), zero))
        return op.Mul(result, op.Where(lost, minus_one, one))

    def check(self, context, cond, a, b, zero, one, minus_one, **_):
        check = MatchResult()
        for value, expected in ((zero, 0), (one, 1), (minus_one, -1)):
            if not _constant_equal(value, expected):
                return check.fail(f"{value.name} is not the constant {expected}")
        if not (no_negative_zero(a) or no_negative_zero(b)):
            return check.fail("neither branch is a constant without -0.0")
        return check

    def rewrite(self, op, cond, a, b, **_):
        if no_negative_zero(a):
            return op.Where(cond, a, b)
        true = op.Constant(value=ir.tensor(np.array(True)))
        return op.Where(op.Xor(cond, true), b, a)


def _constant_equal(value: ir.Value, expected: float) -> bool:
    tensor = ir.convenience.get_const_tensor(value)
    return tensor is not None and tensor.size == 1 and float(tensor.numpy().item()) == expected


def no_negative_zero(value: ir.Value) -> bool:
    """Whether `value` is a constant known to hold no -0.0 (`ops.common.where` asks too)."""
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return False
    array = tensor.numpy()
    return not np.any((array == 0) & np.signbit(array))


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
        rules.materialize_reshape_shape_rule,
        rules.max_max_rule,
        rules.min_min_rule,
        rules.successive_relu_rule,
        rules.no_op_cast_rule,
        ExpandToOwnShape.rule(),
        SignRepairedWhere.rule(),
        rules.flatten_to_reshape_rule,
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
    ]
)


def _rules_for(model: ir.Model) -> RewriteRuleSet | None:
    """The rules whose pattern ends in an operator the model has (each rule is tried on every
    node: the others would only cost time)."""
    present = {node.op_type for node in ir.traversal.RecursiveGraphIterator(model.graph)}
    rules = []
    for rule in EXACT_RULES.rules:
        root = rule._target_pattern.output_nodes[0].op_identifier()
        if root is None or root[1] in present:
            rules.append(rule)
    return RewriteRuleSet(rules) if rules else None


def optimize(model: ir.Model) -> None:
    """Optimise `model` in place, keeping every value exactly."""
    for _ in range(4):
        folded = fold_constants_ir(model, onnx_shape_inference=True).modified
        common_passes.LiftSubgraphInitializersToMainGraphPass()(model)  # folded constants
        unrolled = unroll_loops(model.graph)
        rules = _rules_for(model)
        rewritten = rules is not None and RewritePass(rules)(model).modified
        common_passes.RemoveUnusedNodesPass()(model)
        if not (folded or unrolled or rewritten):
            break
    ir.passes.Sequential(
        common_passes.RemoveUnusedOpsetsPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        common_passes.RemoveUnusedNodesPass(),  # what the merged copies read
        common_passes.OutputFixPass(),
    )(model)
    _drop_optimizer_metadata(model.graph)


def _drop_optimizer_metadata(graph: ir.Graph) -> None:
    """Remove the notes the optimizer leaves on values and nodes (such as the set of names a
    constant was folded from, listed in a hash-seed-dependent order): files stay
    byte-identical, and smaller."""
    nodes = list(ir.traversal.RecursiveGraphIterator(graph))
    values = [*graph.inputs, *graph.initializers.values()]
    for item in [*nodes, *(value for node in nodes for value in node.outputs), *values]:
        for key in [k for k in item.metadata_props if k.startswith("pkg.onnxscript.")]:
            del item.metadata_props[key]


# The most nodes (Constants aside: they are lifted and shared) one Loop's copies may add up to.
UNROLL_BUDGET = 2048


def unroll_loops(graph: ir.Graph) -> bool:
    """Replace each Loop of `graph` (and of its subgraphs, innermost first) that runs a
    constant number of times to the end by copies of its body; True if any was."""
    changed = False
    for node in list(graph):
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                changed |= unroll_loops(attr.as_graph())
            elif attr.type == ir.AttributeType.GRAPHS:
                for sub in attr.as_graphs():
                    changed |= unroll_loops(sub)
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx"):
            count = _fixed_trip_count(node)
            if count is not None:
                _unroll(node, count)
                changed = True
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
    size = sum(1 for n in ir.traversal.RecursiveGraphIterator(body) if n.op_type != "Constant")
    if count * (size + stacked) > UNROLL_BUDGET or body.initializers:
        return None
    condition_out = body.outputs[0]
    while condition_out.producer() is not None and condition_out.producer().op_type == "Identity":
        condition_out = condition_out.producer().inputs[0]
    if condition_out is not body.inputs[1] and not _is_true(condition_out):
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


def _unroll(loop: ir.Node, count: int) -> None:
    """Put `count` copies of `loop`'s body before it, chained through the carried values, and
    give the loop's users the last values (and the per-iteration values stacked)."""
    graph = loop.graph
    body = loop.attributes["body"].as_graph()
    carried = list(loop.inputs[2:])
    stacked_steps: list[list[ir.Value]] = [[] for _ in body.outputs[1 + len(carried) :]]
    prefix = loop.name or "loop"
    for k in range(count):
        copy = body.clone(allow_outer_scope_values=True)
        inputs = list(copy.inputs)
        outputs = list(copy.outputs)
        copy.inputs.clear()
        copy.outputs.clear()
        nodes = list(copy)
        copy.remove(nodes)
        for node in nodes:
            node.name = f"{prefix}/{k}/{node.name}"
            for value in node.outputs:
                value.name = f"{prefix}/{k}/{value.name}"
        graph.insert_before(loop, nodes)
        actual: dict[ir.Value, ir.Value] = {}
        if inputs[0].uses() or inputs[0] in outputs:
            actual[inputs[0]] = _constant(
                graph, nodes[0] if nodes else loop, np.array(k, np.int64), f"{prefix}/{k}/iteration"
            )
        if inputs[1].uses() or inputs[1] in outputs:
            actual[inputs[1]] = _constant(
                graph, nodes[0] if nodes else loop, np.array(True), f"{prefix}/{k}/condition"
            )
        actual.update(zip(inputs[2:], carried, strict=True))
        for formal, value in actual.items():
            ir.convenience.replace_all_uses_with(formal, value)
        outputs = [actual.get(value, value) for value in outputs]
        carried = outputs[1 : 1 + len(carried)]
        for steps, value in zip(stacked_steps, outputs[1 + len(carried) :], strict=True):
            steps.append(value)
    results = list(carried)
    for i, steps in enumerate(stacked_steps):
        axes = _constant(graph, loop, np.array([0], np.int64), f"{prefix}/axes")
        rows = []
        for k, value in enumerate(steps):
            row = ir.Node("", "Unsqueeze", [value, axes], name=f"{prefix}/{k}/stack_{i}")
            graph.insert_before(loop, row)
            rows.append(row.outputs[0])
        if len(rows) == 1:
            results.append(rows[0])
        else:
            concat = ir.Node(
                "", "Concat", rows, [ir.AttrInt64("axis", 0)], name=f"{prefix}/stack_{i}"
            )
            graph.insert_before(loop, concat)
            results.append(concat.outputs[0])
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
    # The body's nodes would still count as users of the outer values they read.
    for node in ir.traversal.RecursiveGraphIterator(body):
        for i in range(len(node.inputs)):
            node.replace_input_with(i, None)
    graph.remove(loop, safe=True)
