"""Many-chain HMC for PyMC models, every transition in ONNX Runtime.

ONNX Runtime pays per executed node, not per element: one call that moves every chain costs
little more than one that moves one. So the sampler is many chains advanced together, each
transition one step of an ONNX Loop: draw momenta, take `n_steps` leapfrog steps of every chain
(an ONNX Loop over the model's batched log-density and gradient), accept or reject each
chain's proposal (Metropolis), report divergences.

The algorithm is ChEES-HMC (Hoffman, Radul & Sountsov, "An adaptive MCMC scheme for setting
trajectory lengths in Hamiltonian Monte Carlo", AISTATS 2021), the many-chain HMC that
adapts a trajectory length shared by all chains, jittered at each transition, in place of
NUTS's per-chain trees, which a fixed-size graph cannot build without running the longest
chain's tree for all. Warm-up adapts, from all chains at once: the step size by dual
averaging (Stan's, on the chains' harmonic mean acceptance probability, as ChEES does), a
diagonal mass matrix from the chains' draws in Stan's doubling windows, and the trajectory
length by Adam on the ChEES criterion. Chains start at PyMC's jittered initial points
(uniform in [-1, 1] around the initial point in the unconstrained space).

The sampler is one PyTensor graph (`run_function`: a Scan over the transitions, each a
Scan over its leapfrog steps, the warm-up's adaptation in an IfElse between them), exported
by this package as one ONNX model (`export_sampler`) that any ONNX Runtime binding runs with
plain arrays: a whole run in one call, or in calls that each resume where the last stopped
(the adaptation state in and out), with the same draws. `sample` runs it and packages the
draws as an InferenceData like `pm.sample`'s.
"""

import sys
import time

import numpy as np

from pt_onnxscript.pymc_model import layout, logp_graph

# What one transition (`transition_function`) takes and gives.
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

    from pt_onnxscript.export import compile_for_export

    density, n = _density(model, chains)
    position = pt.tensor("position", dtype="float64", shape=(chains, n))
    step_size = pt.scalar("step_size", dtype="float64")
    inv_mass = pt.tensor("inv_mass", dtype="float64", shape=(n,))
    n_steps = pt.scalar("n_steps", dtype="int64")
    rng = pytensor.shared(np.random.default_rng(0), name="rng")
    results, next_rng = _transition(density, position, step_size, inv_mass, n_steps, rng)
    return compile_for_export(
        [position, step_size, inv_mass, n_steps],
        [results[name] for name in OUTPUTS[:-1]],
        updates={rng: next_rng},
    )


def _density(model, chains: int):
    """``density(q)``: the log-densities and gradients of `model` at the (chains, n) points
    `q`, symbolic; and n."""
    from pytensor.graph.replace import graph_replace

    points, logp, dlogp = logp_graph(model, batch=chains)

    def density(q):
        return graph_replace([logp, dlogp], {points: q}, strict=False)

    return density, points.type.shape[1]


def _transition(density, position, step_size, inv_mass, n_steps, rng):
    """One HMC transition of every chain (rows of `position`): the results named as OUTPUTS
    and the advanced random generator."""
    import pytensor.tensor as pt

    def kinetic(p):
        return 0.5 * pt.sum(p * p * inv_mass, axis=1)

    def leapfrog(q, p, g, _):
        p_half = p + 0.5 * step_size * g
        q_new = q + step_size * inv_mass * p_half
        logp_new, g_new = density(q_new)
        return q_new, p_half + 0.5 * step_size * g_new, g_new, logp_new

    logp0, grad0 = density(position)
    z = pt.random.normal(0.0, 1.0, size=position.shape, rng=rng)
    u = pt.random.uniform(0.0, 1.0, size=position.shape[:1], rng=z.owner.outputs[0])
    momentum = z / pt.sqrt(inv_mass)
    h0 = -logp0 + kinetic(momentum)
    trajectory = _scan(leapfrog, outputs_info=[position, momentum, grad0, logp0], n_steps=n_steps)
    q1, p1, _, logp1 = (values[-1] for values in trajectory)
    h1 = -logp1 + kinetic(p1)
    error = h1 - h0
    diverging = pt.isnan(error) | (error > MAX_ENERGY_ERROR)
    log_accept = pt.switch(diverging, -np.inf, -error)
    accepted = pt.log(u) < log_accept
    results = {
        "next_position": pt.switch(accepted[:, None], q1, position),
        "logp": pt.switch(accepted, logp1, logp0),
        "accept_prob": pt.exp(pt.minimum(log_accept, 0.0)),
        "diverging": diverging,
        "energy": pt.switch(accepted, h1, h0),
        "proposal": q1,
        "velocity": p1 * inv_mass,
    }
    return results, u.owner.outputs[0]


