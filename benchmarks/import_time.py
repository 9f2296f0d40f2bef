"""Import time: `import pt_onnxscript` beside `import pytensor.tensor` (what it builds on), and
what the first export then adds (of a graph calling no scripted function, and of one calling
gammaln, which converts the scripted functions it uses), each in a fresh interpreter, rounds
interleaved, one thread, median wall and CPU seconds.

    python benchmarks/import_time.py
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ROUNDS = 9
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
STATEMENTS = {
    "import pytensor.tensor": "import pytensor.tensor",
    "import pt_onnxscript": "import pt_onnxscript",
    "+ first export (loads onnxscript, ONNX Runtime, translations)": (
        "import pt_onnxscript, pytensor.tensor as pt\n"
        "from pt_onnxscript import export_onnx\n"
        "x = pt.vector('x')\n"
        "export_onnx(([x], pt.exp(x)), None)"
    ),
    "+ first export of gammaln (converts its scripted functions)": (
        "import pt_onnxscript, pytensor.tensor as pt\n"
        "from pt_onnxscript import export_onnx\n"
        "x = pt.vector('x')\n"
        "export_onnx(([x], pt.gammaln(x)), None)"
    ),
}


def run(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of a fresh interpreter running `code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=ENV, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    for code in STATEMENTS.values():  # warm the byte-code caches
        run(code)
    times = {name: [] for name in STATEMENTS}
    for _ in range(ROUNDS):
        for name, code in STATEMENTS.items():
            times[name].append(run(code))
    base_wall = statistics.median(w for w, _ in times["import pytensor.tensor"])
    print(f"{'statement (fresh interpreter)':<62} {'wall s':>7} {'CPU s':>7} {'ratio':>6}")
    for name, samples in times.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        print(f"{name:<62} {wall:7.2f} {cpu:7.2f} {wall / base_wall:5.2f}x")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
