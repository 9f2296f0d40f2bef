"""The discrete Lyapunov and algebraic Riccati equations side by side in one run, against
PyTensor's default mode (SciPy's Schur decompositions and trsyl for the Lyapunov equation's
bilinear method; the QZ decomposition of the extended symplectic pencil for the Riccati
equation), in ONNX Runtime:

- solve_discrete_lyapunov: our export (Smith's doubling, three MatMuls per step) and the
  same export forced to its bilinear branch (what it ran before: a continuous Lyapunov
  equation, in Kronecker or Schur form). A of spectral radius 0.95.
- solve_discrete_are: our export (structure-preserving doubling: an LU and six MatMuls per
  step), random stabilizable systems, Q and R positive definite; the doubling's step count
  beside each.

Static sizes, float64. One core, one thread, rounds interleaved, medians
(benchmarks/timing.py).

Run: python benchmarks/linear_control.py
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.linalg

from pt_onnxscript import export_onnx
from pt_onnxscript.ops import linear_control

try:  # PyTensor 3
    from pytensor.tensor.linalg import solve_discrete_are, solve_discrete_lyapunov
except ImportError:  # PyTensor 2.38
    from pytensor.tensor.slinalg import solve_discrete_are, solve_discrete_lyapunov


def doubling_steps(a, b, q, r):
    """The number of doubling steps our export takes (the same iteration in NumPy)."""
    m = a.shape[0]
    shifted = r + b.T @ q @ b
    gain = b @ np.linalg.solve(shifted, b.T)
    a = a - b @ np.linalg.solve(shifted, b.T @ q @ a)
    h = a.T @ q @ a
    for step in range(1, 101):
        w = np.linalg.solve(np.eye(m) + gain @ h, np.hstack([a, gain]))
        h_next = h + a.T @ h @ w[:, :m]
        gain = gain + a @ w[:, m:] @ a.T
        a = a @ w[:, :m]
        eps = np.finfo(float).eps
        if np.abs(h_next - h).max() <= eps * np.abs(h_next).max() and np.abs(a).max() <= eps:
            return step
        h = h_next
    return None


def lyapunov_export(n, smith: bool):
    """A session on the export of X = A X A^T + Q of static size n, by Smith's doubling or,
    with no doubling step allowed, forced to the bilinear branch."""
    most = linear_control.MOST_SMITH_STEPS
    linear_control.MOST_SMITH_STEPS = most if smith else 0
    try:
        a, q = pt.tensor("a", shape=(n, n)), pt.tensor("q", shape=(n, n))
        return session(export_onnx(([a, q], [solve_discrete_lyapunov(a, q)])))
    finally:
        linear_control.MOST_SMITH_STEPS = most


def lyapunov():
    rng = np.random.default_rng(0)
    rows = []
    for n in (5, 10, 30, 60):
        a = rng.normal(size=(n, n))
        a *= 0.95 / np.abs(np.linalg.eigvals(a)).max()
        q = rng.normal(size=(n, n))
        values = [a, q @ q.T]
        feed = dict(zip("aq", values, strict=True))
        inputs = [pt.tensor(x, shape=(n, n)) for x in "aq"]
        default = pytensor.function(inputs, solve_discrete_lyapunov(*inputs))
        ours, bilinear = lyapunov_export(n, True), lyapunov_export(n, False)
        expected = scipy.linalg.solve_discrete_lyapunov(*values)
        scale = np.abs(expected).max()
        for s in (ours, bilinear):
            np.testing.assert_allclose(s.run(None, feed)[0], expected, rtol=0, atol=1e-9 * scale)
        times = interleaved(
            {
                "default": lambda _, fn=default, v=values: fn(*v),
                "ours": lambda _, s=ours, f=feed: s.run(None, f),
                "bilinear": lambda _, s=bilinear, f=feed: s.run(None, f),
            },
            None,
        )
        rows.append((f"n = {n:>3}", times))
    print("solve_discrete_lyapunov")
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    titles = ["PyTensor default", "exported, ORT", "bilinear branch"]
    print(f"{'problem':<10}" + "".join(f"{t:>21}" for t in titles) + "  ratio")
    for label, times in rows:
        names = ("default", "ours", "bilinear")
        cells = "".join(f"{times[k][0] * 1e3:>10.3f} ({times[k][1] * 1e3:>8.3f})" for k in names)
        print(f"{label:<10}{cells} {times['ours'][0] / times['default'][0]:>6.2f}")


def riccati():
    rng = np.random.default_rng(0)
    rows = []
    for m, n in [(3, 1), (10, 2), (30, 5), (100, 10)]:
        a = rng.normal(size=(m, m)) / np.sqrt(m)
        b = rng.normal(size=(m, n))
        q = rng.normal(size=(m, m))
        r = rng.normal(size=(n, n))
        values = [a, b, q @ q.T + np.eye(m), r @ r.T + np.eye(n)]
        feed = dict(zip("abqr", values, strict=True))
        shapes = [(m, m), (m, n), (m, m), (n, n)]
        inputs = [pt.tensor(x, shape=s) for x, s in zip("abqr", shapes, strict=True)]
        default = pytensor.function(inputs, solve_discrete_are(*inputs))
        ours = session(export_onnx((inputs, [solve_discrete_are(*inputs)])))
        expected = scipy.linalg.solve_discrete_are(*values)
        scale = np.abs(expected).max()
        np.testing.assert_allclose(default(*values), expected, rtol=1e-8, atol=1e-8 * scale)
        np.testing.assert_allclose(ours.run(None, feed)[0], expected, rtol=0, atol=1e-10 * scale)
        times = interleaved(
            {
                "default": lambda _, fn=default, v=values: fn(*v),
                "ours": lambda _, s=ours, f=feed: s.run(None, f),
            },
            None,
        )
        label = f"m = {m:>3}, n = {n:>2} ({doubling_steps(*values)} steps)"
        rows.append((label, times))
    print("\nsolve_discrete_are")
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    width = max(len(label) for label, _ in rows)
    titles = ["PyTensor default", "exported, ORT"]
    print(f"{'problem':<{width}}" + "".join(f"{t:>21}" for t in titles) + "  ratio")
    for label, times in rows:
        cells = "".join(
            f"{times[k][0] * 1e3:>10.3f} ({times[k][1] * 1e3:>8.3f})" for k in ("default", "ours")
        )
        print(f"{label:<{width}}{cells} {times['ours'][0] / times['default'][0]:>6.2f}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    lyapunov()
    riccati()
