"""Inference latency of the digits CNN: PyTensor's default and Numba modes, mode "ONNX", and a
raw ONNX Runtime session on the exported file, side by side in one run; then the exported
model's nodes by op type.

Run: python benchmarks/cnn.py   (needs scikit-learn, the `test` extra)
"""

import collections
import tempfile
import timeit
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt

from pt_onnxscript.demos import digits


def per_call(fn, repeat=5):
    fn()
    number = max(1, int(0.2 / max(timeit.timeit(fn, number=1), 1e-6)))
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main():
    split = digits.load_digits()
    params = digits.init_params()
    digits.train(split, params, epochs=5)
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    probs = digits.forward(x, params)
    path = Path(tempfile.mkdtemp()) / "digits.onnx"
    digits.export_classifier(params, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    runners = {
        "PyTensor default mode": pytensor.function([x], probs),
        "PyTensor NUMBA mode": pytensor.function([x], probs, mode="NUMBA"),
        'mode "ONNX"': pytensor.function([x], probs, mode="ONNX"),
        "ONNX Runtime session": lambda v: session.run(None, {"x": v})[0],
    }
    print(f"{'':24}{'batch 1':>12}{'batch 64':>12}  speed-up over the default mode")
    baseline = {}
    for name, run in runners.items():
        times = []
        for batch in (1, 64):
            v = split.x_test[:batch]
            np.testing.assert_allclose(run(v), runners['mode "ONNX"'](v), rtol=1e-4, atol=1e-6)
            times.append(per_call(lambda run=run, v=v: run(v)))
        baseline.setdefault("t", times)
        speedups = " ".join(f"{b / t:>6.1f}x" for t, b in zip(times, baseline["t"], strict=True))
        print(f"{name:24}{times[0] * 1e6:>10.0f}us{times[1] * 1e6:>10.0f}us  {speedups}")
    counts = collections.Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    print("exported model:", sum(counts.values()), "nodes:", dict(sorted(counts.items())))


if __name__ == "__main__":
    main()
