"""What mode "ONNX" adds to a call: a 10-element graph (exp(x) * 2 + 1) run by
`InferenceSession.run` on the exported model, by a PyTensor function in mode "ONNX" (and
with `trust_input=True`, which skips PyTensor's own checks of the arguments), and by PyTensor's
default mode; the difference to `session.run` in microseconds.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/overhead.py
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx, onnx_mode


def main():
    x = pt.vector("x")
    y = pt.exp(x) * 2 + 1
    value = np.arange(10.0)
    raw = session(export_onnx(([x], [y])))
    name = raw.get_inputs()[0].name
    onnx_fn = pytensor.function([x], y, mode=onnx_mode(threads=1))
    trusting = pytensor.function([x], y, mode=onnx_mode(threads=1))
    trusting.trust_input = True
    default = pytensor.function([x], y)
    for fn in (onnx_fn, trusting, default):
        np.testing.assert_allclose(fn(value), np.exp(value) * 2 + 1, rtol=1e-15)
    times = interleaved(
        {
            "InferenceSession.run": lambda v: raw.run(None, {name: v}),
            'mode "ONNX"': onnx_fn,
            'mode "ONNX", trust_input': trusting,
            "PyTensor default mode": default,
        },
        value,
        seconds=0.02,
    )
    floor = times["InferenceSession.run"][0]
    print(f"10-element graph, median of {ROUNDS} interleaved rounds, one thread")
    print(f"{'':<28}{'wall us':>9}{'CPU us':>9}{'over session.run':>19}")
    for label, (wall, cpu) in times.items():
        print(f"{label:<28}{wall * 1e6:>9.2f}{cpu * 1e6:>9.2f}{(wall - floor) * 1e6:>16.2f} us")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
