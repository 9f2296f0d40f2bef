"""Export time against graph size: networks of dense layers (MatMul, Add, and Relu or, every
third layer, Tanh), chains of 330 layers side by side on one input and summed, from about
1k to 20k ONNX nodes (one chain: PyTensor's graph cloning overflows the stack past ~1,000
layers in a row). PyTensor's own rewrites of the graph (`compile_for_export`, what any
PyTensor backend pays) are timed apart from what pt_onnxscript adds: `export_onnx` of the
compiled function (the translation, the optimiser, the full ONNX check), with and without
the optimiser. Wall time, the best of three.

Run: python benchmarks/export_time.py
"""

import argparse

from timing import ROUNDS  # noqa: F401  (first: one core, one thread, before BLAS loads)

# isort: split
import gc
import time

import numpy as np
import pytensor.tensor as pt

from pt_onnxscript import export_onnx
from pt_onnxscript.export import compile_for_export


def network(chains: int, layers: int = 330):
    rng = np.random.default_rng(0)
    x = pt.matrix("x", shape=(None, 8))
    outs = []
    for c in range(chains):
        h = x
        for i in range(layers):
            w = pt.constant(rng.normal(size=(8, 8)) / 8, name=f"w{c}_{i}")
            b = pt.constant(rng.normal(size=8), name=f"b{c}_{i}")
            h = pt.dot(h, w) + b
            h = pt.tanh(h) if i % 3 == 2 else pt.maximum(h, 0)
        outs.append(h)
    return x, pt.add(*outs) if chains > 1 else outs[0]


def best_of(n, run):
    """The least wall time of `n` runs, each started with the last one's model freed and
    garbage collected (freeing a 10k-node model inside a timed run added up to a second)."""
    times, result = [], None
    for _ in range(n):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    print(
        f"{'nodes':>7}{'PyTensor rewrites':>19}{'export':>9}"
        f"{'per 1k nodes':>14}{'optimize=False':>16}"
    )
    for chains in (1, 5, 10, 20):
        x, out = network(chains)
        start = time.perf_counter()
        fn = compile_for_export([x], [out])
        rewrites = time.perf_counter() - start
        seconds, model = best_of(3, lambda fn=fn: export_onnx(fn))
        plain, _ = best_of(3, lambda fn=fn: export_onnx(fn, optimize=False))
        nodes = len(model.graph.node)
        print(
            f"{nodes:>7}{rewrites:>18.2f}s{seconds:>8.2f}s"
            f"{seconds / nodes * 1e3:>13.2f}s{plain:>15.2f}s"
        )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
