"""Registries from PyTensor Op classes to their ONNX translations.

A translation is called as ``translation(g, node, *inputs)``: ``g`` is the onnxscript op
builder of the graph being built (``g.Add(x, y)`` adds a node; named as in torch.onnx's
symbolic functions, since ``op`` is the PyTensor Op in every PyTensor backend), ``node`` the
PyTensor Apply node (a scalar Apply for scalar translations) and ``inputs`` the ONNX values
of the node's inputs. It returns the ONNX value of the node's output, or a sequence of them.

The package's own translations (``pt_onnxscript.ops``, which imports onnxscript and compiles
hundreds of scripted functions) are registered the first time a table is read or written,
not when pt_onnxscript is imported: they are always there before a lookup or a user's
registration.
"""

import importlib
import importlib.util
import inspect
from collections.abc import Callable

from pytensor.graph.op import Op
from pytensor.scalar.basic import ScalarOp

Translation = Callable[..., object]

_translations: dict[type, Translation] = {}
_scalar_translations: dict[type, Translation] = {}
_blockwise_translations: dict[type, Translation] = {}
_function_translations: dict[str, Translation] = {}
_checks: dict[type, Callable] = {}
_builtins = "unloaded"

# Translations of Ops that other libraries (or optional parts of PyTensor) define, by the
# module that defines them: loaded when one of its Op classes is first looked up or
# registered (the library is imported by then), so an export that meets none of them does not
# import the library. The classes already looked at (their bases included), so that a lookup
# checks one class, once.
_library_translations = {
    "pymc": "pt_onnxscript.ops.pymc",
    "pytensor.sparse": "pt_onnxscript.ops.sparse",
}
_classes_seen: set[type] = set()


def load_builtins() -> None:
    """Register the package's own translations, once."""
    global _builtins
    if _builtins != "unloaded":  # loaded, or loading (their own registrations come here)
        return
    _builtins = "loading"
    try:
        import pt_onnxscript.ops  # noqa: F401  (registers every op family)
    except BaseException:
        _builtins = "unloaded"
        raise
    _builtins = "loaded"


def _load_library_translations(op_class: type) -> None:
    """Register the package's translations of the Ops of the libraries that define `op_class`
    and its bases, where there are some not loaded yet; once per class."""
    if op_class in _classes_seen:
        return
    _classes_seen.add(op_class)
    for cls in op_class.__mro__:
        for library in [name for name in _library_translations if _defined_in(cls, name)]:
            importlib.import_module(_library_translations.pop(library))


def _defined_in(cls: type, module: str) -> bool:
    return cls.__module__ == module or cls.__module__.startswith(module + ".")


def _registrar(table: dict[type, Translation], op_classes: tuple[type, ...], replace: bool):
    def decorator(translation: Translation) -> Translation:
        load_builtins()  # so that a user's registration meets (and may replace) the package's
        for cls in op_classes:
            if isinstance(cls, type):  # not a register_function name
                _load_library_translations(cls)
            if cls in table and not replace:
                name = getattr(cls, "__name__", cls)
                raise ValueError(
                    f"{name} already has a translation: {table[cls]}. To override it (a fixed "
                    "translation re-run in a notebook, say), register with replace=True."
                )
        for cls in op_classes:
            table[cls] = translation
        return translation

    return decorator


def register(*op_classes: type[Op], replace: bool = False):
    """Register a translation for one or more PyTensor Op classes (`replace`: override the
    ones they have; without it, a second registration is an error)."""
    return _registrar(_translations, op_classes, replace)


def register_scalar(*scalar_op_classes: type[ScalarOp], replace: bool = False):
    """Register a translation for scalar Op classes (used by Elemwise and Composite)."""
    return _registrar(_scalar_translations, scalar_op_classes, replace)


def register_function(*names: str, replace: bool = False):
    """Register a translation for the scalar ops, of any library, that declare through their
    ``nfunc_spec`` that they compute function ``names`` (e.g. ``"scipy.special.i0e"``).

    Ops registered by class come first.
    """
    return _registrar(_function_translations, names, replace)


def register_blockwise(*core_op_classes: type[Op], replace: bool = False):
    """Register a translation of ``Blockwise(core_op)`` that handles the batch dims itself.

    It is called with the Blockwise node, whose inputs carry the batch dims. Blockwise of a
    core op without one runs the core op's own translation in a Loop over the batch.
    """
    return _registrar(_blockwise_translations, core_op_classes, replace)


def register_check(*op_classes: type[Op], replace: bool = False):
    """Register a static check of nodes of these Op classes (scalar Op classes included).

    It is called with the node before anything is built and returns None, or a sentence
    saying why this node cannot be translated; the sentences of the whole graph are reported
    together with its unsupported Ops in one UnsupportedOpError.
    """
    return _registrar(_checks, op_classes, replace)


def check_for(op) -> Callable | None:
    return lookup(_checks, op)


def lookup(table: dict[type, object], op):
    """The entry of `table` for the class of `op` or its nearest base class (None if none)."""
    load_builtins()
    _load_library_translations(type(op))
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    return None


def translated_as_inner_graph(op: Op) -> bool:
    """Whether `op` is translated by walking its inner graph: its translation is the one
    registered for an inner-graph class (OpFromGraph), not one of its own class."""
    from pytensor.compile.builders import OpFromGraph

    load_builtins()
    _load_library_translations(type(op))
    for cls in type(op).__mro__:
        if cls in _translations:
            return cls is OpFromGraph
    return False


def translation_for(op: Op) -> Translation | None:
    return lookup(_translations, op)


def scalar_translation_for(scalar_op: ScalarOp) -> Translation | None:
    translation = lookup(_scalar_translations, scalar_op)
    spec = getattr(scalar_op, "nfunc_spec", None)
    if translation is None and spec:
        translation = _function_translations.get(spec[0])  # loaded by lookup
    return translation


def blockwise_translation_for(core_op: Op) -> Translation | None:
    return lookup(_blockwise_translations, core_op)


_KINDS = (
    (_translations, "Op"),
    (_scalar_translations, "scalar Op"),
    (_blockwise_translations, "Blockwise core Op"),
    (_function_translations, "function"),
)


def translations() -> list[dict[str, str]]:
    """Every registered translation, for the documentation's table: dicts of ``op`` (the Op
    class, or the function's name), ``kind`` (Op, scalar Op, Blockwise core Op, function),
    ``translation`` (its function) and ``doc`` (its docstring). Includes the translations of
    other libraries' Ops whose library is installed (PyMC's, pytensor.sparse's)."""
    load_builtins()
    for library in list(_library_translations):
        if importlib.util.find_spec(library.split(".")[0]) is None:
            continue
        try:
            importlib.import_module(library)
        except ImportError:  # installed but not importable with this PyTensor
            continue
        importlib.import_module(_library_translations.pop(library))
    rows = []
    for table, kind in _KINDS:
        for key, translation in table.items():
            name = key if isinstance(key, str) else f"{key.__module__}.{key.__qualname__}"
            rows.append(
                {
                    "op": name,
                    "kind": kind,
                    "translation": f"{translation.__module__}.{translation.__qualname__}",
                    "doc": inspect.getdoc(translation) or "",
                }
            )
    return sorted(rows, key=lambda row: (row["kind"] != "Op", row["kind"], row["op"]))
