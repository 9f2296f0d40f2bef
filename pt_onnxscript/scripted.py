"""Scripted onnxscript functions in translations: the one way to use them.

A translation calls ``inline(g, fn, *args)`` for an ``@onnxscript.script()`` function `fn`:
its nodes go into the graph being built. A scripted function may call other scripted functions
(as ``gammainc`` calls ``erfc``): those calls stay calls of model-local functions while the
graph is built, and ``inline_functions`` expands them once the model is complete, so a file
holds only standard ONNX operators. (onnxscript's own ``g.call_inline`` leaves such nested
calls behind, and the model is invalid: "No opset import for domain 'this'".)

The translations' own scripted functions are declared with this module's ``script()``:
onnxscript's, run when a function is first used rather than when its module is imported.
"""

import functools
import sys
import threading

import onnx_ir as ir
import onnxscript
from onnx_ir.passes.common import InlinePass

from pt_onnxscript.walk import all_nodes


def script(**kwargs):
    """``onnxscript.script(**kwargs)``, converting the function from its source when it is
    first used (`Scripted`) rather than at import: converting all of the translations'
    scripted functions took ~0.65 s of a first export, most of them never used by it."""

    def decorate(function) -> "Scripted":
        return Scripted(function, kwargs)

    return decorate


class Scripted:
    """A function for onnxscript's ``script()``, converted at its first use; any attribute
    is the converted OnnxFunction's, and calling it calls that function.

    onnxscript's converter resolves the scripted functions a function calls among its
    module's globals: the ones not converted yet are converted first and take the place of
    their `Scripted` there."""

    _lock = threading.RLock()

    def __init__(self, function, kwargs: dict):
        self._function, self._kwargs = function, kwargs
        self._converted: onnxscript.OnnxFunction | None = None
        functools.update_wrapper(self, function)

    def converted(self) -> onnxscript.OnnxFunction:
        with self._lock:
            if self._converted is None:
                module = sys.modules[self._function.__module__]
                for name in _global_names(self._function.__code__):
                    value = getattr(module, name, None)
                    if isinstance(value, Scripted):
                        setattr(module, name, value.converted())
                self._converted = onnxscript.script(**self._kwargs)(self._function)
            return self._converted

    def __call__(self, *args, **kwargs):
        return self.converted()(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("_"):  # not the OnnxFunction's (copy's and pickle's probes)
            raise AttributeError(name)
        return getattr(self.converted(), name)


def _global_names(code) -> set[str]:
    """The global names `code` reads, those of the code nested in it included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _global_names(const)
    return names


def converted(function):
    """`function` as an onnxscript OnnxFunction (a `Scripted` is converted)."""
    return function.converted() if isinstance(function, Scripted) else function


def inline(g, function, *args):
    """The outputs of scripted `function` on `args`, its nodes inlined into `g`'s graph."""
    function = converted(function)
    _register_callees(g.builder.root.functions, function)
    return g.call_inline(function, *args)


def _register_callees(functions: dict, function) -> None:
    for node in all_nodes(function.graph()):
        callee = function.function.__globals__.get(node.op_type)
        if node.domain == function.function_ir.domain and callee is not None:
            callee = converted(callee)
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