# What the sampler model (`run_function`) takes and gives.
RUN_INPUTS = ("position", "state", "start", "transitions", "target_accept", "rng")
RUN_OUTPUTS = (
    "positions",
    "logp",
    "accept_prob",
    "diverging",
    "energy",
    "n_steps",
    "step_size",
    "state_updated",
    "rng_updated",
)
# The sampler's adaptation state, one float64 vector: these scalars, then these n-vectors.
STATE_SCALARS = (
    "step_size",
    "log_step_size_bar",
    "h_bar",
    "count",
    "mu",
    "log_trajectory_length",
    "second_moment",
    "adam_count",
    "window_count",
)
STATE_VECTORS = ("window_sum", "window_squares", "inv_mass")
# The prefix of the outputs that give the draws of each posterior variable, constrained.
POSTERIOR_PREFIX = "posterior."


def state_layout(n: int) -> dict[str, tuple[int, int]]:
    """Where each part of the adaptation state (STATE_SCALARS, STATE_VECTORS) sits in the
    state vector of a model of `n` unconstrained values: name -> (start, stop)."""
    slices = {name: (i, i + 1) for i, name in enumerate(STATE_SCALARS)}
    start = len(STATE_SCALARS)
    for name in STATE_VECTORS:
        slices[name] = (start, start + n)
        start += n
    return slices


def initial_state(n: int) -> np.ndarray:
    """The adaptation state a run starts from: a step size of 0.25 / n^(1/4) (as ChEES),
    a trajectory length of one step, the unit mass matrix, nothing counted yet."""
    step = 0.25 / n**0.25
    values = {
        "step_size": step,
        "log_step_size_bar": np.log(step),
        "mu": np.log(10 * step),
        "log_trajectory_length": np.log(step),
        "inv_mass": 1.0,
    }
    state = np.zeros(len(STATE_SCALARS) + len(STATE_VECTORS) * n)
    for name, (start, stop) in state_layout(n).items():
        state[start:stop] = values.get(name, 0.0)
    return state


