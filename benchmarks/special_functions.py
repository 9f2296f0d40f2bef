"""The incomplete gamma and beta functions and their inverses, and kve, against PyTensor's
default mode (which calls Cephes or SciPy, AMOS for kve), at 1, 10 and 1,000 elements: a and b
log-uniform in [0.1, 100], x and p uniform in (0, 1); kve's order log-uniform in [0.1, 10] and
x in [0.01, 100]. The values are checked first.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/special_functions.py
"""

import argparse

from timing import default_against_exported  # first: one core, one thread, before BLAS loads

# isort: split
import numpy as np
import pytensor.tensor as pt
from pytensor.tensor.math import kve

FUNCTIONS = [
    ("gammainc", pt.gammainc, 2),
    ("gammaincinv", pt.gammaincinv, 2),
    ("betainc", pt.betainc, 3),
    ("betaincinv", pt.betaincinv, 3),
]

KVE_RANGES = [(0.1, 10.0), (0.01, 100.0)]


def main():
    rng = np.random.default_rng(0)
    problems = []
    for name, op, arity in FUNCTIONS:
        for size in (1, 10, 1000):
            parameters = [
                np.exp(rng.uniform(np.log(0.1), np.log(100), size)) for _ in range(arity - 1)
            ]
            values = [*parameters, rng.uniform(0, 1, size)]
            inputs = [pt.dvector(f"arg{i}") for i in range(arity)]
            problems.append((f"{name}, {size:>4} elements", inputs, [op(*inputs)], values, 1))
    for size in (1, 10, 1000):
        values = [np.exp(rng.uniform(np.log(lo), np.log(hi), size)) for lo, hi in KVE_RANGES]
        inputs = [pt.dvector("v"), pt.dvector("x")]
        problems.append((f"kve, {size:>4} elements", inputs, [kve(*inputs)], values, 1))
    default_against_exported(problems, rtol=1e-9, atol=0)


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
