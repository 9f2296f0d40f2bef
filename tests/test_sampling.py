"""The many-chain sampler (pt_onnxscript.pymc.sampling): its posteriors against pm.sample's,
its reproducibility, its exported transition run without PyMC, and its refusals."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest

pm = pytest.importorskip("pymc")
az = pytest.importorskip("arviz")

from pt_onnxscript import export_onnx
from pt_onnxscript.pymc.sampling import OUTPUTS, RUN_INPUTS, RUN_OUTPUTS, transition_function
from pt_onnxscript.pymc_model import export_sampler, layout, ravel_point, read_layout, sample
from pt_onnxscript.rng import state_from_generator


def eight_schools():
    y = np.array([28, 8, -3, 7, -1, 1, 18, 12.0])
    sigma = np.array([15, 10, 16, 11, 9, 11, 10, 18.0])
    with pm.Model(coords={"school": list("abcdefgh")}) as model:
        mu = pm.Normal("mu", 0, 5)
        tau = pm.HalfCauchy("tau", 5)
        offset = pm.Normal("offset", 0, 1, dims="school")
        pm.Deterministic("theta", mu + tau * offset, dims="school")
        pm.Normal("obs", mu + tau * offset, sigma, observed=y)
    return model


def logistic_regression():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = rng.random(200) < 1 / (1 + np.exp(-(x @ [1.0, -2.0, 0.5] + 0.3)))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 2, shape=3)
        intercept = pm.Normal("intercept", 0, 2)
        pm.Bernoulli("y", logit_p=intercept + x @ beta, observed=y)
    return model


def robust_regression():
    """A Student-T likelihood with a learned nu: its gradient calls digamma."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=100)
    y = 1 + 2 * x + rng.standard_t(3, size=100)
    with pm.Model() as model:
        a = pm.Normal("a", 0, 5)
        b = pm.Normal("b", 0, 5)
        sigma = pm.HalfNormal("sigma", 2)
        nu = pm.Gamma("nu", 2, 0.1)
        pm.StudentT("y", nu=nu, mu=a + b * x, sigma=sigma, observed=y)
    return model


def hierarchical():
    """Group means indexed by each observation's group (its gradient a scatter-add)."""
    rng = np.random.default_rng(2)
    group = rng.integers(0, 10, 200)
    y = rng.normal(size=200) + group / 5
    with pm.Model() as model:
        mu = pm.Normal("mu")
        tau = pm.HalfNormal("tau", 1)
        theta = pm.Normal("theta", mu, tau, shape=10)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", theta[group], sigma, observed=y)
    return model


def gaussian_process():
    """A GP's marginal likelihood on 12 points (a Cholesky of the kernel matrix per point,
    its gradient through it)."""
    rng = np.random.default_rng(4)
    x = np.linspace(0, 5, 12)
    y = np.sin(x) + 0.3 * rng.normal(size=12)
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2, 1)
        eta = pm.HalfNormal("eta", 1)
        sigma = pm.HalfNormal("sigma", 0.5)
        gp = pm.gp.Marginal(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls))
        gp.marginal_likelihood("y", X=x[:, None], y=y, sigma=sigma)
    return model


# (model, chains, warm-up, draws): the GP's leapfrog steps cost most, so fewer of them.
RUNS = [
    (eight_schools, 32, 500, 300),
    (logistic_regression, 32, 500, 300),
    (robust_regression, 32, 500, 300),
    (hierarchical, 32, 500, 300),
    (gaussian_process, 16, 300, 250),
]


@pytest.fixture(scope="module", params=RUNS, ids=lambda run: run[0].__name__)
def sampled(request):
    build, chains, tune, draws = request.param
    model = build()
    ours = sample(model, draws=draws, tune=tune, chains=chains, random_seed=3, progressbar=False)
    theirs = pm.sample(
        draws=1000, tune=1000, chains=4, random_seed=3, progressbar=False, model=model
    )
    return (chains, draws), model, ours, theirs


