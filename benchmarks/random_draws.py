"""Random draws per second, side by side in one run: PyTensor's default and Numba modes (NumPy's
generators), mode "ONNX" and the exported model in ONNX Runtime (our Philox generator), for
normal, gamma and Poisson draws of 1 and 100,000 elements, the generator advanced every call.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/random_draws.py
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx
from pt_onnxscript.linker import onnx_mode
from pt_onnxscript.rng import state_from_generator

DISTRIBUTIONS = {
    "normal(0, 1)": lambda rng, n: pt.random.normal(0.0, 1.0, size=(n,), rng=rng),
    "gamma(2.5)": lambda rng, n: pt.random.gamma(2.5, scale=1.0, size=(n,), rng=rng),
    "poisson(3)": lambda rng, n: pt.random.poisson(3.0, size=(n,), rng=rng),
    "poisson(40)": lambda rng, n: pt.random.poisson(40.0, size=(n,), rng=rng),
}


def runners(make, n):
    result = {}
    for mode in ("default", "NUMBA", "ONNX"):
        rng = pytensor.shared(np.random.default_rng(0))
        draw = make(rng, n)
        # Mode "ONNX" on one thread too: ONNX Runtime's spinning workers would be counted in
        # every runner's CPU time.
        kwargs = {
            "default": {},
            "NUMBA": {"mode": "NUMBA"},
            "ONNX": {"mode": onnx_mode(threads=1)},
        }[mode]
        fn = pytensor.function([], draw, updates={rng: draw.owner.outputs[0]}, **kwargs)
        result[f'mode "{mode}"' if mode == "ONNX" else f"PyTensor {mode}"] = lambda _, f=fn: f()
    rng = pytensor.shared(np.random.default_rng(0), name="rng")
    draw = make(rng, n)
    fn = pytensor.function([], draw, updates={rng: draw.owner.outputs[0]})
    ours = session(export_onnx(fn))
    state = {"rng": state_from_generator(rng.get_value())}

    def exported(_):
        values, state["rng"] = ours.run(None, state)
        return values

    result["exported, ONNX Runtime"] = exported
    return result


def main():
    warnings.simplefilter("ignore")
    print(f"median of {ROUNDS} interleaved rounds, one thread; per call: wall us (CPU us)")
    for n in (1, 100_000):
        print(f"\n{n:,} draw{'s' if n > 1 else ''} per call")
        for name, make in DISTRIBUTIONS.items():
            times = interleaved(runners(make, n), None)
            default = times["PyTensor default"][0]
            print(f"  {name}")
            for runner, (wall, cpu) in times.items():
                print(
                    f"    {runner:<24} {wall * 1e6:10.1f} ({cpu * 1e6:10.1f})"
                    f"  {n / wall:10.3g} draws/s  {wall / default:6.2f}x default"
                )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
