"""Translations, one module per PyTensor op family; importing this registers them all."""

from pt_onnxscript.ops import elemwise, scalar  # noqa: F401