def run_function(model, chains: int, tune: int):
    """`chains` chains of `model` sampled as one graph, compiled for export: the run's
    transitions ``start + 1 .. start + transitions`` of a run whose first `tune` are
    warm-up, so a whole run is one call (``start`` 0, ``transitions`` tune + draws) or a
    sequence of calls, each resuming where the last stopped, with the same results.

    Inputs: the chains' ``position`` (chains, n), the adaptation ``state``
    (`initial_state`, or the last call's ``state_updated``), ``start``, ``transitions``,
    ``target_accept`` and the random state ``rng``. Outputs: each transition's
    ``positions`` (transitions, chains, n) and their ``logp``, ``accept_prob``,
    ``diverging`` and ``energy`` (transitions, chains), its ``n_steps`` and ``step_size``
    (transitions,), the ``state_updated`` after the last one, then every free variable and
    deterministic of the model, constrained, at each position (POSTERIOR_PREFIX + name:
    (transitions, chains, *shape)).

    Warm-up, from all chains at once: the step size by Stan's dual averaging on the chains'
    harmonic mean acceptance probability (ChEES's choice: a few rejecting chains pull it
    down), restarted after each mass matrix window; a diagonal mass matrix, Stan's
    regularized variance of every chain's draws in Stan's doubling windows (`_windows`);
    the trajectory length by Adam (beta1 0, beta2 0.95, rate 0.025) ascending the ChEES
    criterion, at least one step and at most 1,000. Each transition's length is the
    trajectory length times 2 h, h the base-2 Halton sequence's term of its number."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.ifelse import ifelse

    from pt_onnxscript.export import compile_for_export

    density, n = _density(model, chains)
    position = pt.tensor("position", dtype="float64", shape=(chains, n))
    state = pt.tensor("state", dtype="float64", shape=(len(initial_state(n)),))
    start = pt.scalar("start", dtype="int64")
    transitions = pt.scalar("transitions", dtype="int64")
    target = pt.scalar("target_accept", dtype="float64")
    rng = pytensor.shared(np.random.default_rng(0), name="rng")

    k = (start + pt.arange(1, transitions + 1)).astype("float64")  # the transitions' numbers
    warming = k <= tune
    collect = warming & (k > int(0.15 * tune))
    ends = np.array(sorted(_windows(tune)) or [-1], dtype="float64")
    window_end = pt.any(pt.eq(k[:, None], ends[None, :]), axis=1)
    final = pt.eq(k, tune)
    bits = np.arange(32, dtype="float64")
    halton = pt.sum((pt.floor(k[:, None] / 2.0**bits) % 2) * 0.5 ** (bits + 1), axis=1)

    def iteration(h, warm, keep, end, last, q, *carried):
        # The state (STATE_SCALARS then STATE_VECTORS), then the generator and the target.
        step, length, inv_mass, r, goal = carried[0], carried[5], carried[11], *carried[12:]
        jittered = pt.exp(length) * 2 * h
        n_steps = pt.maximum(1, pt.ceil(jittered / step)).astype("int64")
        out, next_r = _transition(density, q, step, inv_mass, n_steps, r)
        # Adaptation in warm-up only (an If: the draws skip its arithmetic).
        adapted = _adapt(out, q, carried[:12], jittered, keep, end, last, goal, chains)
        states = ifelse(warm, adapted, list(carried[:12]))
        stats = [out["logp"], out["accept_prob"], out["diverging"], out["energy"], n_steps, step]
        return [out["next_position"], *states, next_r, *stats]

    slices = state_layout(n)
    first = [
        state[a] if b == a + 1 and name in STATE_SCALARS else state[a:b]
        for name, (a, b) in slices.items()
    ]
    results = _scan(
        iteration,
        sequences=[halton, warming, collect, window_end, final],
        outputs_info=[position, *first, rng, *[None] * 6],
        non_sequences=[target],
    )
    q, states, next_rng, stats = results[0], results[1:13], results[13], results[14:]
    # The state after the last transition (the given one after none).
    last = [
        pt.concatenate([pt.atleast_1d(given), pt.atleast_1d(seq[-1:]).ravel()])[-(b - a) :]
        for given, seq, (a, b) in zip(first, states, slices.values(), strict=True)
    ]
    outputs = [q, *stats, pt.concatenate(last), *_posterior(model, q)]
    return compile_for_export(
        [position, state, start, transitions, target], outputs, updates={rng: next_rng}
    )


def _adapt(out, q, state, jittered, keep, end, last, goal, chains: int):
    """One warm-up transition's adaptation of `state` (STATE_SCALARS, STATE_VECTORS) from its
    results `out` (`_transition`) at positions `q`: the step size by dual averaging to the
    chains' harmonic mean acceptance probability `goal`, the trajectory length by Adam on
    the ChEES criterion, the mass matrix window's sums when `keep`; at a window's `end`, the
    mass matrix from them and the dual averaging restarted from the step size reached; at
    the `last` warm-up transition, the step size its average."""
    import pytensor.tensor as pt
    from pytensor.ifelse import ifelse

    log_step_bar, h_bar, count, mu, length, second, adam_count = state[1:8]
    kept, total, squares, inv_mass = state[8:]
    accept, q1 = out["accept_prob"], out["next_position"]
    # Dual averaging, to the chains' harmonic mean acceptance probability.
    mean_accept = chains / pt.sum(1.0 / pt.maximum(accept, 1e-10))
    count1 = count + 1
    eta = 1.0 / (count1 + 10.0)
    h_bar1 = (1 - eta) * h_bar + eta * (goal - mean_accept)
    log_step1 = mu - pt.sqrt(count1) / 0.05 * h_bar1
    weight = count1**-0.75
    log_step_bar1 = weight * log_step1 + (1 - weight) * log_step_bar
    new_step = pt.exp(log_step1)
    # Adam on the ChEES criterion.
    gradient = _chees(q, out["proposal"], out["velocity"], accept, inv_mass, jittered)
    adam_count1 = adam_count + 1
    second1 = 0.95 * second + 0.05 * gradient**2
    corrected = second1 / (1 - 0.95**adam_count1)
    length1 = length + 0.025 * gradient / (pt.sqrt(corrected) + 1e-8)
    length1 = pt.clip(length1, pt.log(new_step), pt.log(1000 * new_step))
    # The mass matrix's window: its sums, Stan's regularized variance at its end, then a
    # new window, and the dual averaging restarted from the step size reached.
    kept1, total1, squares1 = ifelse(
        keep,
        [kept + float(chains), total + q1.sum(axis=0), squares + (q1 * q1).sum(axis=0)],
        [kept, total, squares],
    )
    mean = total1 / pt.maximum(kept1, 1.0)
    variance = pt.maximum(squares1 / pt.maximum(kept1, 1.0) - mean * mean, 0.0)
    estimate = (kept1 / (kept1 + 5.0)) * variance + 1e-3 * (5.0 / (kept1 + 5.0))
    zero, zeros = pt.as_tensor(0.0, dtype="float64"), pt.zeros_like(total)
    restarted = ifelse(
        end,
        [pt.log(new_step), zero, zero, pt.log(10 * new_step), zero, zeros, zeros, estimate],
        [log_step_bar1, h_bar1, count1, mu, kept1, total1, squares1, inv_mass],
    )
    next_step = ifelse(last, pt.exp(restarted[0]), new_step)
    return [
        next_step,
        *restarted[:4],
        length1,
        second1,
        adam_count1,
        *restarted[4:],
    ]


def posterior_names(model) -> list[str]:
    """The names of `model`'s free variables and deterministics, as pm.sample's posterior
    holds them: the sampler's outputs after RUN_OUTPUTS, each prefixed POSTERIOR_PREFIX."""
    from pymc.util import get_default_varnames

    return get_default_varnames(
        [var.name for var in model.free_RVs + model.deterministics], include_transformed=False
    )


