"""Many-chain HMC for PyMC models, every transition in ONNX Runtime.

ONNX Runtime pays per executed node, not per element: one call that moves every chain costs
little more than one that moves one. So the sampler is many chains advanced together, each
transition one ONNX model call: draw momenta, take `n_steps` leapfrog steps of every chain
(an ONNX Loop over the model's batched log-density and gradient), accept or reject each
chain's proposal (Metropolis), report divergences.

The algorithm is ChEES-HMC (Hoffman, Radul & Sountsov, "An adaptive MCMC scheme for setting
trajectory lengths in Hamiltonian Monte Carlo", AISTATS 2021), the many-chain HMC that
adapts a trajectory length shared by all chains, jittered at each transition, in place of
NUTS's per-chain trees, which a fixed-size graph cannot build without running the longest
chain's tree for all. Warm-up adapts, from all chains at once: the step size by dual
averaging (Stan's, on the chains' harmonic mean acceptance probability, as ChEES does), a
diagonal mass matrix from the chains' draws in Stan's doubling windows, and the trajectory
length by Adam on the ChEES criterion. Chains start at PyMC's jittered initial points (uniform in [-1, 1] around the
initial point in the unconstrained space).

The transition is a PyTensor graph (`transition_function`), exported by this package;
`sample` drives it from Python (NumPy for the adaptation) and packages the draws as an
InferenceData like `pm.sample`'s.
"""

import time

import numpy as np

from pt_onnxscript.pymc_model import layout, logp_graph, parameter_checks

# What the transition model takes and gives (`export_sampler` writes them in its metadata).
INPUTS = ("position", "step_size", "inv_mass", "n_steps", "rng")
OUTPUTS = (
    "next_position",
    "logp",
    "accept_prob",
    "diverging",
    "energy",
    "proposal",
    "velocity",
    "rng_updated",
)
# A trajectory whose energy grows past this is divergent, as in PyMC and Stan.
MAX_ENERGY_ERROR = 1000.0


def transition_function(model, chains: int):
    """One HMC transition of `chains` chains of `model`, compiled for export: inputs
    ``position`` (chains, n) in the unconstrained space (`pymc_model.layout`), ``step_size``,
    ``inv_mass`` (n,), ``n_steps`` and the random state ``rng``; outputs the next positions,
    their log-densities, each chain's acceptance probability, divergence and energy, the
    proposals and their velocities (what ChEES adapts the trajectory length from), and the
    advanced state."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.replace import graph_replace

    from pt_onnxscript.export import compile_for_export

    points, logp, dlogp = logp_graph(model, batch=chains)
    n = points.type.shape[1]
    position = pt.tensor("position", dtype="float64", shape=(chains, n))
    step_size = pt.scalar("step_size", dtype="float64")
    inv_mass = pt.tensor("inv_mass", dtype="float64", shape=(n,))
    n_steps = pt.scalar("n_steps", dtype="int64")
    rng = pytensor.shared(np.random.default_rng(0), name="rng")

    def density(q):
        return graph_replace([logp, dlogp], {points: q}, strict=False)

    def kinetic(p):
        return 0.5 * pt.sum(p * p * inv_mass, axis=1)

    def leapfrog(q, p, g, _):
        p_half = p + 0.5 * step_size * g
        q_new = q + step_size * inv_mass * p_half
        logp_new, g_new = density(q_new)
        return q_new, p_half + 0.5 * step_size * g_new, g_new, logp_new

    logp0, grad0 = density(position)
    z = pt.random.normal(0.0, 1.0, size=(chains, n), rng=rng)
    u = pt.random.uniform(0.0, 1.0, size=(chains,), rng=z.owner.outputs[0])
    momentum = z / pt.sqrt(inv_mass)
    h0 = -logp0 + kinetic(momentum)
    trajectory = _scan(leapfrog, outputs_info=[position, momentum, grad0, logp0], n_steps=n_steps)
    q1, p1, _, logp1 = (values[-1] for values in trajectory)
    h1 = -logp1 + kinetic(p1)
    error = h1 - h0
    diverging = pt.isnan(error) | (error > MAX_ENERGY_ERROR)
    log_accept = pt.switch(diverging, -np.inf, -error)
    accept_prob = pt.exp(pt.minimum(log_accept, 0.0))
    accepted = pt.log(u) < log_accept
    outputs = [
        pt.switch(accepted[:, None], q1, position),
        pt.switch(accepted, logp1, logp0),
        accept_prob,
        diverging,
        pt.switch(accepted, h1, h0),
        q1,
        p1 * inv_mass,
    ]
    return compile_for_export(
        [position, step_size, inv_mass, n_steps],
        outputs,
        updates={rng: u.owner.outputs[0]},
        including=[parameter_checks(model)],
    )


def _scan(step, **kwargs):
    """pytensor.scan's outputs (PyTensor 3 returns its updates only when asked)."""
    import inspect

    import pytensor

    if "return_updates" in inspect.signature(pytensor.scan).parameters:
        return pytensor.scan(step, return_updates=False, **kwargs)
    return pytensor.scan(step, **kwargs)[0]


