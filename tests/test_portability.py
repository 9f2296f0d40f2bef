"""The portability matrix: exported models run in ONNX Runtime, ONNX's reference evaluator
and onnxruntime-web (its WebAssembly backend, under Node), with results equal to ONNX
Runtime's within each dtype's precision (`pt_onnxscript.runtimes`).

onnxruntime-web needs node and the demo's npm package (``npm ci`` in
pt_onnxscript/demos/web): without them its column skips, unless
PT_ONNXSCRIPT_REQUIRE_BROWSER is set (CI sets it)."""

import json
import os

import numpy as np
import onnx
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.ifelse import ifelse

from pt_onnxscript import export_onnx, runtimes
from pt_onnxscript.demos import digits

RTOL = {"float64": 1e-10, "float32": 1e-5}


def mlp():
    rng = np.random.default_rng(0)
    w1, w2 = rng.normal(size=(4, 16)), rng.normal(size=(16, 3))
    x = pt.tensor("x", dtype="float32", shape=(None, 4))
    hidden = pt.tanh(x @ w1.astype("float32") + np.float32(0.1))
    probs = pt.special.softmax(hidden @ w2.astype("float32"), axis=-1)
    feeds = {"x": rng.normal(size=(5, 4)).astype("float32")}
    return ([x], [probs]), feeds


def _cnn(dtype: str):
    params = digits.init_params()
    if dtype != "float32":
        params = {
            k: pytensor.shared(p.get_value().astype(dtype), name=k, shape=p.type.shape)
            for k, p in params.items()
        }
    x = pt.tensor4("x", dtype=dtype, shape=(None, 1, 8, 8))
    images = np.random.default_rng(1).uniform(size=(3, 1, 8, 8)).astype(dtype)
    return ([x], [digits.forward(x, params)]), {"x": images}


def cnn_float32():
    return _cnn("float32")


def cnn_float64():
    return _cnn("float64")


def scan_float64():
    seq = pt.dvector("seq")
    decay = pt.dscalar("decay")
    values, _ = pytensor.scan(
        lambda s, previous: decay * previous + pt.sin(s),
        sequences=[seq],
        outputs_info=[pt.zeros(())],
    )
    # 23 steps: the Loop unrolled by 16 runs once, after a Loop of the 7 left (of a length
    # under 16 it would run no iteration, which onnx.reference fails: see below).
    feeds = {"seq": np.linspace(-3, 3, 23), "decay": np.array(0.7)}
    return ([seq, decay], [values, pt.special.gammaln(values + 3).sum()]), feeds


def if_else():
    x = pt.dvector("x")
    flag = pt.bscalar("flag")
    out = ifelse(pt.eq(flag, 1), pt.exp(x).sum(), pt.log1p(x**2).sum())
    return ([x, flag], [out]), {"x": np.linspace(0, 2, 5), "flag": np.array(1, "int8")}


def random_draws():
    rng = pytensor.shared(np.random.default_rng(3), name="rng")
    loc = pt.dvector("loc")
    next_rng, draws = pt.random.normal(loc, 2.0, rng=rng).owner.outputs
    fn = pytensor.function([loc], draws, updates={rng: next_rng})
    # The generator's state is an input (a uint64[2]); its advanced state an output.
    return fn, {"loc": np.arange(6.0), "rng": np.array([12345, 0], dtype=np.uint64)}


def pymc_logp(batch):
    pytest.importorskip("pymc")
    from pt_onnxscript.demos.sampler import eight_schools
    from pt_onnxscript.pymc_model import export_logp, layout

    model = eight_schools()
    n = layout(model)[-1].stop
    proto = export_logp(model, batch=batch)
    points = np.random.default_rng(4).normal(size=(batch or 1, n))
    return proto, {"points": points} if batch else {"point": points[0]}


def sampler():
    pytest.importorskip("pymc")
    from pt_onnxscript.demos.sampler import eight_schools, starting_feed
    from pt_onnxscript.pymc_model import export_sampler

    proto = export_sampler(eight_schools(), chains=4, tune=3)
    meta = next(json.loads(e.value) for e in proto.metadata_props if e.key.endswith(".sampler"))
    meta["chains"] = 4
    feeds = starting_feed(meta, seed=7) | {
        "start": np.array(0, dtype=np.int64),
        "transitions": np.array(5, dtype=np.int64),
        "target_accept": np.array(0.8),
    }
    return proto, feeds


MODELS = {
    "mlp float32": mlp,
    "digits CNN float32": cnn_float32,
    "digits CNN float64": cnn_float64,
    "Scan float64": scan_float64,
    "IfElse": if_else,
    "random draws": random_draws,
    "PyMC logp+dlogp": lambda: pymc_logp(False),
    "PyMC logp+dlogp, 8 points per call": lambda: pymc_logp(8),
    "PyMC sampler, 5 transitions": sampler,
}


@pytest.fixture(scope="module")
def exported():
    """Each model of MODELS exported once, with its feeds and ONNX Runtime's results."""
    cache = {}

    def get(name):
        if name not in cache:
            source, feeds = MODELS[name]()
            proto = source if isinstance(source, onnx.ModelProto) else export_onnx(source)
            cache[name] = proto, feeds, runtimes.run_onnxruntime(proto, feeds)
        return cache[name]

    return get


def assert_same(got: dict, want: dict, runtime: str):
    assert list(got) == list(want), (runtime, list(got))
    for name, value in want.items():
        result = got[name]
        assert result.dtype == value.dtype and result.shape == value.shape, (runtime, name)
        if value.dtype.kind == "f":
            np.testing.assert_allclose(
                result, value, rtol=RTOL[value.dtype.name], atol=0, err_msg=f"{runtime}: {name}"
            )
        else:
            np.testing.assert_array_equal(result, value, err_msg=f"{runtime}: {name}")


