"""Demos built on the library, kept apart from it: `python -m pt_onnxscript.demos.classifier`
exports a classifier and runs it on ONNX Runtime; `python -m pt_onnxscript.demos.digits`
trains a CNN and serves it to the browser (onnxruntime-web, from `demos/web`)."""
