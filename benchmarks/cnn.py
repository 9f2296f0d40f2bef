"""The digits CNN, side by side in one run: inference latency in PyTensor's default and Numba
modes, mode "ONNX", and a raw ONNX Runtime session on the exported file (optimised, and
exported with optimize=False); an Adam training step (a batch of 64, gradients from
pytensor.grad) in PyTensor's default and Numba modes and mode "ONNX"; then the exported
models' nodes.

One core (the process is pinned to CPU 0, BLAS and ONNX Runtime use one thread), rounds
interleaved across the runners, the median of the rounds, wall time beside CPU time.

Run: python benchmarks/cnn.py   (needs scikit-learn, the `test` extra)
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import collections

import numpy as np
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx, onnx_mode
from pt_onnxscript.demos import digits


def main():
    split = digits.load_digits()
    params = digits.init_params()
    digits.train(split, params, epochs=5)
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    probs = digits.forward(x, params)
    optimized = export_onnx(([x], [probs]))
    plain = export_onnx(([x], [probs]), optimize=False)
    exported, unoptimized = session(optimized), session(plain)
    runners = {
        "PyTensor default mode": pytensor.function([x], probs),
        "PyTensor NUMBA mode": pytensor.function([x], probs, mode="NUMBA"),
        'mode "ONNX"': pytensor.function([x], probs, mode=onnx_mode(threads=1)),
        "exported, ONNX Runtime": lambda v: exported.run(None, {"x": v})[0],
        "optimize=False export": lambda v: unoptimized.run(None, {"x": v})[0],
    }
    results = {}
    for batch in (1, 64):
        v = split.x_test[:batch]
        reference = runners["PyTensor default mode"](v)
        for run in runners.values():
            np.testing.assert_allclose(run(v), reference, rtol=1e-4, atol=1e-6)
        results[batch] = interleaved(runners, v)
    print(
        f"{'1 core, median of ' + str(ROUNDS) + ' rounds':24}"
        f"{'batch 1 wall':>14}{'cpu':>8}{'batch 64 wall':>15}{'cpu':>8}"
        "   vs default mode (wall)"
    )
    base = {batch: results[batch]["PyTensor default mode"][0] for batch in results}
    for name in runners:
        (w1, c1), (w64, c64) = results[1][name], results[64][name]
        ratios = f"{base[1] / w1:>6.1f}x {base[64] / w64:>6.1f}x"
        print(
            f"{name:24}{w1 * 1e6:>12.1f}us{c1 * 1e6:>6.1f}us"
            f"{w64 * 1e6:>13.1f}us{c64 * 1e6:>6.1f}us   {ratios}"
        )
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Numba will use object mode")
        steps = {
            "PyTensor default mode": digits.training_step(params, mode=None),
            "PyTensor NUMBA mode": digits.training_step(params, mode="NUMBA"),
            'mode "ONNX"': digits.training_step(params, mode=onnx_mode(threads=1)),
        }
    batch = split.x_train[:64], split.y_train[:64]
    trained = interleaved({name: lambda b, f=f: f(*b) for name, f in steps.items()}, batch)
    base = trained["PyTensor default mode"][0]
    print(f"\n{'Adam step, batch of 64':24}{'wall':>14}{'cpu':>8}   vs default mode (wall)")
    for name, (wall, cpu) in trained.items():
        print(f"{name:24}{wall * 1e6:>12.1f}us{cpu * 1e6:>6.1f}us   {base / wall:>6.1f}x")
    for label, model in (("exported", optimized), ("optimize=False", plain)):
        counts = collections.Counter(node.op_type for node in model.graph.node)
        print(f"{label} model: {sum(counts.values())} nodes {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
