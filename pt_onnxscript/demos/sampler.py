"""The sampler demo: a PyMC model's posterior sampled in the browser, with no Python there.

    python -m pt_onnxscript.demos.sampler            # export, sample on the CPU, serve the page
    python -m pt_onnxscript.demos.sampler --no-serve # stop after sampling on the CPU

It exports the sampler of eight schools (non-centred; `pt_onnxscript.pymc.sampling`: 4
chains, 1,000 warm-up transitions) and writes a page that samples it with onnxruntime-web in
a Web Worker, in calls of 100 transitions that drive a progress bar, then draws each
variable's posterior (histograms) and a trace. The page and `starting_feed` turn a seed into
the same starting positions and random state, so the page's draws are the ones ONNX
Runtime's CPU build gives from that seed (`run`). Needs the `pymc` extra and, for the page,
`npm ci --ignore-scripts` in pt_onnxscript/demos/web.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

CHAINS = 4
TUNE = 1000
# Transitions per call: the page's progress bar moves this many at a time.
CHUNK = 100
MASK = 2**64 - 1


def eight_schools():
    """Rubin's eight schools, non-centred (the model of notebook 04)."""
    import pymc as pm

    y = np.array([28, 8, -3, 7, -1, 1, 18, 12.0])
    sigma = np.array([15, 10, 16, 11, 9, 11, 10, 18.0])
    schools = ["A", "B", "C", "D", "E", "F", "G", "H"]
    with pm.Model(coords={"school": schools}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        offset = pm.Normal("offset", 0, 1, dims="school")
        theta = pm.Deterministic("theta", mu + tau * offset, dims="school")
        pm.Normal("obs", theta, sigma, observed=y)
    return model


def build_site(directory: Path, model=None, chains: int = CHAINS, tune: int = TUNE) -> Path:
    """The page's data: the exported sampler (model/sampler.onnx) and what the page reads
    from its metadata (sampler.json: chains, warm-up, the initial point and state, the
    posterior's outputs with their shapes, dims and coords)."""
    from pt_onnxscript.pymc_model import export_sampler

    model = eight_schools() if model is None else model
    (directory / "model").mkdir(parents=True, exist_ok=True)
    proto = export_sampler(model, directory / "model" / "sampler.onnx", chains=chains, tune=tune)
    meta = next(json.loads(e.value) for e in proto.metadata_props if e.key.endswith(".sampler"))
    for entry in meta["posterior"]:
        entry["shape"] = [int(d) for d in model[entry["name"]].shape.eval()]
    meta["coords"] = {name: list(map(str, c)) for name, c in model.coords.items() if c is not None}
    meta["chunk"] = CHUNK
    (directory / "sampler.json").write_text(json.dumps(meta))
    return directory


def splitmix64(state: int) -> tuple[int, int]:
    """Vigna's SplitMix64: the next state and its 64-bit output (the page's `splitmix64`)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def starting_feed(meta: dict, seed: int) -> dict[str, np.ndarray]:
    """The sampler's first inputs for `seed` (an integer in [0, 2^53)), as the page makes
    them: each chain starts at the initial point plus uniform [-1, 1) jitter (PyMC's
    default), the uniforms the top 53 bits of SplitMix64 outputs from `seed`; the
    generator's key is the next output."""
    if not (isinstance(seed, int) and 0 <= seed < 2**53):
        raise ValueError(f"seed must be an integer in [0, 2**53), not {seed!r}")
    initial = np.array(meta["initial_point"])
    state, jitter = seed, np.empty((meta["chains"], initial.size))
    for index in np.ndindex(jitter.shape):
        state, z = splitmix64(state)
        jitter[index] = 2.0 * ((z >> 11) * 2.0**-53) - 1.0
    _, key = splitmix64(state)
    return {
        "position": initial + jitter,
        "state": np.array(meta["initial_state"]),
        "rng": np.array([key, 0], dtype=np.uint64),
    }


def run(path, meta: dict, seed: int, draws: int, warmup: bool = False) -> dict[str, np.ndarray]:
    """Sample with ONNX Runtime's CPU build as the page does (calls of CHUNK transitions
    from `starting_feed`), one thread: the draws (draws, chains, ...) of every output but
    the state's, after the warm-up's transitions if `warmup`."""
    import onnxruntime as ort

    from pt_onnxscript.linker import session_options
    from pt_onnxscript.pymc.sampling import in_calls_of, run_in_calls

    session = ort.InferenceSession(
        str(path), session_options(1), providers=["CPUExecutionProvider"]
    )
    feed = starting_feed(meta, seed) | {"target_accept": np.array(0.8)}
    outputs = run_in_calls(session, feed, in_calls_of(CHUNK, meta["tune"] + draws))
    return {name: values[0 if warmup else meta["tune"] :] for name, values in outputs.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Export the ChEES-HMC sampler of PyMC's eight schools model to ONNX, "
        "sample it with ONNX Runtime on the CPU, and serve a page (127.0.0.1 only) that "
        "samples it in the browser with onnxruntime-web."
    )
    parser.add_argument("--no-serve", action="store_true", help="stop after sampling on the CPU")
    parser.add_argument("--port", type=int, default=8000, help="the page's port (default 8000)")
    parser.add_argument("--site", type=Path, default=None, help="where to write the model")
    parser.add_argument("--seed", type=int, default=1, help="the CPU run's seed (default 1)")
    parser.add_argument("--draws", type=int, default=1000, help="draws per chain (default 1000)")
    args = parser.parse_args(argv)
    if not args.no_serve:  # what serving needs, before the export
        from pt_onnxscript.demos.web.server import check_can_serve

        check_can_serve(args.port)

    site = args.site or Path(tempfile.mkdtemp(prefix="sampler-"))
    start = time.perf_counter()
    build_site(site)
    path = site / "model" / "sampler.onnx"
    meta = json.loads((site / "sampler.json").read_text())
    print(
        f"exported the sampler of eight schools in {time.perf_counter() - start:.1f} s "
        f"({path.stat().st_size / 1000:.0f} kB, {meta['chains']} chains, {meta['tune']} warm-up)"
    )
    start = time.perf_counter()
    draws = run(path, meta, args.seed, args.draws)
    print(
        f"ONNX Runtime (CPU, 1 thread): {meta['chains']} chains x {args.draws} draws in "
        f"{time.perf_counter() - start:.1f} s, {int(draws['diverging'].sum())} divergences"
    )
    for entry in meta["posterior"]:
        values = draws[entry["output"]].reshape(-1, *entry["shape"])
        means, sds = np.atleast_1d(values.mean(0)), np.atleast_1d(values.std(0))
        summary = ", ".join(f"{m:.2f} ({s:.2f})" for m, s in zip(means, sds, strict=True))
        print(f"  {entry['name']}: {summary}")
    if args.no_serve:
        return
    from pt_onnxscript.demos.web.server import serve_until_interrupted

    serve_until_interrupted(site, args.port, "sampler.html", "sample in the browser")


if __name__ == "__main__":
    main()
