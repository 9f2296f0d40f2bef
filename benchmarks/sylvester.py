"""The Sylvester equation A X + X B = C side by side in one run: PyTensor's default mode (two
real Schur decompositions and LAPACK's trsyl, through SciPy), our export as it chooses (the
Kronecker form up to KRONECKER_MOST unknowns, else the Schur form of the smaller matrix and a
linear system per diagonal block), and our export forced to each of the two forms: where the
crossover lies. Square systems of static size, float64.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/sylvester.py
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx
from pt_onnxscript.ops import linear_control

try:  # PyTensor 3
    from pytensor.tensor.linalg import solve_sylvester
except ImportError:  # PyTensor 2.38
    from pytensor.tensor._linalg.solve.linear_control import solve_sylvester


def exported(m, n, most):
    """A session on the export of a static m x n system with KRONECKER_MOST = `most`."""
    chosen = linear_control.KRONECKER_MOST
    linear_control.KRONECKER_MOST = most
    try:
        a, b, c = (pt.tensor(x, shape=s) for x, s in zip("abc", [(m, m), (n, n), (m, n)]))
        return session(export_onnx(([a, b, c], [solve_sylvester(a, b, c)])))
    finally:
        linear_control.KRONECKER_MOST = chosen


def main():
    rng = np.random.default_rng(0)
    rows = []
    for size in (8, 16, 24, 32, 45):
        values = [rng.normal(size=(size, size)) for _ in range(3)]
        feed = dict(zip("abc", values, strict=True))
        a, b, c = pt.matrix("a"), pt.matrix("b"), pt.matrix("c")
        default = pytensor.function([a, b, c], solve_sylvester(a, b, c))
        ours = exported(size, size, linear_control.KRONECKER_MOST)
        kronecker, schur = exported(size, size, 10**9), exported(size, size, 0)
        expected = default(*values)
        for s in (ours, kronecker, schur):
            np.testing.assert_allclose(s.run(None, feed)[0], expected, rtol=1e-8, atol=1e-10)
        times = interleaved(
            {
                "default": lambda _, fn=default, v=values: fn(*v),
                "ours": lambda _, s=ours, f=feed: s.run(None, f),
                "kronecker": lambda _, s=kronecker, f=feed: s.run(None, f),
                "schur": lambda _, s=schur, f=feed: s.run(None, f),
            },
            None,
        )
        rows.append((f"m = n = {size:>2} ({size * size:>4} unknowns)", times))
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    names = ["default", "ours", "kronecker", "schur"]
    titles = ["PyTensor default", "exported", "Kronecker form", "Schur form"]
    width = max(len(label) for label, _ in rows)
    print(f"{'problem':<{width}}" + "".join(f"{t:>21}" for t in titles) + "  ratio")
    for label, times in rows:
        cells = "".join(f"{times[k][0] * 1e3:>10.3f} ({times[k][1] * 1e3:>8.3f})" for k in names)
        print(f"{label:<{width}}{cells} {times['ours'][0] / times['default'][0]:>6.1f}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
