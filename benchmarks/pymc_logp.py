"""A PyMC model's log-density and gradient, side by side in one run: PyMC's own backends
(PyTensor's default mode and Numba), PyMC with mode "ONNX", the file `export_logp` writes in
a raw ONNX Runtime session, the batched file (`export_logp(batch=True)`) on 64 and 512
points per call (its time per point), and, as the floor of any ONNX Runtime call, a session
running a one-node model on the same point. Then the exported models' nodes.

Models: notebook 03's (a Student-t regression with 8 group offsets: its logp calls gammaln,
its gradient digamma), a hierarchical normal model with 1,000 group means over 5,000
observations, a beta-binomial of 40 counts and a negative-binomial regression of 500 (their
logps call gammaln on arrays, their gradients digamma), and a GP's marginal likelihood on 50
points (a Cholesky and triangular solves).

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/pymc_logp.py   (needs the `pymc` extra)
"""

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import collections

import numpy as np
import onnx
import pymc as pm

from pt_onnxscript import onnx_mode
from pt_onnxscript.pymc_model import export_logp, layout, ravel_point


def student_t_model():
    rng = np.random.default_rng(0)
    group = rng.integers(0, 8, 200)
    y = rng.normal(size=200) + group / 4
    with pm.Model() as model:
        mu = pm.Normal("mu")
        tau = pm.HalfNormal("tau", 1)
        offset = pm.Normal("offset", 0, 1, shape=8)
        nu = pm.Gamma("nu", 2, 0.1)
        pm.StudentT("y", nu=nu, mu=mu + tau * offset[group], sigma=1, observed=y)
    return model


def hierarchical_normal_model():
    rng = np.random.default_rng(1)
    group = rng.integers(0, 1000, 5000)
    y = rng.normal(size=5000) + group / 500
    with pm.Model() as model:
        mu = pm.Normal("mu")
        tau = pm.HalfNormal("tau", 1)
        theta = pm.Normal("theta", mu, tau, shape=1000)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", theta[group], sigma, observed=y)
    return model


def beta_binomial_model():
    rng = np.random.default_rng(2)
    n = rng.integers(10, 50, 40)
    with pm.Model() as model:
        a = pm.Gamma("a", 2, 0.5)
        b = pm.Gamma("b", 2, 0.5)
        pm.BetaBinomial("y", alpha=a, beta=b, n=n, observed=rng.binomial(n, 0.3))
    return model


def negative_binomial_model():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(500, 5))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=5)
        intercept = pm.Normal("intercept")
        alpha = pm.Exponential("alpha", 1)
        mu = pm.math.exp(intercept + x @ beta)
        pm.NegativeBinomial("y", mu=mu, alpha=alpha, observed=rng.poisson(3, 500))
    return model


def gp_model():
    rng = np.random.default_rng(4)
    x = np.sort(rng.uniform(0, 10, 50))[:, None]
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2, 1)
        eta = pm.HalfNormal("eta", 1)
        sigma = pm.HalfNormal("sigma", 1)
        gp = pm.gp.Marginal(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls))
        gp.marginal_likelihood("y", X=x, y=np.sin(x[:, 0]) + rng.normal(0, 0.1, 50), sigma=sigma)
    return model


def floor_model(size):
    """One Identity on a float64 vector: what any ONNX Runtime call costs."""
    point = onnx.helper.make_tensor_value_info("point", onnx.TensorProto.DOUBLE, [size])
    out = onnx.helper.make_tensor_value_info("out", onnx.TensorProto.DOUBLE, [size])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["point"], ["out"])], "floor", [point], [out]
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


BATCHES = (64, 512)


def runners_for(model):
    """The runners of `model`'s table, each a function of the point, and the number of
    points each call of it evaluates."""
    point = ravel_point(model.initial_point(), layout(model))
    proto = export_logp(model)
    exported = session(proto)
    batched_proto = export_logp(model, batch=True)
    batched = session(batched_proto)
    floor = session(floor_model(point.size))
    rng = np.random.default_rng(0)
    # Points around the initial one, each row its own (the first the initial point).
    many = point + rng.normal(scale=0.1, size=(max(BATCHES), point.size))
    many[0] = point

    def pymc(mode=None):
        fn = model.logp_dlogp_function(ravel_inputs=True, **({"mode": mode} if mode else {}))
        fn.set_extra_values({})
        return fn

    runners = {
        "PyMC default mode": pymc(),
        "PyMC NUMBA mode": pymc("NUMBA"),
        'PyMC mode "ONNX"': pymc(onnx_mode(threads=1)),
        "exported, ONNX Runtime": lambda v: exported.run(None, {"point": v}),
        **{
            f"batched, {k} per call": lambda v, k=k: batched.run(None, {"points": many[:k]})
            for k in BATCHES
        },
        "1-node ORT call (floor)": lambda v: floor.run(None, {"point": v}),
    }
    points_per_call = {f"batched, {k} per call": k for k in BATCHES}
    logp, dlogp = runners["PyMC default mode"](point)
    for name in ("PyMC NUMBA mode", 'PyMC mode "ONNX"', "exported, ONNX Runtime"):
        other_logp, other_dlogp = runners[name](point)
        np.testing.assert_allclose(other_logp, logp, rtol=1e-9)
        # PyTensor's C digamma is accurate to about 4e-9 only (docs/pymc.md).
        np.testing.assert_allclose(other_dlogp, dlogp, rtol=1e-7, atol=1e-12)
    # Each row of the batched model is the one-point model's result for that row.
    rows_logp, rows_dlogp = batched.run(None, {"points": many[:8]})
    for row, (row_logp, row_dlogp) in zip(many[:8], zip(rows_logp, rows_dlogp), strict=True):
        one_logp, one_dlogp = exported.run(None, {"point": row})
        np.testing.assert_allclose(row_logp, one_logp, rtol=1e-13)
        np.testing.assert_allclose(row_dlogp, one_dlogp, rtol=1e-12, atol=1e-13)
    return runners, points_per_call, point, (proto, batched_proto)


def main():
    tables = {}
    for label, build in (
        ("Student-t (notebook 03)", student_t_model),
        ("hierarchical normal, 1,000 means", hierarchical_normal_model),
        ("beta-binomial, 40 counts", beta_binomial_model),
        ("negative-binomial regression, 500 counts", negative_binomial_model),
        ("GP marginal likelihood, 50 points", gp_model),
    ):
        runners, points_per_call, point, protos = runners_for(build())
        tables[label] = interleaved(runners, point), points_per_call, protos
    for label, (results, points_per_call, protos) in tables.items():
        base = results["PyMC default mode"][0]
        print(f"\n{label}: logp and gradient, 1 core, median of {ROUNDS} rounds, per point")
        print(f"{'':26}{'wall':>10}{'cpu':>10}   vs PyMC default (wall)")
        for name, (wall, cpu) in results.items():
            k = points_per_call.get(name, 1)
            print(
                f"{name:26}{wall / k * 1e6:>8.2f}us{cpu / k * 1e6:>8.2f}us"
                f"   {wall / k / base:>6.2f}x"
            )
        for kind, proto in zip(("exported", "batched"), protos, strict=True):
            counts = collections.Counter(node.op_type for node in proto.graph.node)
            top = ", ".join(f"{op} {n}" for op, n in counts.most_common(6))
            print(f"{kind} model: {len(proto.graph.node)} nodes ({top}, ...)")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
