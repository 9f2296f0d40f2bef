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

Symbolic dims stay symbolic (nothing is folded from an unknown size).
"""

import onnx_ir as ir
from onnx_ir.passes import common as common_passes
from onnxscript.optimizer import fold_constants_ir
from onnxscript.rewriter import RewritePass, RewriteRuleSet
from onnxscript.rewriter.rules import common as rules

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
        rules.no_op_expand_rule,
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
    for _ in range(2):
        folded = fold_constants_ir(model, onnx_shape_inference=True).modified
        rules = _rules_for(model)
        rewritten = rules is not None and RewritePass(rules)(model).modified
        common_passes.RemoveUnusedNodesPass()(model)
        if not (folded or rewritten):
            break
    ir.passes.Sequential(
        common_passes.RemoveUnusedOpsetsPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
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
