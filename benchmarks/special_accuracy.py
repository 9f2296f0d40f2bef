"""Measured accuracy of the special functions' translations against SciPy/NumPy.

Prints, per function and dtype, the domain sampled and the largest relative error of mode
"ONNX" against SciPy/NumPy evaluated in float64 and rounded to the dtype. Errors are relative
to the smallest normal number of the dtype at least, so results that underflow to subnormals
count by their absolute error. Run: python benchmarks/special_accuracy.py
"""

import argparse

import numpy as np
import pytensor
import pytensor.tensor as pt
import scipy.special as sp

import pt_onnxscript  # noqa: F401  (registers mode "ONNX")

rng = np.random.default_rng(0)


def sample(low, high, n=20000, log=False):
    if log:
        return np.concatenate([10 ** rng.uniform(low, high, n), -(10 ** rng.uniform(low, high, n))])
    return rng.uniform(low, high, n)


FUNCTIONS = [
    ("erf", pt.erf, sp.erf, (-6, 6)),
    ("erfc", pt.erfc, sp.erfc, (-6, 27)),
    ("erfcx", pt.erfcx, sp.erfcx, (-26, 1e4)),
    ("gammaln", pt.gammaln, sp.gammaln, (1e-3, 1e4)),
    ("psi", pt.psi, sp.psi, (1e-3, 1e4)),
    ("trigamma", pt.tri_gamma, lambda x: sp.polygamma(1, x), (-30, 1e4)),
    ("gamma", pt.gamma, sp.gamma, (-40, 171)),
    ("erfinv", pt.erfinv, sp.erfinv, (-1, 1)),
    ("erfcinv", pt.erfcinv, sp.erfcinv, (0, 2)),
    ("log1p", pt.log1p, np.log1p, (-0.999, 1e3)),
    ("expm1", pt.expm1, np.expm1, (-40, 700)),
    ("sigmoid", pt.sigmoid, sp.expit, (-700, 700)),
    ("softplus", pt.softplus, lambda x: np.logaddexp(0, x), (-700, 700)),
    (
        "log1mexp",
        pt.log1mexp,
        lambda x: np.where(x < np.log(0.5), np.log1p(-np.exp(x)), np.log(-np.expm1(x))),
        (-700, -1e-10),
    ),
    ("sin", pt.sin, np.sin, (-1e5, 1e5)),
    ("cos", pt.cos, np.cos, (-1e5, 1e5)),
    ("tan", pt.tan, np.tan, (-10, 10)),
    ("arcsin", pt.arcsin, np.arcsin, (-1, 1)),
    ("arccos", pt.arccos, np.arccos, (-1, 1)),
    ("arctan", pt.arctan, np.arctan, (-1e3, 1e3)),
    ("sinh", pt.sinh, np.sinh, (-700, 700)),
    ("cosh", pt.cosh, np.cosh, (-700, 700)),
    ("arcsinh", pt.arcsinh, np.arcsinh, (-1e6, 1e6)),
    ("arccosh", pt.arccosh, np.arccosh, (1, 1e6)),
    ("arctanh", pt.arctanh, np.arctanh, (-1, 1)),
    ("i0", pt.i0, sp.i0, (-700, 700)),
    ("i0e", lambda x: pt.ive(0, x), sp.i0e, (-1e4, 1e4)),
    ("i1", pt.i1, sp.i1, (-700, 700)),
    ("i1e", lambda x: pt.ive(1, x), sp.i1e, (-1e4, 1e4)),
    ("ive(2, x)", lambda x: pt.ive(2, x), lambda x: sp.ive(2, x), (-1e4, 1e4)),
]


# Functions of several arguments: (name, op, reference, one (low, high, log-uniform?) per
# argument).
SEVERAL_ARGUMENTS = [
    ("gammainc", pt.gammainc, sp.gammainc, [(1e-2, 1e2, True), (1e-2, 1e2, True)]),
    ("gammainc", pt.gammainc, sp.gammainc, [(1e-2, 1e4, True), (1e-2, 1e4, True)]),
    ("gammaincc", pt.gammaincc, sp.gammaincc, [(1e-2, 1e2, True), (1e-2, 1e2, True)]),
    ("gammaincc", pt.gammaincc, sp.gammaincc, [(1e-2, 1e4, True), (1e-2, 1e4, True)]),
    ("gammaincinv", pt.gammaincinv, sp.gammaincinv, [(1e-2, 1e2, True), (0, 1, False)]),
    ("gammainccinv", pt.gammainccinv, sp.gammainccinv, [(1e-2, 1e2, True), (0, 1, False)]),
    ("betainc", pt.betainc, sp.betainc, [(1e-2, 1e2, True), (1e-2, 1e2, True), (0, 1, False)]),
    ("betainc", pt.betainc, sp.betainc, [(1, 1e3, True), (1, 1e3, True), (0, 1, False)]),
    (
        "betaincinv",
        pt.betaincinv,
        sp.betaincinv,
        [(1e-2, 1e2, True), (1e-2, 1e2, True), (0, 1, False)],
    ),
    ("kve", pt.kve, sp.kve, [(1e-2, 30, True), (1e-3, 1e3, True)]),
    ("owens_t", pt.owens_t, sp.owens_t, [(1e-3, 10, True), (1e-4, 1e2, True)]),
]


def draw(low, high, log, n=20000):
    return np.exp(rng.uniform(np.log(low), np.log(high), n)) if log else rng.uniform(low, high, n)


def max_relative_error(got, expected, dtype):
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    with np.errstate(all="ignore"):
        err = np.abs(got.astype("float64") - expected) / np.maximum(
            np.abs(expected), np.finfo(dtype).tiny
        )
    return float(np.nanmax(np.where(same, 0.0, err)))


def errors(op, reference, samples, name=""):
    for dtype in ("float64", "float32"):
        args = [pt.vector(dtype=dtype) for _ in samples]
        fn = pytensor.function(args, op(*args), mode="ONNX")
        values = [s.astype(dtype) for s in samples]
        with np.errstate(all="ignore"):
            expected = reference(*(v.astype("float64") for v in values)).astype(dtype)
        # Below 1e-200 SciPy's betainc loses digits, then flushes to 0 (tests/test_scalar_betainc.py);
        # SciPy's betaincinv gives the smallest normal float for an x that underflows, where
        # the answer is 0 or subnormal (tests/test_scalar_betaincinv.py).
        floor = {"betainc": 1e-200, "betaincinv": np.finfo("float64").tiny}.get(name, -1)
        trusted = np.abs(expected) > floor
        yield max_relative_error(fn(*values)[trusted], expected.astype("float64")[trusted], dtype)


def main():
    print(f"{'function':10} {'domain':>34} {'float64':>10} {'float32':>10}")
    for name, op, reference, (low, high) in FUNCTIONS:
        e64, e32 = errors(op, reference, [sample(low, high)])
        print(f"{name:10} {f'[{low:g}, {high:g}]':>34} {e64:>10.1e} {e32:>10.1e}")
    for name, op, reference, domains in SEVERAL_ARGUMENTS:
        e64, e32 = errors(op, reference, [draw(*domain) for domain in domains], name)
        domain = " ".join(f"[{low:g}, {high:g}]" for low, high, _ in domains)
        print(f"{name:10} {domain:>34} {e64:>10.1e} {e32:>10.1e}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
