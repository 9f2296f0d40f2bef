"""Demo: export a small PyTensor classifier to ONNX and run it on ONNX Runtime.

Run with ``python -m pt_onnxscript.demos.classifier [output.onnx]``.
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt

import pt_onnxscript
from pt_onnxscript import export_onnx, onnx_export


def main(path: Path) -> None:
    rng = np.random.default_rng(0)
    W = pytensor.shared(rng.normal(size=(64, 10)).astype("float32"), name="W")
    b = pytensor.shared(np.zeros(10, dtype="float32"), name="b")
    x = pt.matrix("x", dtype="float32", shape=(None, 64))
    probs = pt.special.softmax(pt.maximum(x @ W + b, 0), axis=-1)

    f = pytensor.function([x], probs)
    model = export_onnx(f, path, dims={"x": ("batch", 64)}, output_names=["probs"])
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    print(
        f"exported {path} (opset {model.opset_import[0].version}, "
        f"{len(model.graph.node)} nodes: {counts})"
    )

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (1, 7, 256):
        xv = rng.normal(size=(batch, 64)).astype("float32")
        (onnx_probs,) = session.run(None, {"x": xv})
        diff = np.abs(onnx_probs - f(xv)).max()
        print(
            f"batch {batch:4d}: ONNX Runtime vs PyTensor max abs diff {diff:.2e}, "
            f"dtype {onnx_probs.dtype}"
        )

    g = pytensor.function([x], probs, mode="ONNX")
    xv = rng.normal(size=(3, 64)).astype("float32")
    print(f'mode="ONNX" predictions {g(xv).argmax(axis=-1)}, PyTensor {f(xv).argmax(axis=-1)}')

    @onnx_export(x=("float32", ("batch", 64)))
    def classify(x):
        return pt.special.softmax(pt.maximum(x @ W + b, 0), axis=-1)

    onnx.checker.check_model(classify.model, full_check=True)
    print(
        f"@onnx_export: classify(x).shape = {classify(xv).shape}, "
        f"pt_onnxscript {pt_onnxscript.__version__}"
    )


def cli(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description="Export a small PyTensor classifier to ONNX, check it and run it on ONNX "
        'Runtime, in mode "ONNX" and through @onnx_export.'
    )
    parser.add_argument(
        "output",
        nargs="?",
        type=Path,
        help="where to write the model (default: a temporary file, removed at exit)",
    )
    args = parser.parse_args(argv)
    if args.output is not None:
        main(args.output)
        return
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp) / "classifier.onnx")
    print("(the model was a temporary file, now removed: pass a path to keep it)")


if __name__ == "__main__":
    cli()