def test_the_posterior_is_pm_samples(sampled):
    """Every posterior mean within 4 Monte Carlo standard errors of pm.sample's, every
    standard deviation within 10%, R-hat <= 1.01, bulk ESS >= 400, divergences no more
    than pm.sample's."""
    size, _, ours, theirs = sampled
    names = list(theirs.posterior.data_vars)
    assert sorted(ours.posterior.data_vars) == sorted(names)
    mine, own = az.summary(ours, var_names=names), az.summary(theirs, var_names=names)
    assert list(mine.index) == list(own.index)
    error = np.hypot(mine["mcse_mean"], own["mcse_mean"])
    assert (np.abs(mine["mean"] - own["mean"]) <= 4 * error).all(), (mine, own)
    assert (np.abs(mine["sd"] / own["sd"] - 1) <= 0.1).all(), (mine, own)
    assert (mine["r_hat"] <= 1.01).all() and (mine["ess_bulk"] >= 400).all(), mine
    assert int(ours.sample_stats.diverging.sum()) <= int(theirs.sample_stats.diverging.sum())
    for name in names:  # PyMC's dims and coords
        assert ours.posterior[name].dims == theirs.posterior[name].dims
    stats = ours.sample_stats
    for stat in ("diverging", "step_size", "lp", "energy", "acceptance_rate", "n_steps"):
        assert stats[stat].shape == size, stat
    assert ours.attrs["sampling_time"] > 0


def test_the_same_seed_gives_the_same_draws(capsys):
    """The same seed, the same draws, whether the run is two calls (warm-up, draws) or calls
    of 100 transitions reporting progress."""
    model = eight_schools()
    runs = [
        sample(model, draws=60, tune=50, chains=4, random_seed=seed, progressbar=progress)
        for seed, progress in ((5, False), (5, True), (6, False))
    ]
    assert "Sampling 4 chains: 110/110 transitions (draws)" in capsys.readouterr().err
    first, again, other = (run.posterior["mu"].values for run in runs)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def _run(session, feed, **changes):
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feed | changes), strict=True))


def test_the_exported_sampler_runs_without_pymc(tmp_path):
    """A whole run, warm-up included, with ONNX Runtime alone and plain arrays: the starts
    jittered around the initial point its metadata holds, the adaptation state from its
    metadata; the same run in calls that resume one another gives the same draws."""
    import json

    model = eight_schools()
    path = tmp_path / "sampler.onnx"
    export_sampler(model, path, chains=8, tune=150)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    slots = read_layout(proto)
    assert slots == layout(model)
    meta = next(json.loads(e.value) for e in proto.metadata_props if e.key.endswith("sampler"))
    assert (meta["chains"], meta["tune"]) == (8, 150)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == list(RUN_INPUTS) == meta["inputs"]
    posterior = ["posterior.mu", "posterior.tau", "posterior.offset", "posterior.theta"]
    assert [o.name for o in session.get_outputs()] == list(RUN_OUTPUTS) + posterior
    assert [v["output"] for v in meta["posterior"]] == posterior
    assert meta["posterior"][3]["dims"] == ["school"]
    rng = np.random.default_rng(0)
    start = np.array(meta["initial_point"])
    feed = {
        "position": start + rng.uniform(-1, 1, (8, start.size)),
        "state": np.array(meta["initial_state"]),
        "start": np.array(0, dtype=np.int64),
        "transitions": np.array(190, dtype=np.int64),
        "target_accept": np.array(0.8),
        "rng": state_from_generator(rng),
    }
    whole = _run(session, feed)
    assert whole["positions"].shape == (190, 8, start.size)
    assert whole["n_steps"].shape == (190,) and (whole["n_steps"] >= 1).all()
    assert whole["step_size"].shape == (190,) and (whole["step_size"] > 0).all()
    assert whole["diverging"].dtype == bool
    # After warm-up the step size and the mass matrix are fixed; the state says what they are.
    assert np.unique(whole["step_size"][150:]).size == 1
    state = whole["state_updated"]
    a, b = meta["state"]["step_size"]
    assert state[a:b] == whole["step_size"][-1]
    a, b = meta["state"]["inv_mass"]
    assert (state[a:b] > 0).all() and not np.allclose(state[a:b], 1)
    logp = model.compile_logp()
    for row, value in zip(whole["positions"][-1], whole["logp"][-1], strict=True):
        point = {s.name: row[s.start : s.stop].reshape(s.shape) for s in slots}
        np.testing.assert_allclose(value, logp(point), rtol=1e-12)
    # The constrained draws: tau = exp(its log), theta = mu + tau * offset.
    tau = np.exp(whole["positions"][..., 1])
    np.testing.assert_allclose(whole["posterior.tau"], tau, rtol=1e-14)
    theta = whole["posterior.mu"][..., None] + tau[..., None] * whole["posterior.offset"]
    np.testing.assert_allclose(whole["posterior.theta"], theta, rtol=1e-12)
    assert not np.array_equal(whole["rng_updated"], feed["rng"])
    # The same run in three calls, the second across the end of the warm-up; no transition
    # changes nothing.
    parts, changes = [], {}
    for begin, size in ((0, 100), (100, 0), (100, 60), (160, 30)):
        part = _run(session, feed, start=np.array(begin), transitions=np.array(size), **changes)
        if size == 0:
            np.testing.assert_array_equal(part["state_updated"], changes["state"])
            np.testing.assert_array_equal(part["rng_updated"], changes["rng"])
            assert part["positions"].shape == (0, 8, start.size)
            continue
        parts.append(part)
        changes = {
            "position": part["positions"][-1],
            "state": part["state_updated"],
            "rng": part["rng_updated"],
        }
    for name in ("positions", "logp", "n_steps", "step_size", "posterior.theta"):
        resumed = np.concatenate([part[name] for part in parts])
        np.testing.assert_array_equal(resumed, whole[name], err_msg=name)
    np.testing.assert_array_equal(parts[-1]["state_updated"], whole["state_updated"])


