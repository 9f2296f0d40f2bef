"""Sampling a PyMC posterior, side by side in one run on the same models: pt_onnxscript's
`sample` (many-chain ChEES-HMC, every transition in ONNX Runtime; 1 thread and ONNX
Runtime's default threads), `pm.sample` (its default NUTS and backend, 4 chains of 1,000
draws after 1,000 tuning steps, one process: cores=1) and nutpie where it is installed (its
NUTS on the model compiled by Numba, the same draws, one thread). Bulk ESS (the smallest over the
model's variables) per second of sampling, wall and CPU, warm-up included; the export and
compilation before it are reported apart.

Run: python benchmarks/sampling.py [--model logistic]   (needs the `pymc` extra; `pip install nutpie` adds it)
"""

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm

from pt_onnxscript.pymc_model import sample


def eight_schools():
    y = np.array([28, 8, -3, 7, -1, 1, 18, 12.0])
    sigma = np.array([15, 10, 16, 11, 9, 11, 10, 18.0])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        offset = pm.Normal("offset", 0, 1, shape=8)
        pm.Normal("obs", mu + tau * offset, sigma, observed=y)
    return model


def logistic_regression():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 5))
    y = rng.random(500) < 1 / (1 + np.exp(-(x @ [1.0, -2.0, 0.5, 0.0, 0.3] + 0.3)))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=5)
        intercept = pm.Normal("intercept", 0, 2)
        pm.Bernoulli("y", logit_p=intercept + x @ beta, observed=y)
    return model


def hierarchical():
    rng = np.random.default_rng(1)
    group = rng.integers(0, 20, 400)
    y = rng.normal(size=400) + group / 10
    with pm.Model() as model:
        mu = pm.Normal("mu")
        tau = pm.HalfNormal("tau", 1)
        offset = pm.Normal("offset", 0, 1, shape=20)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", mu + tau * offset[group], sigma, observed=y)
    return model


def min_ess(idata) -> float:
    return float(az.ess(idata, method="bulk").to_array().min())


def ours(model, threads):
    start = time.perf_counter()
    idata = sample(
        model, draws=500, tune=500, chains=32, random_seed=1, progressbar=False, threads=threads
    )
    total = time.perf_counter() - start
    wall, cpu = idata.attrs["sampling_time"], idata.attrs["sampling_cpu_time"]
    return idata, wall, cpu, total - wall


def pymc_own(model):
    start = time.perf_counter()
    with model:
        idata = pm.sample(
            draws=1000,
            tune=1000,
            chains=4,
            cores=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
    total = time.perf_counter() - start
    stats = idata.sample_stats
    wall = float(stats.attrs["sampling_time"])
    return idata, wall, None, total - wall


def nutpie_run(model):
    """nutpie's NUTS (its default: PyMC's model compiled by Numba), 4 chains of 1,000 draws
    after 1,000 tuning steps, one thread; None where nutpie is not installed."""
    try:
        import nutpie
    except ImportError:
        return None
    start = time.perf_counter()
    compiled = nutpie.compile_pymc_model(model)
    setup = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    idata = nutpie.sample(
        compiled, draws=1000, tune=1000, chains=4, cores=1, seed=1, progress_bar=False
    )
    return idata, time.perf_counter() - wall, time.process_time() - cpu, setup


MODELS = {
    "eight_schools": ("eight schools (non-centred)", eight_schools),
    "logistic": ("logistic regression, 500 x 5", logistic_regression),
    "hierarchical": ("hierarchical normal, 20 groups", hierarchical),
}


def main(models):
    rows = []
    for key in models:
        label, build = MODELS[key]
        model = build()
        for name, run in (
            ("ours, 32 chains, 1 thread", lambda m: ours(m, 1)),
            ("ours, 32 chains, default threads", lambda m: ours(m, None)),
            ("pm.sample, 4 chains", pymc_own),
            ("nutpie, 4 chains", nutpie_run),
        ):
            result = run(model)
            if result is None:
                print(f"{name}: not installed (pip install nutpie), left out")
                continue
            idata, wall, cpu, before = result
            if cpu is None:  # pm.sample (one process, one thread) reports its wall time only
                cpu = wall
            ess = min_ess(idata)
            divergences = int(idata.sample_stats.diverging.sum())
            rows.append((label, name, ess, wall, cpu, before, divergences))
    print(
        f"{'model':32}{'sampler':34}{'min ESS':>9}{'wall s':>8}{'CPU s':>8}"
        f"{'ESS/wall s':>11}{'ESS/CPU s':>10}{'setup s':>9}{'div':>5}"
    )
    for label, name, ess, wall, cpu, before, divergences in rows:
        print(
            f"{label:32}{name:34}{ess:>9.0f}{wall:>8.2f}{cpu:>8.2f}"
            f"{ess / wall:>11.0f}{ess / cpu:>10.0f}{before:>9.1f}{divergences:>5}"
        )
    print("(pm.sample's CPU time is its sampling wall time: one process, one thread, cores=1)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        choices=list(MODELS),
        action="append",
        help="a model to run (repeat for more; default: all)",
    )
    main(parser.parse_args().model or list(MODELS))
