"""Decompositions side by side in one run: PyTensor's default mode (LAPACK through
SciPy/NumPy) against the exported model in ONNX Runtime, for expm, QR, eigh, eigvalsh, SVD
and pinv of general (symmetric for eigh) float64 matrices.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/decompositions.py
"""

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx

PYTENSOR_3 = int(pytensor.__version__.split(".")[0]) >= 3


def problems(n, rng):
    """name -> (inputs, outputs, values, how many outputs to compare): eigenvectors and
    singular vectors are unique only up to sign, so only values are compared there."""
    a = pt.matrix("a")
    m = rng.normal(size=(n, n))
    symmetric = m + m.T
    w, v = pt.linalg.eigh(a)
    u, s, vt = pt.linalg.svd(a)
    if PYTENSOR_3:
        values_only = pt.linalg.eigvalsh(a)
    else:
        from pytensor.tensor.type_other import NoneConst

        values_only = pt.linalg.eigvalsh(a, NoneConst)
    return {
        "expm": ([a], [pt.linalg.expm(a)], [m / np.sqrt(n)], 1),
        "qr": ([a], list(pt.linalg.qr(a)), [m], 2),
        "eigh": ([a], [w, v], [symmetric], 1),
        "eigvalsh": ([a], [values_only], [symmetric], 1),
        "svd": ([a], [s, u, vt], [m], 1),
        "pinv": ([a], [pt.linalg.pinv(a)], [m], 1),
    }


def main():
    rng = np.random.default_rng(0)
    rows = []
    for n in (10, 50, 200):
        for name, (inputs, outputs, values, compared) in problems(n, rng).items():
            default = pytensor.function(inputs, outputs)
            ours = session(export_onnx((inputs, outputs)))
            feed = {var.name: value for var, value in zip(inputs, values, strict=True)}
            got, expected = ours.run(None, feed), default(*values)
            for x, y in zip(got[:compared], expected[:compared], strict=True):
                scale = np.abs(y).max()
                np.testing.assert_allclose(x, y, rtol=1e-7, atol=1e-10 * scale)
            times = interleaved(
                {
                    "default": lambda _, f=default, v=values: f(*v),
                    "exported": lambda _, s=ours, feed=feed: s.run(None, feed),
                },
                None,
            )
            rows.append((n, name, times))
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    print(f"{'n':>5}  {'problem':<10} {'PyTensor default':>20} {'exported, ORT':>20} {'ratio':>7}")
    for n, name, times in rows:
        (dw, dc), (ow, oc) = times["default"], times["exported"]
        print(
            f"{n:>5}  {name:<10} {dw * 1e3:>9.3f} ({dc * 1e3:>8.3f})"
            f" {ow * 1e3:>9.3f} ({oc * 1e3:>8.3f}) {ow / dw:>7.1f}"
        )


if __name__ == "__main__":
    main()