def _posterior(model, positions):
    """`model`'s free variables (constrained) and deterministics (`posterior_names`) at
    `positions` (..., n): PyMC's transforms of the unconstrained point, vectorized by
    PyTensor over the leading dimensions."""
    import pytensor.tensor as pt
    from pytensor.graph.replace import graph_replace, vectorize_graph

    slots = layout(model)
    outputs = model.replace_rvs_by_values([model[name] for name in posterior_names(model)])
    point = pt.vector("point", shape=(slots[-1].stop,))
    values = {
        var: point[s.start : s.stop].reshape(s.shape).astype(var.dtype)
        for var, s in zip(model.value_vars, slots, strict=True)
    }
    outputs = graph_replace(outputs, values, strict=False)
    return vectorize_graph(outputs, replace={point: positions})


def _chees(previous, proposal, velocity, accept, inv_mass, length):
    """The ChEES criterion's gradient in the log trajectory length, averaged over the chains
    weighted by their acceptance probabilities (Hoffman, Radul & Sountsov 2021, eq. 6), in
    the coordinates the mass matrix whitens; chains whose proposal is not finite (a
    divergence) left out of the means and the average."""
    import pytensor.tensor as pt

    scale = pt.sqrt(inv_mass)
    finite = pt.all(~pt.isnan(proposal) & ~pt.isinf(proposal), axis=1)
    count = pt.maximum(pt.sum(finite), 1)
    centre = pt.sum(pt.switch(finite[:, None], proposal, 0.0), axis=0) / count
    x0 = (previous - previous.mean(axis=0)) / scale
    x1 = (proposal - centre) / scale
    v1 = velocity / scale
    terms = length * ((x1 * x1).sum(1) - (x0 * x0).sum(1)) * (x1 * v1).sum(1)
    usable = ~pt.isnan(terms) & ~pt.isinf(terms) & (accept > 0)
    weights = pt.switch(usable, accept, 0.0)
    total = pt.sum(weights * pt.switch(usable, terms, 0.0))
    return pt.switch(pt.sum(weights) > 0, total / pt.maximum(pt.sum(weights), 1e-300), 0.0)


