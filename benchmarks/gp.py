"""Dense linear algebra side by side in one run: PyTensor's default mode (LAPACK through
SciPy/Numba) against the exported model in ONNX Runtime, for Cholesky, a triangular solve
with one and with n right-hand sides, a general solve and an inverse (LU), and a GP marginal
log-likelihood with its gradient (Cholesky, four triangular solves).

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/gp.py
"""

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.linalg import solve_triangular

from pt_onnxscript import export_onnx


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
    rows = []
    for n in (100, 500, 1000):
        for name, (inputs, outputs, values) in problems(n, rng).items():
            default = pytensor.function(inputs, outputs)
            model = export_onnx((inputs, outputs))
            ours = session(model)
            feed = {var.name: value for var, value in zip(inputs, values, strict=True)}
            for got, expected in zip(ours.run(None, feed), default(*values), strict=True):
                np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)
            times = interleaved(
                {
                    "default": lambda _, f=default, v=values: f(*v),
                    "exported": lambda _, s=ours, feed=feed: s.run(None, feed),
                },
                None,
            )
            rows.append((n, name, times))
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    print(f"{'n':>5}  {'problem':<24} {'PyTensor default':>20} {'exported, ORT':>20} {'ratio':>6}")
    for n, name, times in rows:
        (dw, dc), (ow, oc) = times["default"], times["exported"]
        print(
            f"{n:>5}  {name:<24} {dw * 1e3:>9.3f} ({dc * 1e3:>8.3f})"
            f" {ow * 1e3:>9.3f} ({oc * 1e3:>8.3f}) {ow / dw:>6.1f}"
        )


if __name__ == "__main__":
    main()
