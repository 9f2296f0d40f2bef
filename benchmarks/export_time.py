"""Export time against graph size: deep networks of dense layers (MatMul, Add, and Relu or,
every third layer, Tanh) of about 1k and 2k ONNX nodes. PyTensor's own rewrites of the
graph (`compile_for_export`, what any PyTensor backend pays) are timed apart from what
pt_onnxscript adds: `export_onnx` of the compiled function (the translation, the optimiser,
the full ONNX check), with and without the optimiser. Wall time, the best of three.

Run: python benchmarks/export_time.py
"""

from timing import ROUNDS  # noqa: F401  (first: one core, one thread, before BLAS loads)

# isort: split
import time

import numpy as np
import pytensor.tensor as pt

from pt_onnxscript import export_onnx
from pt_onnxscript.export import compile_for_export


def network(layers: int):
    rng = np.random.default_rng(0)
    x = pt.matrix("x", shape=(None, 8))
    h = x
    for i in range(layers):
        w = pt.constant(rng.normal(size=(8, 8)) / 8, name=f"w{i}")
        b = pt.constant(rng.normal(size=8), name=f"b{i}")
        h = pt.dot(h, w) + b
        h = pt.tanh(h) if i % 3 == 2 else pt.maximum(h, 0)
    return x, h


def best_of(n, run):
    times, result = [], None
    for _ in range(n):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    print(
        f"{'layers':>7}{'nodes':>7}{'PyTensor rewrites':>19}{'export':>9}"
        f"{'per 1k nodes':>14}{'optimize=False':>16}"
    )
    for layers in (330, 660):  # past ~1,000 layers PyTensor's graph cloning overflows the stack
        x, out = network(layers)
        start = time.perf_counter()
        fn = compile_for_export([x], [out])
        rewrites = time.perf_counter() - start
        seconds, model = best_of(3, lambda fn=fn: export_onnx(fn))
        plain, _ = best_of(3, lambda fn=fn: export_onnx(fn, optimize=False))
        nodes = len(model.graph.node)
        print(
            f"{layers:>7}{nodes:>7}{rewrites:>18.2f}s{seconds:>8.2f}s"
            f"{seconds / nodes * 1e3:>13.2f}s{plain:>15.2f}s"
        )


if __name__ == "__main__":
    main()