def export_sampler(model, path=None, *, chains: int = 32, opset: int | None = None):
    """Export `model`'s HMC transition of `chains` chains (`transition_function`): inputs
    and outputs named as INPUTS and OUTPUTS, the point layout and the chains in the
    metadata (``pt_onnxscript.layout``, ``pt_onnxscript.sampler``), so any ONNX Runtime
    binding can run the chains with plain arrays. Returns the onnx.ModelProto (also written
    to `path` if given)."""
    import json
    from pathlib import Path

    import onnx

    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.translate import DEFAULT_OPSET

    _check_model(model)
    chains = _positive_int(chains, "chains")
    proto = export_onnx(
        transition_function(model, chains),
        opset=DEFAULT_OPSET if opset is None else opset,
        output_names=list(OUTPUTS[:-1]),
    )
    names = [value.name for value in proto.graph.input]
    if names != list(INPUTS):
        raise AssertionError(f"the sampler's inputs are {names}, not {list(INPUTS)}")
    entries = {
        "pt_onnxscript.layout": [s.__dict__ | {"shape": list(s.shape)} for s in layout(model)],
        "pt_onnxscript.sampler": {
            "chains": chains,
            "algorithm": "ChEES-HMC transition (adaptation by the caller)",
            "inputs": list(INPUTS),
            "outputs": list(OUTPUTS),
        },
    }
    for key, value in entries.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    if path is not None:
        onnx.save(proto, str(Path(path)))
    return proto


def _check_model(model) -> None:
    """A clear error, before any work, for a model HMC cannot sample."""
    discrete = [var.name for var in model.free_RVs if var.dtype.startswith(("int", "uint", "bool"))]
    if discrete:
        raise ValueError(
            f"sample: the model has discrete free variables {discrete}, which HMC cannot "
            "move (it follows the gradient of a continuous density); marginalize them out "
            "(pymc_extras' marginalize) or sample the model with pm.sample, which gives them "
            "Metropolis steps"
        )
    if not model.value_vars:
        raise ValueError("sample: the model has no free random variables to sample")


def _positive_int(value, name: str) -> int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ValueError(f"{name} must be an integer >= 1, not {value!r}")


class _DualAveraging:
    """Stan's step size adaptation (Hoffman & Gelman 2014, with Stan's constants)."""

    def __init__(self, step_size: float, target: float):
        self.mu = np.log(10 * step_size)
        self.target = target
        self.log_step = self.log_step_bar = np.log(step_size)
        self.h_bar, self.count = 0.0, 0

    def update(self, accept: float) -> float:
        self.count += 1
        t = self.count
        eta = 1.0 / (t + 10.0)
        self.h_bar = (1 - eta) * self.h_bar + eta * (self.target - accept)
        self.log_step = self.mu - np.sqrt(t) / 0.05 * self.h_bar
        weight = t**-0.75
        self.log_step_bar = weight * self.log_step + (1 - weight) * self.log_step_bar
        return float(np.exp(self.log_step))

    @property
    def final(self) -> float:
        return float(np.exp(self.log_step_bar))


class _Adam:
    """Adam ascending one parameter (the log trajectory length), ChEES's choice: beta1 0,
    beta2 0.95 (Hoffman, Radul & Sountsov 2021, section 4)."""

    def __init__(self, value: float, rate: float = 0.025):
        self.value, self.rate, self.second, self.count = value, rate, 0.0, 0

    def step(self, gradient: float) -> float:
        self.count += 1
        self.second = 0.95 * self.second + 0.05 * gradient * gradient
        corrected = self.second / (1 - 0.95**self.count)
        self.value += self.rate * gradient / (np.sqrt(corrected) + 1e-8)
        return self.value


def _halton(index: int) -> float:
    """The base-2 Halton (van der Corput) sequence's `index`-th term, in (0, 1): ChEES's
    jitter of the trajectory length."""
    result, fraction = 0.0, 0.5
    while index:
        result += fraction * (index & 1)
        index >>= 1
        fraction /= 2
    return result


def _windows(tune: int) -> set[int]:
    """The warm-up iterations after which the mass matrix is re-estimated: Stan's windows
    (an initial buffer of 15%, then windows doubling from 25 draws, a final 10% buffer)."""
    start, end = int(0.15 * tune), tune - int(0.1 * tune)
    ends, size = set(), 25
    while start + size < end:
        following = start + size
        if following + 2 * size > end:  # the last window takes the rest
            following = end
        ends.add(following)
        start, size = following, size * 2
    if tune >= 20 and start < end:
        ends.add(end)
    return ends


