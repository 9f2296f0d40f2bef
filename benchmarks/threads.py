"""ONNX Runtime's thread settings for mode "ONNX"'s sessions, side by side in one run: one
thread per node; its default pool (a thread per core, spinning between nodes); and the
same pool sleeping between nodes (`linker.session_options()`, mode "ONNX"'s default). Per
call, wall and CPU microseconds (CPU: every thread of the process), medians of interleaved
rounds, on graphs from a small MLP (float32, batch 1 and 64) to large MatMuls (float64).
Each measurement runs in a fresh process: a spinning pool keeps spinning after its call
returns, and would take the CPU from the next measurement.

Run: python benchmarks/threads.py
"""

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt

from pt_onnxscript import export_onnx
from pt_onnxscript.linker import session_options


def options(setting: str):
    """ONNX Runtime's own defaults, or mode "ONNX"'s `session_options` (one thread; None)."""
    if setting == "pool, spinning (ORT default)":
        return ort.SessionOptions()
    return session_options(1 if setting == "1 thread" else None)


def cases(rng):
    x = pt.matrix("x", dtype="float32")
    w1 = pytensor.shared(rng.normal(size=(64, 128)).astype("float32"), name="w1")
    w2 = pytensor.shared(rng.normal(size=(128, 10)).astype("float32"), name="w2")
    mlp = export_onnx(([x], [pt.special.softmax(pt.tanh(x @ w1) @ w2, axis=1)]))
    a, b = pt.matrix("a"), pt.matrix("b")
    matmul = export_onnx(([a, b], [pt.exp(a @ b).sum()]))
    for n in (1, 64):
        yield f"MLP 64-128-10, batch {n}", mlp, {"x": rng.normal(size=(n, 64)).astype("float32")}
    for n in (300, 1000):
        feed = {"a": rng.normal(size=(n, n)), "b": 0.01 * rng.normal(size=(n, n))}
        yield f"exp(a @ b).sum(), {n} x {n}", matmul, feed


def timed(session, feed, calls: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        session.run(None, feed)
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def measure(path: str, setting: str, feed, calls: int | None) -> tuple[float, float]:
    """In a fresh process: a session of `setting`, warmed up, then `calls` calls timed
    (None: as many as take ~0.2 s)."""
    session = ort.InferenceSession(path, options(setting), providers=["CPUExecutionProvider"])
    first = timed(session, feed, 3)[0]
    return timed(session, feed, calls or max(3, int(200_000 / max(first, 1.0))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    settings = ("1 thread", "pool, spinning (ORT default)", "pool, sleeping")
    print(f"| graph | {' | '.join(f'{s}: wall / CPU us' for s in settings)} |")
    print("|---|" + "---|" * len(settings))
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        for index, (name, model, feed) in enumerate(cases(np.random.default_rng(0))):
            path = str(Path(tmp) / f"{index}.onnx")
            Path(path).write_bytes(model.SerializeToString())
            results = {s: [] for s in settings}
            for _ in range(args.rounds):
                for s in settings:
                    with context.Pool(1) as pool:
                        results[s].append(pool.apply(measure, (path, s, feed, None)))
            cells = [
                f"{statistics.median(r[0] for r in results[s]):.0f} / "
                f"{statistics.median(r[1] for r in results[s]):.0f}"
                for s in settings
            ]
            print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
