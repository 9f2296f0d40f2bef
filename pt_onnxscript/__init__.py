"""Export PyTensor graphs to ONNX, and run them on ONNX Runtime as mode "ONNX".

Importing the package registers mode "ONNX" and imports nothing else heavy: onnx,
onnxscript, ONNX Runtime and the translations load the first time they are needed (an export,
a function compiled in the mode, a translation registered), so ``import pt_onnxscript`` costs
about what ``import pytensor.tensor`` does.
"""

import importlib

from pytensor.compile.mode import (
    predefined_linkers,
    predefined_modes,
    register_linker,
    register_mode,
)

from pt_onnxscript import rewrites  # noqa: F401  (registers the rewrites of tag "onnx")
from pt_onnxscript.errors import (
    BatchSizeError,
    ExecutionError,
    IndexOutOfBoundsError,
    TranslationError,
    UnsupportedOpError,
    UnsupportedTypeError,
    __version__,
)
from pt_onnxscript.linker import ONNXLinker, newest_opset, onnx_mode
from pt_onnxscript.opsets import DEFAULT_OPSET
from pt_onnxscript.registry import (
    register,
    register_blockwise,
    register_check,
    register_function,
    register_scalar,
)

if "onnx" not in predefined_linkers:
    register_linker("onnx", ONNXLinker())
if "ONNX" not in predefined_modes:
    register_mode("ONNX", onnx_mode())

# Names whose modules import onnx, onnxscript or ONNX Runtime: imported on first use.
_LAZY = {
    "ONNXFunction": "pt_onnxscript.export",
    "TensorSpec": "pt_onnxscript.export",
    "export_onnx": "pt_onnxscript.export",
    "onnx_export": "pt_onnxscript.export",
    "inline": "pt_onnxscript.scripted",
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pt_onnxscript' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])


__all__ = [
    "DEFAULT_OPSET",
    "BatchSizeError",
    "ExecutionError",
    "IndexOutOfBoundsError",
    "ONNXFunction",
    "ONNXLinker",
    "TensorSpec",
    "TranslationError",
    "UnsupportedOpError",
    "UnsupportedTypeError",
    "__version__",
    "export_onnx",
    "inline",
    "newest_opset",
    "onnx_export",
    "onnx_mode",
    "register",
    "register_blockwise",
    "register_check",
    "register_function",
    "register_scalar",
]