def _scan(step, **kwargs):
    """pytensor.scan's outputs (PyTensor 3 returns its updates only when asked)."""
    import inspect

    import pytensor

    if "return_updates" in inspect.signature(pytensor.scan).parameters:
        return pytensor.scan(step, return_updates=False, **kwargs)
    return pytensor.scan(step, **kwargs)[0]


def export_sampler(
    model, path=None, *, chains: int = 32, tune: int = 1000, opset: int | None = None
):
    """Export `model`'s sampler (`run_function`: `chains` chains, the first `tune`
    transitions of a run warm-up) as one ONNX model, for any ONNX Runtime binding: a whole
    run is one call, or a sequence of calls that each resume where the last stopped (for a
    progress bar). Inputs and outputs are named as RUN_INPUTS and RUN_OUTPUTS, then one
    output per posterior variable (POSTERIOR_PREFIX + its name: constrained draws and
    deterministics). The metadata holds the point layout (``pt_onnxscript.layout``) and,
    under ``pt_onnxscript.sampler``, the model's initial point (to jitter the chains'
    starts from), the initial adaptation state and its layout, and the posterior outputs'
    names and dims, so a run needs plain arrays only. Returns the onnx.ModelProto (also
    written to `path` if given)."""
    import json
    from pathlib import Path

    import onnx

    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.pymc_model import ravel_point
    from pt_onnxscript.translate import DEFAULT_OPSET

    _check_model(model)
    chains, tune = _positive_int(chains, "chains"), _count(tune, "tune")
    variables = posterior_names(model)
    fixed = list(RUN_OUTPUTS[:-1])
    proto = export_onnx(
        run_function(model, chains, tune),
        opset=DEFAULT_OPSET if opset is None else opset,
        output_names=fixed + [POSTERIOR_PREFIX + name for name in variables],
    )
    names = [value.name for value in proto.graph.input]
    if names != list(RUN_INPUTS):
        raise AssertionError(f"the sampler's inputs are {names}, not {list(RUN_INPUTS)}")
    # RUN_OUTPUTS first (the random state's after the rest), then the posterior's.
    outputs = list(proto.graph.output)
    order = [*range(len(fixed)), len(outputs) - 1, *range(len(fixed), len(outputs) - 1)]
    del proto.graph.output[:]
    proto.graph.output.extend(outputs[i] for i in order)
    slots = layout(model)
    n = slots[-1].stop
    dims = model.named_vars_to_dims
    entries = {
        "pt_onnxscript.layout": [s.__dict__ | {"shape": list(s.shape)} for s in slots],
        "pt_onnxscript.sampler": {
            "algorithm": "ChEES-HMC (Hoffman, Radul & Sountsov 2021), warm-up included",
            "chains": chains,
            "tune": tune,
            "inputs": list(RUN_INPUTS),
            "outputs": list(RUN_OUTPUTS),
            "posterior": [
                {"name": name, "output": POSTERIOR_PREFIX + name, "dims": dims.get(name)}
                for name in variables
            ],
            "initial_point": ravel_point(model.initial_point(), slots).tolist(),
            "initial_state": initial_state(n).tolist(),
            "state": state_layout(n),
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
    """Sample `model`'s posterior with many-chain ChEES-HMC in ONNX Runtime, running the
    model `export_sampler` writes; returns an arviz.InferenceData like ``pm.sample``'s:
    ``posterior`` (the free variables in their constrained space and the deterministics,
    with the model's dims and coords), ``sample_stats`` (diverging, step_size, lp, energy,
    acceptance_rate, n_steps, trajectory_length) and ``attrs["sampling_time"]``.

    `chains` (default 32) run together, each transition moving all of them; `random_seed`
    (an int, or None for a fresh one) makes the draws reproducible for a given number of
    ONNX Runtime `threads` (None: one per core, sleeping between nodes). The sampling time
    (``attrs["sampling_time"]``, wall seconds, warm-up included) leaves out the export;
    ``attrs["sampling_cpu_time"]`` is its CPU time. Without `progressbar` the warm-up is
    one call and the draws another; with it, calls of 100 transitions report progress (the
    draws are the same).
    """
    import onnxruntime as ort

    from pt_onnxscript.linker import session_options
    from pt_onnxscript.rng import state_from_generator

    _check_model(model)
    draws, tune = _positive_int(draws, "draws"), _count(tune, "tune")
    chains = 32 if chains is None else _positive_int(chains, "chains")
    threads = None if threads is None else _positive_int(threads, "threads")
    if random_seed is not None and not isinstance(random_seed, int | np.integer):
        raise TypeError(f"random_seed must be an int or None, not {type(random_seed).__name__}")
    if isinstance(random_seed, bool):
        raise TypeError("random_seed must be an int or None, not a bool")
    if not 0 < target_accept < 1:
        raise ValueError(f"target_accept must be in (0, 1), not {target_accept!r}")
    seeds = np.random.SeedSequence(random_seed)
    starts, transitions = (np.random.default_rng(child) for child in seeds.spawn(2))

    proto = export_sampler(model, chains=chains, tune=tune)
    options = session_options(threads)
    session = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    slots = layout(model)
    feed = {
        "position": _initial_positions(model, slots, chains, starts),
        "state": initial_state(slots[-1].stop),
        "target_accept": np.array(float(target_accept)),
        "rng": state_from_generator(transitions),
    }
    total = tune + draws
    start, cpu_start = time.perf_counter(), time.process_time()

    def report(done):
        phase = "warm-up" if done <= tune else "draws"
        print(
            f"\rSampling {chains} chains: {done}/{total} transitions ({phase}), "
            f"{time.perf_counter() - start:.1f} s",
            end="" if done < total else "\n",
            file=sys.stderr,
            flush=True,
        )

    if progressbar:
        outputs = run_in_calls(session, feed, in_calls_of(100, total), report)
    else:
        outputs = run_in_calls(session, feed, [tune, draws])
    elapsed = time.perf_counter() - start, time.process_time() - cpu_start
    # The draws: the transitions after the warm-up, chains first.
    kept = {
        name: np.swapaxes(values[tune:], 0, 1) if values.ndim > 1 else values[tune:]
        for name, values in outputs.items()
    }
    return _inference_data(model, kept, elapsed)


def in_calls_of(size: int, total: int) -> list[int]:
    """`total` transitions in calls of `size` (the last one what is left)."""
    return [min(size, total - done) for done in range(0, total, size)]


def run_in_calls(session, feed, sizes, report=None) -> dict[str, np.ndarray]:
    """Run the exported sampler (`export_sampler`) in ONNX Runtime `session` from `feed` (its
    inputs but ``start`` and ``transitions``), in calls of `sizes` transitions, each resuming
    where the last stopped (the positions, state and random state carried over; a call of
    none is skipped): every output but the state's and the random state's, concatenated
    over the calls (transitions first). `report(done)` after each call."""
    names = [output.name for output in session.get_outputs()]
    feed, done, results = dict(feed), 0, []
    for size in sizes:
        if size == 0:
            continue
        feed["start"] = np.array(done, dtype=np.int64)
        feed["transitions"] = np.array(size, dtype=np.int64)
        out = dict(zip(names, session.run(None, feed), strict=True))
        feed |= {
            "position": out["positions"][-1],
            "state": out["state_updated"],
            "rng": out["rng_updated"],
        }
        done += size
        results.append(out)
        if report is not None:
            report(done)
    carried = ("state_updated", "rng_updated")
    return {
        name: np.concatenate([out[name] for out in results])
        for name in names
        if name not in carried
    }


def _count(value, name: str) -> int:
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 0:
        return int(value)
    raise ValueError(f"{name} must be an integer >= 0, not {value!r}")


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


def _inference_data(model, kept, elapsed):
    """The draws as pm.sample's InferenceData: `kept` holds the sampler's outputs after the
    warm-up, (chains, draws, ...)."""
    import arviz as az

    posterior = {name: kept[POSTERIOR_PREFIX + name] for name in posterior_names(model)}
    steps, step_size = kept["n_steps"], kept["step_size"]
    chains, draws = kept["logp"].shape
    sample_stats = {
        "lp": kept["logp"],
        "acceptance_rate": kept["accept_prob"],
        "diverging": kept["diverging"],
        "energy": kept["energy"],
        "n_steps": np.broadcast_to(steps, (chains, draws)).copy(),
        "step_size": np.broadcast_to(step_size, (chains, draws)).copy(),
        "trajectory_length": np.broadcast_to(steps * step_size, (chains, draws)).copy(),
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
