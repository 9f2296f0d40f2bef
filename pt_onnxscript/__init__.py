"""Export PyTensor graphs to ONNX, and run them on ONNX Runtime as mode "ONNX"."""

from pytensor.compile.mode import (
    predefined_linkers,
    predefined_modes,
    register_linker,
    register_mode,
)

from pt_onnxscript import ops, rewrites  # noqa: F401  (registers translations and rewrites)
from pt_onnxscript.export import ONNXFunction, TensorSpec, export_onnx, onnx_export
from pt_onnxscript.linker import ONNXLinker, newest_opset, onnx_mode
from pt_onnxscript.registry import (
    register,
    register_blockwise,
    register_check,
    register_function,
    register_scalar,
)
from pt_onnxscript.scripted import inline
from pt_onnxscript.translate import (
    DEFAULT_OPSET,
    TranslationError,
    UnsupportedOpError,
    __version__,
)

if "onnx" not in predefined_linkers:
    register_linker("onnx", ONNXLinker())
if "ONNX" not in predefined_modes:
    register_mode("ONNX", onnx_mode())

__all__ = [
    "DEFAULT_OPSET",
    "ONNXFunction",
    "ONNXLinker",
    "TensorSpec",
    "TranslationError",
    "UnsupportedOpError",
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