def _chees_gradient(previous, proposal, velocity, accept, inv_mass, length):
    """The ChEES criterion's gradient in the log trajectory length, averaged over chains
    weighted by their acceptance probabilities (Hoffman, Radul & Sountsov 2021, eq. 6), in
    the coordinates the mass matrix whitens."""
    scale = np.sqrt(inv_mass)
    x0 = (previous - previous.mean(axis=0)) / scale
    x1 = (proposal - proposal.mean(axis=0)) / scale
    v1 = velocity / scale
    terms = length * ((x1 * x1).sum(1) - (x0 * x0).sum(1)) * (x1 * v1).sum(1)
    usable = np.isfinite(terms) & (accept > 0)
    if not usable.any():
        return 0.0
    weights = accept[usable]
    return float((weights * terms[usable]).sum() / weights.sum())


def sample(
    model,
    draws: int = 1000,
    tune: int = 1000,
    chains: int | None = None,
    random_seed=None,
    target_accept: float = 0.8,
    progressbar: bool = True,
    threads: int | None = None,
):
    """Sample `model`'s posterior with many-chain ChEES-HMC, every transition in ONNX
    Runtime; returns an arviz.InferenceData like ``pm.sample``'s: ``posterior`` (the free
    variables in their constrained space and the deterministics, with the model's dims and
    coords), ``sample_stats`` (diverging, step_size, lp, energy, acceptance_rate,
    n_steps, the trajectory length) and ``attrs["sampling_time"]``.

    `chains` (default 32) run together, each call of the ONNX model moving all of them;
    `random_seed` (an int, or None for a fresh one) makes the draws reproducible; `threads`
    is ONNX Runtime's threads per node (None: its default, one per core). The sampling time
    (``attrs["sampling_time"]``, wall seconds, warm-up included) leaves out the export;
    ``attrs["sampling_cpu_time"]`` is its CPU time.
    """
    import onnxruntime as ort

    from pt_onnxscript.rng import state_from_generator

    _check_model(model)
    draws, tune = _positive_int(draws, "draws"), _count(tune, "tune")
    chains = 32 if chains is None else _positive_int(chains, "chains")
    threads = None if threads is None else _positive_int(threads, "threads")
    if random_seed is not None and not isinstance(random_seed, int | np.integer):
        raise TypeError(f"random_seed must be an int or None, not {type(random_seed).__name__}")
    if isinstance(random_seed, bool) or not 0 < target_accept < 1:
        raise ValueError(
            f"target_accept must be in (0, 1), not {target_accept!r}"
            if not 0 < target_accept < 1
            else "random_seed must be an int or None, not a bool"
        )
    seeds = np.random.SeedSequence(random_seed)
    driver, transitions = (np.random.default_rng(child) for child in seeds.spawn(2))

    proto = export_sampler(model, chains=chains)
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    slots = layout(model)
    n = slots[-1].stop
    position = _initial_positions(model, slots, chains, driver)
    inv_mass = np.ones(n)
    step_size = 0.25 / n**0.25
    adaptation = _DualAveraging(step_size, target_accept)
    log_length = _Adam(np.log(step_size))
    windows, window = _windows(tune), []
    state = state_from_generator(transitions)

    keep = {"next_position": [], "logp": [], "accept_prob": [], "diverging": [], "energy": []}
    stats_steps, stats_step_size, stats_length = [], [], []
    start, cpu_start = time.perf_counter(), time.process_time()
    total = tune + draws
    for iteration in range(total):
        warming = iteration < tune
        # ChEES's jitter: the length times 2 h for h in (0, 1), h a Halton term.
        jittered = np.exp(log_length.value) * 2 * _halton(iteration + 1)
        n_steps = int(max(1, np.ceil(jittered / step_size)))
        previous = position
        outs = session.run(
            None,
            {
                "position": position,
                "step_size": np.array(step_size),
                "inv_mass": inv_mass,
                "n_steps": np.array(n_steps, dtype=np.int64),
                "rng": state,
            },
        )
        results = dict(zip(OUTPUTS, outs, strict=True))
        position, state = results["next_position"], results["rng_updated"]
        if warming:
            accept = results["accept_prob"]
            step_size = adaptation.update(_harmonic_mean(accept))
            gradient = _chees_gradient(
                previous, results["proposal"], results["velocity"], accept, inv_mass, jittered
            )
            log_length.step(gradient)
            # The trajectory at least one step, and no longer than 1,000 steps.
            log_length.value = float(
                np.clip(log_length.value, np.log(step_size), np.log(1000 * step_size))
            )
            if iteration >= int(0.15 * tune):
                window.append(position)
            if iteration + 1 in windows:
                inv_mass = _mass_from(np.concatenate(window))
                window = []
                adaptation = _DualAveraging(step_size, target_accept)
            if iteration + 1 == tune:
                step_size = adaptation.final
        else:
            for name, values in keep.items():
                values.append(results[name])
            stats_steps.append(n_steps)
            stats_step_size.append(step_size)
            stats_length.append(n_steps * step_size)
        if progressbar and (iteration + 1) % max(1, total // 20) == 0:
            phase = "tuning" if warming else "sampling"
            print(f"\r{iteration + 1}/{total} ({phase})", end="", flush=True)
    elapsed = time.perf_counter() - start, time.process_time() - cpu_start
    if progressbar:
        print()
    return _inference_data(
        model,
        slots,
        {name: np.stack(values, axis=1) for name, values in keep.items()},
        {
            "n_steps": np.array(stats_steps),
            "step_size": np.array(stats_step_size),
            "trajectory_length": np.array(stats_length),
        },
        chains,
        elapsed,
    )


def _harmonic_mean(accept) -> float:
    """The chains' harmonic mean acceptance probability, what ChEES adapts the step size to
    (Hoffman, Radul & Sountsov 2021): a few chains that reject pull it down, where the
    arithmetic mean let the step grow until the chains in a funnel's neck diverged."""
    return float(len(accept) / np.sum(1.0 / np.maximum(accept, 1e-10)))


def _count(value, name: str) -> int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(f"{name} must be an integer >= 0, not {value!r}")


def _mass_from(positions):
    """Stan's regularized diagonal inverse mass matrix from the window's draws of every
    chain: their variance shrunk towards 1e-3."""
    count = len(positions)
    variance = positions.var(axis=0)
    return (count / (count + 5.0)) * variance + 1e-3 * (5.0 / (count + 5.0))


def _initial_positions(model, slots, chains, rng):
    """PyMC's jittered starts: the initial point plus uniform [-1, 1] jitter in the
    unconstrained space, drawn again (up to 10 times) where the log-density is not finite."""
    from pt_onnxscript.pymc_model import ravel_point

    start = ravel_point(model.initial_point(), slots)
    logp = model.compile_logp()
    positions = np.empty((chains, start.size))
    for chain in range(chains):
        for _ in range(10):
            candidate = start + rng.uniform(-1, 1, start.size)
            point = {s.name: candidate[s.start : s.stop].reshape(s.shape) for s in slots}
            if np.isfinite(logp(point)):
                break
        positions[chain] = candidate
    return positions


def _inference_data(model, slots, kept, steps, chains, elapsed):
    """The draws as pm.sample's InferenceData: constrained values and deterministics by
    PyTensor's vectorized map of the value variables, the sample stats beside them."""
    import arviz as az
    import pytensor
    import pytensor.tensor as pt
    from pymc.util import get_default_varnames
    from pytensor.graph.replace import graph_replace, vectorize_graph

    positions = kept["next_position"]  # (chains, draws, n)
    draws = positions.shape[1]
    names = get_default_varnames(
        [var.name for var in model.free_RVs + model.deterministics], include_transformed=False
    )
    outputs = [model[name] for name in names]
    outputs = model.replace_rvs_by_values(outputs)
    point = pt.vector("point", shape=(slots[-1].stop,))
    values = {
        var: point[s.start : s.stop].reshape(s.shape).astype(var.dtype)
        for var, s in zip(model.value_vars, slots, strict=True)
    }
    outputs = graph_replace(outputs, values, strict=False)
    points = pt.matrix("points", shape=(None, slots[-1].stop))
    batched = vectorize_graph(outputs, replace={point: points})
    constrained = pytensor.function([points], batched, on_unused_input="ignore")
    results = constrained(positions.reshape(chains * draws, -1))
    posterior = {
        name: np.asarray(value).reshape(chains, draws, *np.shape(value)[1:])
        for name, value in zip(names, results, strict=True)
    }
    sample_stats = {
        "lp": kept["logp"],
        "acceptance_rate": kept["accept_prob"],
        "diverging": kept["diverging"],
        "energy": kept["energy"],
        **{name: np.broadcast_to(value, (chains, draws)).copy() for name, value in steps.items()},
    }
    dims = {name: list(d) for name, d in model.named_vars_to_dims.items() if name in posterior}
    coords = {name: np.asarray(c) for name, c in model.coords.items() if c is not None}
    return az.from_dict(
        posterior=posterior,
        sample_stats=sample_stats,
        coords=coords,
        dims=dims,
        attrs={
            "sampling_time": elapsed[0],
            "sampling_cpu_time": elapsed[1],
            "sampler": "pt_onnxscript ChEES-HMC",
        },
    )