def test_bad_input_is_refused_before_any_work():
    with pm.Model() as discrete:
        pm.Poisson("k", 3.0)
    with pytest.raises(ValueError, match="discrete free variables \\['k'\\].*pm.sample"):
        sample(discrete)
    model = eight_schools()
    with pytest.raises(TypeError, match="random_seed must be an int or None, not str"):
        sample(model, random_seed="7")
    for draws in (0, -1, 2.5):
        with pytest.raises(ValueError, match="draws must be an integer >= 1"):
            sample(model, draws=draws)
    with pytest.raises(ValueError, match="target_accept must be in \\(0, 1\\)"):
        sample(model, target_accept=1.2)
    with pytest.raises(ValueError, match="chains must be an integer >= 1"):
        sample(model, chains=0)


def test_a_trajectory_that_leaves_the_support_diverges_without_error():
    """A step size far too large drives the logistic regression's probabilities to NaN
    inside the leapfrog Loop: PyMC's parameter checks give -inf there (as its samplers see
    them), the transition reports divergences and keeps the chains where they were (the
    check raised from inside the Loop)."""
    model = logistic_regression()
    transition = export_onnx(transition_function(model, 4), output_names=list(OUTPUTS[:-1]))
    session = ort.InferenceSession(transition.SerializeToString())
    start = ravel_point(model.initial_point(), layout(model))
    position = np.tile(start, (4, 1))
    feed = {
        "position": position,
        "step_size": np.array(1e4),
        "inv_mass": np.ones(start.size),
        "n_steps": np.array(3, dtype=np.int64),
        "rng": state_from_generator(np.random.default_rng(0)),
    }
    results = dict(zip(OUTPUTS, session.run(None, feed), strict=True))
    assert results["diverging"].all() and (results["accept_prob"] == 0).all()
    np.testing.assert_array_equal(results["next_position"], position)


def _loops(graph):
    """The Loop nodes of `graph` and of its subgraphs, outermost first."""
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                if node.op_type == "Loop":
                    yield node, attribute.g
                yield from _loops(attribute.g)


def test_a_leapfrog_step_is_the_density_and_the_step():
    """What each leapfrog step runs is the batched log-density, its gradient and the step's
    arithmetic: no runtime-broadcast or Join check (the carried gradient's dims come from
    the Scan's buffer, the gradient pieces' from their Reshapes), no fused output expanded
    to a shape it has; the warm-up's adaptation is an If the draws skip."""
    proto = export_sampler(eight_schools(), chains=4, tune=20)
    (_, transition), (_, leapfrog) = list(_loops(proto.graph))[:2]
    assert not [n.name for n in leapfrog.node if "check" in n.name]
    assert not [n for n in leapfrog.node if n.op_type in ("Expand", "Shape")]
    assert len(leapfrog.node) <= 85
    assert sum(n.op_type == "If" for n in transition.node) == 1