# onnx 1.23's reference Loop stacks its scan outputs with np.vstack: a 0-d value per
# iteration (a transition's step count) comes out (n, 1), not (n,).
VSTACK = "onnx.reference stacks a Loop's 0-d scan outputs as (n, 1) (np.vstack)"
REFERENCE_FAILS = {"PyMC sampler, 5 transitions": VSTACK}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=[pytest.mark.xfail(raises=runtimes.RuntimeFailed, strict=True, reason=why)]
            if (why := REFERENCE_FAILS.get(name))
            else [],
        )
        for name in MODELS
    ],
)
def test_reference_evaluator_agrees_with_onnxruntime(exported, name):
    proto, feeds, want = exported(name)
    assert_same(runtimes.run_reference(proto, feeds), want, "onnx.reference")


@pytest.mark.xfail(
    raises=runtimes.RuntimeFailed,
    strict=True,
    reason="onnx 1.23's reference Loop cannot give the scan outputs of a Loop that runs no "
    "iteration (np.vstack of nothing); ONNX Runtime gives them empty",
)
def test_reference_evaluator_fails_a_loop_of_no_iteration():
    """A Scan shorter than 16 steps is a Loop of its steps and one unrolled by 16 that runs
    no iteration (`optimize.unroll_by_factor`): valid ONNX that the reference evaluator
    fails (the docs' portability table records it)."""
    source, _ = scan_float64()
    proto = export_onnx(source)
    runtimes.run_reference(proto, {"seq": np.linspace(-3, 3, 7), "decay": np.array(0.7)})


@pytest.fixture(scope="module")
def web_results(exported):
    """Every model of the matrix run by onnxruntime-web in one Node process (by name; an
    exception where it failed)."""
    if not runtimes.web_available():
        message = "onnxruntime-web under Node: " + (runtimes._web_missing() or "")
        if os.environ.get("PT_ONNXSCRIPT_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    results = {}
    for name in MODELS:
        try:
            proto, feeds, _ = exported(name)
        except pytest.skip.Exception:
            continue
        try:
            results[name] = runtimes.run_onnxruntime_web([(proto, feeds)])[0]
        except runtimes.RuntimeFailed as err:
            results[name] = err
    return results


@pytest.mark.parametrize("name", MODELS)
def test_onnxruntime_web_under_node_agrees_with_onnxruntime(exported, web_results, name):
    want = exported(name)[2]
    got = web_results[name]
    if isinstance(got, Exception):
        raise got
    assert_same(got, want, "onnxruntime-web")


def checked_float32():
    """A float32 graph with a runtime check: x + y of two vectors of unknown length
    (PyTensor refuses runtime broadcasting; the check is a Gather that fails)."""
    x, y = pt.vector("x", dtype="float32"), pt.vector("y", dtype="float32")
    feeds = {"x": np.linspace(0, 1, 4, dtype="float32"), "y": np.ones(4, "float32")}
    return ([x, y], [pt.exp(x) + y]), feeds


# The float32 models, for the runtimes without float64 (OpenVINO's CPU plugin) or tested on
# float32 only (tract).
FLOAT32 = {
    "mlp float32": mlp,
    "digits CNN float32": cnn_float32,
    "a runtime check": checked_float32,
}
# OpenVINO 2026.4.1's ONNX front end fails to convert the runtime check's Gather (from a
# (1, 0) constant): "While validating ONNX node ... vector::_M_default_append".
OPENVINO_FAILS = {
    "a runtime check": "OpenVINO cannot convert the check's Gather of a (1, 0) constant"
}


def _optional(runtime: str):
    """Skip (or, in CI, fail) where `runtime` is not installed."""
    module = {"openvino": "openvino", "tract": "tract"}[runtime]
    try:
        __import__(module)
    except ImportError:
        message = f"{runtime} is not installed (pip install pt_onnxscript[runtimes])"
        if os.environ.get("PT_ONNXSCRIPT_REQUIRE_RUNTIMES"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize(
    "runtime, name",
    [
        pytest.param(
            runtime,
            name,
            marks=[pytest.mark.xfail(raises=runtimes.RuntimeFailed, strict=True, reason=why)]
            if runtime == "openvino" and (why := OPENVINO_FAILS.get(name))
            else [],
        )
        for runtime in ("openvino", "tract")
        for name in FLOAT32
    ],
)
def test_float32_models_in_openvino_and_tract(runtime, name):
    _optional(runtime)
    source, feeds = FLOAT32[name]()
    proto = source if isinstance(source, onnx.ModelProto) else export_onnx(source)
    assert_same(
        runtimes.run(runtime, proto, feeds), runtimes.run_onnxruntime(proto, feeds), runtime
    )


def test_a_0d_feed_stays_0d_for_onnxruntime_web():
    """A 0-d feed is sent with no dims (onnxruntime-web takes a (1,) tensor for a scalar input
    without complaint and then fails inside a Loop)."""
    encoded = runtimes._encoded(np.array(0.7))
    assert encoded["dims"] == []
    np.testing.assert_array_equal(runtimes._decoded(encoded), np.array(0.7))
    matrix = np.arange(6, dtype="int64").reshape(2, 3).T  # not C-contiguous
    np.testing.assert_array_equal(runtimes._decoded(runtimes._encoded(matrix)), matrix)


def test_a_runtime_that_is_missing_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(runtimes, "WEB_DIR", str(tmp_path))
    with pytest.raises(runtimes.RuntimeUnavailable, match="npm ci"):
        runtimes.run("onnxruntime-web", "model.onnx", {})
    with pytest.raises(ValueError, match="one of onnxruntime, onnx.reference"):
        runtimes.run("tvm", "model.onnx", {})
