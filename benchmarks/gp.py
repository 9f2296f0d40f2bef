"""GP marginal log-likelihood and its gradient: mode "ONNX" against PyTensor's default mode.

Prints, per problem size, the time per call of each and their ratio, measured side by side.
Run: python benchmarks/gp.py
"""

import timeit

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.linalg import solve_triangular

import pt_onnxscript  # noqa: F401  (registers mode "ONNX")


def gp_logp_and_grad():
    x = pt.vector("x")
    y = pt.vector("y")
    ls = pt.scalar("ls")
    k = pt.exp(-0.5 * ((x[:, None] - x[None, :]) / ls) ** 2) + 0.1 * pt.eye(x.shape[0])
    chol = pt.linalg.cholesky(k)
    alpha = solve_triangular(chol, y, lower=True)
    logp = -0.5 * (alpha**2).sum() - pt.log(pt.diagonal(chol)).sum()
    return [x, y, ls], [logp, pytensor.grad(logp, ls)]


def per_call(fn, args, repeat=5):
    fn(*args)
    number = max(1, int(0.2 / max(timeit.timeit(lambda: fn(*args), number=1), 1e-6)))
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=repeat)) / number


def main():
    inputs, outputs = gp_logp_and_grad()
    default = pytensor.function(inputs, outputs)
    onnx = pytensor.function(inputs, outputs, mode="ONNX")
    rng = np.random.default_rng(0)
    print(f"{'n':>5} {'default mode':>14} {'mode ONNX':>12} {'ONNX / default':>15}")
    for n in (100, 500):
        args = [np.sort(rng.uniform(0, 10, n)), rng.normal(size=n), np.array(1.3)]
        np.testing.assert_allclose(onnx(*args), default(*args), rtol=1e-9)
        t_default, t_onnx = per_call(default, args), per_call(onnx, args)
        print(
            f"{n:>5} {t_default * 1e3:>12.2f}ms {t_onnx * 1e3:>10.2f}ms {t_onnx / t_default:>15.2f}"
        )


if __name__ == "__main__":
    main()
