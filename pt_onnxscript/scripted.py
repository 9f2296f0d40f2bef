"""Scripted onnxscript functions in translations: the one way to use them.

A translation calls ``inline(g, fn, *args)`` for an ``@onnxscript.script()`` function `fn`:
its nodes go into the graph being built. A scripted function may call other scripted functions
(as ``gammainc`` calls ``erfc``): those calls stay calls of model-local functions while the
graph is built, and ``inline_functions`` expands them once the model is complete, so a file
holds only standard ONNX operators. (onnxscript's own ``g.call_inline`` leaves such nested
calls behind, and the model is invalid: "No opset import for domain 'this'".)
"""

import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from pt_onnxscript.walk import all_nodes


def inline(g, function, *args):
    """The outputs of scripted `function` on `args`, its nodes inlined into `g`'s graph."""
    _register_callees(g.builder.root.functions, function)
    return g.call_inline(function, *args)


def _register_callees(functions: dict, function) -> None:
    for node in all_nodes(function.graph()):
        callee = function.function.__globals__.get(node.op_type)
        if node.domain == function.function_ir.domain and callee is not None:
            # A copy: inlining rewrites the model's functions in place.
            functions[callee.function_ir.identifier()] = ir.serde.deserialize_function(
                ir.serde.serialize_function(callee.function_ir)
            )
            _register_callees(functions, callee)


def inline_functions(model: ir.Model, opset: int) -> None:
    """Expand the calls of the scripted functions registered by `inline`, then drop them and
    their domains; raise if a node of an unknown domain is left."""
    if model.functions:
        domains = {function.domain for function in model.functions.values()}
        for function in model.functions.values():
            # Written against the model's opset, like the functions inlined directly.
            function.opset_imports[""] = opset
        InlinePass()(model)
        for domain in domains:
            model.graph.opset_imports.pop(domain, None)
    for node in all_nodes(model.graph):
        if node.domain not in ("", "ai.onnx"):
            raise ValueError(
                f"The model calls {node.domain}::{node.op_type}, which is not an ONNX "
                "operator: a scripted function called another one. Inline scripted "
                "functions with pt_onnxscript.inline(g, fn, *args), which inlines the "
                "functions they call too."
            )
