"""Dense linear algebra side by side in one run: PyTensor's default mode (LAPACK through
SciPy/Numba) against the exported model in ONNX Runtime, for Cholesky, a triangular solve
with one and with n right-hand sides, a general solve and an inverse (LU), and a GP marginal
log-likelihood with its gradient (Cholesky, four triangular solves). Matrices of symbolic
size, from 3 x 3 (where ONNX Runtime's cost per node is all there is) to 1000 x 1000.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/gp.py
"""

import argparse

from timing import default_against_exported  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.linalg import solve_triangular


def gp_logp_and_grad():
    x = pt.vector("x")
    y = pt.vector("y")
    ls = pt.scalar("ls")
    k = pt.exp(-0.5 * ((x[:, None] - x[None, :]) / ls) ** 2) + 0.1 * pt.eye(x.shape[0])
    chol = pt.linalg.cholesky(k)
    alpha = solve_triangular(chol, y, lower=True)
    logp = -0.5 * (alpha**2).sum() - pt.log(pt.diagonal(chol)).sum()
    return [x, y, ls], [logp, pytensor.grad(logp, ls)]


def problems(n, rng):
    a, b, many = pt.matrix("a"), pt.vector("b"), pt.matrix("B")
    m = rng.normal(size=(n, n))
    spd = m @ m.T + n * np.eye(n)
    factor = np.linalg.cholesky(spd)
    gp_inputs, gp_outputs = gp_logp_and_grad()
    gp_values = [np.sort(rng.uniform(0, 10, n)), rng.normal(size=n), np.array(1.3)]
    return {
        "cholesky": ([a], [pt.linalg.cholesky(a)], [spd]),
        "solve_triangular, 1 rhs": (
            [a, b],
            [solve_triangular(a, b, lower=True)],
            [factor, rng.normal(size=n)],
        ),
        "solve_triangular, n rhs": (
            [a, many],
            [solve_triangular(a, many, lower=True)],
            [factor, rng.normal(size=(n, n))],
        ),
        "solve (LU), 1 rhs": (
            [a, b],
            [pt.linalg.solve(a, b)],
            [m, rng.normal(size=n)],
        ),
        "inv": ([a], [pt.linalg.inv(a)], [m]),
        "GP logp + gradient": (gp_inputs, gp_outputs, gp_values),
    }


def main():
    rng = np.random.default_rng(0)
    default_against_exported(
        (f"n = {n:>4}  {name}", inputs, outputs, values, len(outputs))
        for n in (3, 10, 100, 500, 1000)
        for name, (inputs, outputs, values) in problems(n, rng).items()
    )


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
