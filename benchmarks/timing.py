"""What every benchmark here shares: one core, one thread everywhere, rounds interleaved
across the runners, the median of the rounds, wall time beside CPU time.

Import it first (it pins the process and sets the thread counts before NumPy loads BLAS).
"""

import os

os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import collections
import statistics
import sys
import time

import onnxruntime as ort

ROUNDS = 15


def session(model):
    """An ONNX Runtime CPU session on one thread."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def interleaved(runners, value, seconds=0.05):
    """Median wall and CPU seconds per call of each runner on `value`, rounds interleaved;
    a line on stderr when done (the benchmarks' progress)."""
    began = time.perf_counter()
    numbers = {}
    for name, run in runners.items():
        run(value)
        start = time.perf_counter()
        run(value)
        numbers[name] = max(1, int(seconds / max(time.perf_counter() - start, 1e-7)))
    wall = collections.defaultdict(list)
    cpu = collections.defaultdict(list)
    for _ in range(ROUNDS):
        for name, run in runners.items():
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(numbers[name]):
                run(value)
            wall[name].append((time.perf_counter() - w0) / numbers[name])
            cpu[name].append((time.process_time() - c0) / numbers[name])
    elapsed = time.perf_counter() - began
    print(f"  timed {', '.join(runners)}: {ROUNDS} rounds, {elapsed:.1f} s", file=sys.stderr)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in runners}


def default_against_exported(problems, rtol=1e-8, atol=1e-10):
    """Time PyTensor's default mode against the exported model in ONNX Runtime on each of
    `problems`, (label, inputs, outputs, values, compared) tuples, after checking that the
    first `compared` outputs agree (to `rtol`, `atol`); print the table and return its rows."""
    import numpy as np
    import pytensor

    from pt_onnxscript import export_onnx

    rows = []
    for label, inputs, outputs, values, compared in problems:
        default = pytensor.function(inputs, outputs)
        ours = session(export_onnx((inputs, outputs)))
        feed = {var.name: value for var, value in zip(inputs, values, strict=True)}
        got, expected = ours.run(None, feed), default(*values)
        for x, y in zip(got[:compared], expected[:compared], strict=True):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)
        times = interleaved(
            {
                "default": lambda _, f=default, v=values: f(*v),
                "exported": lambda _, s=ours, feed=feed: s.run(None, feed),
            },
            None,
        )
        rows.append((label, times))
    width = max(len(label) for label, _ in rows)
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    print(f"{'problem':<{width}}  {'PyTensor default':>20} {'exported, ORT':>20} {'ratio':>7}")
    for label, times in rows:
        (dw, dc), (ow, oc) = times["default"], times["exported"]
        print(
            f"{label:<{width}}  {dw * 1e3:>9.3f} ({dc * 1e3:>8.3f})"
            f" {ow * 1e3:>9.3f} ({oc * 1e3:>8.3f}) {ow / dw:>7.1f}"
        )
    return rows
