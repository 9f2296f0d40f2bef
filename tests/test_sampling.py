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


@pytest.fixture(
    scope="module", params=[eight_schools, logistic_regression, robust_regression, hierarchical]
)
def sampled(request):
    model = request.param()
    ours = sample(model, draws=300, tune=500, chains=32, random_seed=3, progressbar=False)
    theirs = pm.sample(
        draws=1000, tune=1000, chains=4, random_seed=3, progressbar=False, model=model
    )
    return request.param.__name__, model, ours, theirs


def test_the_posterior_is_pm_samples(sampled):
    """Every posterior mean within 4 Monte Carlo standard errors of pm.sample's, every
    standard deviation within 10%, R-hat <= 1.01, bulk ESS >= 400, divergences no more
    than pm.sample's."""
    _, _, ours, theirs = sampled
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
        assert stats[stat].shape == (32, 300), stat
    assert ours.attrs["sampling_time"] > 0


def test_the_same_seed_gives_the_same_draws():
    model = eight_schools()
    runs = [
        sample(model, draws=20, tune=30, chains=4, random_seed=seed, progressbar=False)
        for seed in (5, 5, 6)
    ]
    first, again, other = (run.posterior["mu"].values for run in runs)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_the_exported_sampler_runs_without_pymc(tmp_path):
    """The whole run, warm-up included, in one ONNX Runtime call with plain arrays: the
    starts jittered around the initial point its metadata holds."""
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
    assert [o.name for o in session.get_outputs()] == list(RUN_OUTPUTS)
    rng = np.random.default_rng(0)
    start = np.array(meta["initial_point"])
    feed = {
        "position": start + rng.uniform(-1, 1, (8, start.size)),
        "draws": np.array(40, dtype=np.int64),
        "target_accept": np.array(0.8),
        "rng": state_from_generator(rng),
    }
    results = dict(zip(RUN_OUTPUTS, session.run(None, feed), strict=True))
    assert results["positions"].shape == (40, 8, start.size)
    assert results["n_steps"].shape == (40,) and (results["n_steps"] >= 1).all()
    assert results["step_size"] > 0 and results["inv_mass"].shape == (start.size,)
    assert results["diverging"].dtype == bool
    logp = model.compile_logp()
    for row, value in zip(results["positions"][-1], results["logp"][-1], strict=True):
        point = {s.name: row[s.start : s.stop].reshape(s.shape) for s in slots}
        np.testing.assert_allclose(value, logp(point), rtol=1e-12)
    assert not np.array_equal(results["rng_updated"], feed["rng"])


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
