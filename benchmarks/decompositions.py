"""Decompositions side by side in one run: PyTensor's default mode (LAPACK through
SciPy/NumPy) against the exported model in ONNX Runtime, for expm, QR, eigh, eigvalsh, SVD
pinv and the real Schur decomposition of general (symmetric for eigh) float64 matrices.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/decompositions.py
"""

import argparse

from timing import default_against_exported  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt

PYTENSOR_3 = int(pytensor.__version__.split(".")[0]) >= 3


def problems(n, rng):
    """name -> (inputs, outputs, values, how many outputs to compare): eigenvectors and
    singular vectors are unique only up to sign, so only values are compared there; of the
    Schur form, its diagonal sorted (the eigenvalues' real parts: LAPACK's multishift QR for
    n >= 75 finds them in another order)."""
    a = pt.matrix("a")
    m = rng.normal(size=(n, n))
    symmetric = m + m.T
    w, v = pt.linalg.eigh(a)
    u, s, vt = pt.linalg.svd(a)
    t, z = pt.linalg.schur(a)
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
        "schur": ([a], [pt.sort(pt.diagonal(t)), t, z], [m], 1),
    }


def main():
    rng = np.random.default_rng(0)
    default_against_exported(
        (f"n = {n:>3}  {name}", *problem)
        for n in (10, 50, 200)
        for name, problem in problems(n, rng).items()
    )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
