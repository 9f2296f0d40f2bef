"""PyMC models' log-densities and gradients through mode "ONNX" and export_logp."""

import numpy as np
import onnx
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.stats as st
from pytensor.compile.mode import Mode
from scipy.stats import ks_2samp, kstest

pm = pytest.importorskip("pymc")

from pt_onnxscript import UnsupportedOpError
from pt_onnxscript.pymc_model import (
    export_logp,
    export_posterior_predictive,
    export_prior_predictive,
    initial_states,
    layout,
    posterior_layout,
    posterior_points,
    ravel_point,
    read_layout,
)
from pt_onnxscript.testing import assert_same

# Reference: PyTensor's own rewrites with its Python linker (same math as the default mode),
# without fusing elementwise Ops into Composites: the Python implementation of a Composite runs
# its scalar Ops on Python floats, and PyTensor's reciprocal of a Python float is a float32
# (np.float32(1.0) / x under NumPy 2), 4e-8 off in PyMC's Exponential log-density.
REFERENCE = Mode(linker="py", optimizer="fast_run").excluding("fusion")
rng = np.random.default_rng(2026)


def glm():
    X = rng.normal(size=(30, 3))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=3)
        sigma = pm.HalfNormal("sigma", 1)
        pm.Normal("y", X @ beta, sigma, observed=X @ [1.0, -2.0, 0.5] + rng.normal(size=30))
    return model


def hierarchical():
    group = rng.integers(0, 4, 40)
    with pm.Model() as model:
        mu = pm.Normal("mu")
        tau = pm.HalfCauchy("tau", 1)
        offset = pm.Normal("offset", 0, 1, shape=4)
        pm.StudentT("y", nu=4, mu=mu + tau * offset[group], sigma=1, observed=rng.normal(size=40))
    return model


def counts():
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2, 1)
        p = pm.Beta("p", 2, 2)
        pm.Poisson("y", lam, observed=[1, 2, 0, 4])
        pm.NegativeBinomial("z", mu=lam, alpha=p + 1, observed=[0, 3, 5])
        pm.ZeroInflatedPoisson("w", psi=p, mu=lam, observed=[0, 0, 1, 3])
    return model


def mixture():
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal("mu", [-1, 1], 1, shape=2)
        pm.NormalMixture("y", w=w, mu=mu, sigma=1, observed=rng.normal(size=20))
    return model


def censored_truncated():
    with pm.Model() as model:
        mu = pm.Normal("mu")
        observed = np.clip(rng.normal(size=20), -1, 1)
        pm.Censored("y", pm.Normal.dist(mu, 1), lower=-1, upper=1, observed=observed)
        pm.Truncated("t", pm.Normal.dist(mu, 1), lower=0, observed=np.abs(rng.normal(size=10)))
    return model


def ordinal_with_potential():
    with pm.Model() as model:
        cut = pm.Normal(
            "cut",
            [-1, 0, 1],
            1,
            shape=3,
            transform=pm.distributions.transforms.ordered,
            initval=[-1.0, 0.0, 1.0],
        )
        eta = pm.Normal("eta")
        pm.OrderedLogistic("y", eta=eta, cutpoints=cut, observed=[0, 1, 3, 2, 2])
        pm.Potential("shrink", -(eta**2))
    return model


def gaussian_process():
    x = np.linspace(0, 5, 12)[:, None]
    with pm.Model() as model:
        ls = pm.Gamma("ls", 2, 1)
        eta = pm.HalfNormal("eta", 1)
        gp = pm.gp.Marginal(cov_func=eta**2 * pm.gp.cov.ExpQuad(1, ls))
        gp.marginal_likelihood("y", X=x, y=np.sin(x[:, 0]) + 0.1 * rng.normal(size=12), sigma=0.2)
    return model


def survival():
    times = rng.gamma(3, 1, size=15)
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2, 1)
        beta = pm.HalfNormal("beta", 2)
        lam = pm.Gamma("lam", 3, 1)
        pm.Censored(
            "t", pm.Gamma.dist(alpha, beta), lower=None, upper=4, observed=times.clip(max=4)
        )
        pm.Censored("c", pm.Poisson.dist(lam), lower=1, upper=5, observed=[1, 1, 2, 5, 3, 5])
        pm.Truncated("k", pm.Poisson.dist(lam), upper=6, observed=[0, 2, 6, 3])
    return model


def bounded_outcomes():
    with pm.Model() as model:
        a = pm.Gamma("a", 2, 1)
        b = pm.Gamma("b", 2, 1)
        shares = np.clip(rng.beta(2, 3, size=12), 0.1, 0.9)
        pm.Censored("share", pm.Beta.dist(a, b), lower=0.1, upper=0.9, observed=shares)
        theta = pm.Beta("theta", 2, 2)
        pm.Censored(
            "k", pm.Binomial.dist(n=10, p=theta), lower=None, upper=7, observed=[3, 7, 5, 7, 2]
        )
        nu = pm.Gamma("nu", 3, 1)
        t = np.clip(rng.standard_t(4, size=10), -2, 2)
        pm.Censored("t", pm.StudentT.dist(nu=nu, mu=0, sigma=1), lower=-2, upper=2, observed=t)
    return model


def circular_and_rice():
    with pm.Model() as model:
        mu = pm.VonMises("mu", mu=0, kappa=1)
        kappa = pm.Gamma("kappa", 2, 1)
        pm.VonMises("angle", mu=mu, kappa=kappa, observed=rng.vonmises(0.5, 2, size=10))
        nu = pm.HalfNormal("nu", 2)
        pm.Rice("r", nu=nu, sigma=1, observed=rng.rayleigh(1.5, size=10))
    return model


def correlations():
    """LKJCorr and a free Wishart, whose log-densities check that a matrix is positive definite
    (PyMC's PosDefMatrix Op; the Wishart's is -inf at the random points below, which make its
    value asymmetric), and pm.math's logdet and batched_diag, PyMC's own Ops too."""
    with pm.Model() as model:
        pm.LKJCorr("corr", n=3, eta=2.0)
        # initval: its mean (a Wishart has no support point)
        w = pm.Wishart("w", nu=5, V=WISHART_SCALE, initval=5 * WISHART_SCALE)
        sd = pm.HalfNormal("sd", 1.0, shape=3)
        scales = pm.math.batched_diag(pt.stack([sd, 2 * sd]))
        pm.Potential("p", -0.1 * pm.math.logdet(w) - 0.5 * (scales**2).sum())
    return model


def interpolated():
    """Interpolated, free and observed: its density is a SciPy spline (PyMC's SplineWrapper Op),
    its gradient the spline's derivative, a spline of degree 0."""
    grid = np.linspace(-3, 3, 50)
    with pm.Model() as model:
        pm.Interpolated("z", grid, np.exp(-(grid**2) / 2) * (1 + 0.3 * np.sin(3 * grid)))
        mu = pm.Normal("mu")
        pm.Interpolated("y", grid, np.exp(-(grid**2) / 2) + 0.1, observed=[-2.0, 0.1, 1.7, 2.9])
        pm.Normal("w", mu, 1, observed=[0.3, -0.2])
    return model


def waiting_times():
    """An Exponential likelihood: PyTensor 2.38 fuses its log-density into -log(1 / lam),
    which a reference fusing Elemwise Ops evaluated 4e-8 off (see REFERENCE)."""
    with pm.Model() as model:
        lam = pm.HalfNormal("lam", 1)
        pm.Exponential("y", lam, observed=np.random.default_rng(7).gamma(2, 1, size=10))
    return model


def areal():
    """A CAR prior on a graph's nodes whose adjacency W is a SciPy sparse matrix, as PyMC
    documents it: its log-density multiplies by W with pytensor.sparse's Dot of a constant."""
    import scipy.sparse as sps

    W = np.zeros((8, 8))
    W[np.arange(7), np.arange(1, 8)] = W[np.arange(1, 8), np.arange(7)] = 1
    W[0, 5] = W[5, 0] = W[2, 7] = W[7, 2] = 1
    with pm.Model() as model:
        alpha = pm.Uniform("alpha", 0, 1)
        tau = pm.Gamma("tau", 2, 2)
        phi = pm.CAR("phi", mu=np.zeros(8), W=sps.csr_matrix(W), alpha=alpha, tau=tau)
        pm.Poisson("y", pm.math.exp(phi), observed=[0, 2, 1, 4, 3, 0, 1, 2])
    return model


MODELS = [
    glm,
    hierarchical,
    counts,
    mixture,
    censored_truncated,
    ordinal_with_potential,
    gaussian_process,
    survival,
    bounded_outcomes,
    circular_and_rice,
    correlations,
    interpolated,
    waiting_times,
    areal,
]

# PyTensor's gammainc/gammaincc gradients are series that stop once a term drops below 1e-10
# (pytensor/scalar/math.py, gammainc_grad) or 1e-6 (gammaincc_grad's log_precision): a 1-ulp
# difference upstream can move the stopping step, and PyTensor's C and Python backends already
# disagree by ~2e-10 on these gradients.
DLOGP_RTOL = {"survival": 1e-8}


def points(model, n=3):
    """The initial point and n random points around it."""
    start = model.initial_point()
    yield start
    for _ in range(n):
        yield {k: v + rng.normal(scale=0.5, size=np.shape(v)) for k, v in start.items()}


@pytest.fixture(scope="module", params=MODELS, ids=lambda f: f.__name__)
def built(request):
    """A model, its name, and its logp and dlogp in the reference mode: both tests of a model
    compare with the same compiled references."""
    model = request.param()
    reference = model.compile_logp(mode=REFERENCE), model.compile_dlogp(mode=REFERENCE)
    return request.param.__name__, model, reference


def test_logp_and_dlogp_in_mode_onnx(built):
    name, model, reference = built
    ours = model.compile_logp(mode="ONNX"), model.compile_dlogp(mode="ONNX")
    rtols = {"logp": 1e-11, "dlogp": DLOGP_RTOL.get(name, 1e-11)}
    for point in points(model):
        for onnx_fn, ref_fn, what in zip(ours, reference, rtols, strict=True):
            assert_same(onnx_fn(point), ref_fn(point), rtol=rtols[what], atol=1e-11, what=what)


def test_exported_logp_runs_without_pymc(built, tmp_path):
    name, model, (logp, dlogp) = built
    path = tmp_path / "logp.onnx"
    export_logp(model, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    slots = read_layout(onnx.load(str(path)))
    assert slots == layout(model)
    for point in points(model, 2):
        got = session.run(["logp", "dlogp"], {"point": ravel_point(point, slots)})
        assert_same(got[0], logp(point), rtol=1e-11, atol=1e-11, what="logp")
        rtol = DLOGP_RTOL.get(name, 1e-11)
        assert_same(got[1], dlogp(point), rtol=rtol, atol=1e-11, what="dlogp")


# Models PyTensor's vectorize_graph refuses (its Vectorized AdvancedSubtensor of batched
# indexes: LKJCorr's; its sparse Dot of a dense matrix: CAR's).
UNVECTORIZED = {"correlations": "NotImplementedError", "areal": "TypeError"}


def test_batched_logp_gives_each_row_the_one_point_models_result(built, tmp_path):
    name, model, _ = built
    if name in UNVECTORIZED:
        with pytest.raises(UnsupportedOpError, match=f"cannot vectorize.*{UNVECTORIZED[name]}"):
            export_logp(model, batch=True)
        return
    path = tmp_path / "batched.onnx"
    proto = export_logp(model, path, batch=True)
    onnx.checker.check_model(str(path), full_check=True)
    one = ort.InferenceSession(export_logp(model).SerializeToString())
    many = ort.InferenceSession(str(path))
    size = layout(model)[-1].stop
    [spec] = many.get_inputs()
    assert spec.name == "points" and spec.shape == ["points", size]
    assert read_layout(proto) == layout(model)
    rows = np.stack([ravel_point(point, layout(model)) for point in points(model, 4)])
    for batch in (rows, rows[:1], rows[:0]):
        logp, dlogp = many.run(["logp", "dlogp"], {"points": batch})
        assert logp.shape == (len(batch),) and dlogp.shape == (len(batch), size)
        for row, row_logp, row_dlogp in zip(batch, logp, dlogp, strict=True):
            one_logp, one_dlogp = one.run(["logp", "dlogp"], {"point": row})
            # The same arithmetic but for the order of some sums (over the batch's rows).
            assert_same(row_logp, one_logp, rtol=1e-13, atol=1e-13, what="logp")
            assert_same(row_dlogp, one_dlogp, rtol=1e-12, atol=1e-12, what="dlogp")


def test_batched_logp_of_a_fixed_number_of_points():
    model = glm()
    proto = export_logp(model, batch=3)
    size = layout(model)[-1].stop
    session = ort.InferenceSession(proto.SerializeToString())
    assert session.get_inputs()[0].shape == [3, size]
    rows = np.stack([ravel_point(point, layout(model)) for point in points(model, 2)])
    logp, dlogp = session.run(["logp", "dlogp"], {"points": rows})
    one = ort.InferenceSession(export_logp(model).SerializeToString())
    for row, row_logp, row_dlogp in zip(rows, logp, dlogp, strict=True):
        one_logp, one_dlogp = one.run(["logp", "dlogp"], {"point": row})
        assert_same(row_logp, one_logp, rtol=1e-13, atol=1e-13)
        assert_same(row_dlogp, one_dlogp, rtol=1e-12, atol=1e-12)
    for bad in (0, -2, 1.5, "64", None):
        with pytest.raises(ValueError, match="batch must be False.*True.*>= 1"):
            export_logp(model, batch=bad)


def test_the_exported_graph_computes_nothing_twice(built):
    """No two nodes of a PyMC log-density and gradient built apart (model.logp() and
    model.dlogp(), as export_logp built them before) and rewritten for export apply one Op
    to the same inputs. PyTensor's merge compares a new node only with nodes it has found
    distinct, so a copy made while a merge waits was never merged: the GP kept a third
    Cholesky."""
    import collections

    from pymc.pytensorf import join_nonshared_inputs

    from pt_onnxscript.export import compile_for_export

    _, model, _ = built
    outputs, point = join_nonshared_inputs(
        model.initial_point(), [model.logp(), model.dlogp()], model.value_vars
    )
    nodes = compile_for_export([point], outputs).maker.fgraph.apply_nodes
    computed = collections.Counter((node.op, tuple(node.inputs)) for node in nodes)
    assert [key for key, count in computed.items() if count > 1] == []


def test_a_gp_factors_its_covariance_once():
    """The GP's log-density reads its scale as exp(eta)[None, None], its gradient as
    exp(eta[None, None]): the covariance and its Cholesky were built and factored twice
    (as in PyTensor's own modes) until the rewrites saw one value in both orders."""
    from pt_onnxscript.pymc_model import logp_and_gradient

    choleskys = [
        node
        for node in logp_and_gradient(gaussian_process()).maker.fgraph.apply_nodes
        if type(getattr(node.op, "core_op", node.op)).__name__ == "Cholesky"
    ]
    assert len(choleskys) == 1


def test_an_ode_and_a_simulator_are_refused_with_the_way_out():
    from pymc.ode import DifferentialEquation

    ode = DifferentialEquation(
        func=lambda y, t, p: [-p[0] * y[0]], times=[1.0, 2.0], n_states=1, n_theta=1, t0=0
    )
    with pm.Model() as model:
        k = pm.HalfNormal("k", 1)
        pm.Normal("y", ode(y0=[1.0], theta=[k])[:, 0], 0.1, observed=[0.6, 0.4])
        pm.Simulator(
            "s", lambda rng, a, size=None: rng.normal(a, 1, size), params=(k,), observed=[0.0]
        )
    with pytest.raises(UnsupportedOpError) as info:
        model.compile_logp(mode="ONNX")
    message = str(info.value)
    assert "DifferentialEquation (it runs SciPy's odeint in Python" in message
    assert "(it draws by calling a Python function" in message


def test_a_sparse_design_matrix_in_pm_data_and_set_data():
    import pytensor.sparse as psp
    import scipy.sparse as sps

    design = sps.random(30, 4, density=0.3, format="csr", random_state=3)
    with pm.Model() as model:
        x = pm.Data("x", design)
        beta = pm.Normal("beta", 0, 1, shape=4)
        pm.Normal("y", psp.dot(x, beta[:, None])[:, 0], 1, observed=np.arange(30.0) / 10)
    ours = model.compile_logp(mode="ONNX"), model.compile_dlogp(mode="ONNX")
    reference = model.compile_logp(mode=REFERENCE), model.compile_dlogp(mode=REFERENCE)
    for new in [None, sps.random(30, 4, density=0.5, format="csr", random_state=4)]:
        if new is not None:
            pm.set_data({"x": new}, model=model)
        for point in points(model, 2):
            for fn, ref, what in zip(ours, reference, ["logp", "dlogp"], strict=True):
                assert_same(fn(point), ref(point), rtol=1e-14, atol=1e-14, what=what)


def test_against_the_default_mode_and_compile_fn():
    model = hierarchical()
    point = model.initial_point()
    assert_same(model.compile_logp(mode="ONNX")(point), model.compile_logp()(point))
    assert_same(
        model.compile_dlogp(mode="ONNX")(point),
        model.compile_dlogp()(point),
        rtol=1e-11,
        atol=1e-12,
    )
    with model:
        fn = pm.compile_fn(model.logp(sum=False), inputs=model.value_vars, mode="ONNX")
        ref = pm.compile_fn(model.logp(sum=False), inputs=model.value_vars, mode=REFERENCE)
    for got, expected in zip(fn(point), ref(point), strict=True):
        assert_same(got, expected)


def test_rational_quadratic_spectral_density_and_its_gradient():
    """An HSGP with a RatQuad kernel weighs its basis by the kernel's power spectral density,
    which calls kv (PyTensor's Kve), and by gamma at a zero frequency."""
    from pt_onnxscript.testing import compare_onnx_and_py

    alpha, ls = pt.dscalar("alpha"), pt.dscalar("ls")
    omega = pt.dmatrix("omega")
    psd = pm.gp.cov.RatQuad(1, alpha=alpha, ls=ls).power_spectral_density(omega)
    frequencies = np.linspace(0.0, 6.0, 13)[:, None]  # 0 takes gamma's branch
    compare_onnx_and_py(
        [alpha, ls, omega],
        psd,
        [np.array(2.5), np.array(0.7), frequencies],
        more_inputs=[[np.array(0.8), np.array(1.3), frequencies]],
        rtol=1e-12,
    )
    # The gradient at a zero frequency is NaN in PyTensor's Python linker (0 * inf in the
    # branch switch drops) and finite in its default mode and here: compared away from it.
    gradient = pt.grad(psd.sum(), ls)
    compare_onnx_and_py(
        [alpha, ls, omega], gradient, [np.array(2.5), np.array(0.7), frequencies[1:]], rtol=1e-12
    )


@pytest.mark.parametrize("check_bounds", [True, False])
def test_failed_parameter_checks_give_minus_inf_like_pymc(check_bounds):
    """A scale that goes negative, and a covariance that is not positive definite: PyMC's
    compiled log-density is -inf there (a sampler rejects the point), not an error; with
    check_bounds=False nothing is checked. The export gives what PyMC's own function does."""
    with pm.Model(check_bounds=check_bounds) as model:
        s = pm.Normal("s", 1, 1)
        rho = pm.Normal("rho", 0, 0.3)
        pm.Normal("y", 0, s, observed=[0.5, -0.3])
        cov = pt.stack([pt.stack([1.0, rho]), pt.stack([rho, 1.0])])
        pm.MvNormal("z", mu=np.zeros(2), cov=cov, observed=[0.1, 0.2])
    with model:  # PyMC reads check_bounds from the model in context (samplers run there)
        fn = model.logp_dlogp_function(ravel_inputs=True)
    fn.set_extra_values({})
    session = ort.InferenceSession(
        export_logp(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    slots = layout(model)
    for point in ({"s": -1.0, "rho": 0.2}, {"s": 1.5, "rho": 1.5}, {"s": 1.5, "rho": 0.2}):
        vector = ravel_point({k: np.array(v) for k, v in point.items()}, slots)
        expected = fn(vector)
        got = session.run(["logp", "dlogp"], {"point": vector})
        assert np.isneginf(got[0]) == np.isneginf(expected[0]), point
        assert_same(got[0], expected[0], rtol=1e-11, atol=1e-11, what="logp")
        assert_same(got[1], expected[1], rtol=1e-11, atol=1e-11, what="dlogp")


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_positive_definite_check_as_scipy_gives_it(dtype):
    """PosDefMatrix: whether SciPy's Cholesky of the upper triangle succeeds (lower-triangle
    entries never count), an empty matrix is; NaN or infinite entries (anywhere) and a
    non-square matrix raise SciPy's ValueError, as PyMC's Op does."""
    from pymc.distributions.multivariate import matrix_pos_def

    x = pt.matrix("x", dtype=dtype)
    ours = pytensor.function([x], matrix_pos_def(x), mode="ONNX")
    reference = pytensor.function([x], matrix_pos_def(x), mode=Mode(linker="py", optimizer=None))
    cases = [np.eye(3), [[1, 2], [2, 1]], [[4, 1], [100, 3]], [[4, 100], [1, 3]], [[0]], [[2]]]
    cases += [
        np.zeros((0, 0)),
        [[4, 2, 0], [2, 5, 3], [0, 3, 1]],
        [[4, 2, 0], [2, 5, 3], [0, 3, 2]],
    ]
    for value in cases:
        value = np.asarray(value, dtype=dtype)
        assert ours(value) == reference(value), value
    with pytest.raises(ValueError, match="square"):
        ours(np.ones((2, 3), dtype=dtype))
    if dtype != "int64":
        for bad in (np.nan, np.inf):
            with pytest.raises(ValueError, match="infs or NaNs"):
                ours(np.array([[1, 0], [bad, 1]], dtype=dtype))
    square = pt.matrix("square", dtype=dtype, shape=(2, 3))
    with pytest.raises(ValueError, match="square"):
        pytensor.function([square], matrix_pos_def(square), mode="ONNX")


def test_logdet_and_batched_diag_of_pm_math():
    """pm.math.logdet (PyMC's LogDet Op: log |det|, by NumPy's SVD there, by LU here) and its
    gradient, and pm.math.batched_diag (BatchedDiag), against PyMC's own Ops."""
    from pt_onnxscript.errors import UnsupportedOpError
    from pt_onnxscript.testing import compare_onnx_and_py

    a = pt.dmatrix("a")
    rng = np.random.default_rng(7)
    general = rng.normal(size=(6, 6))
    ill = np.vander(np.linspace(1, 2, 7), increasing=True)  # condition number ~1e8
    for value in (general, ill, np.array([[-3.0]]), np.zeros((0, 0)), np.array([[0, 2.0], [3, 1]])):
        compare_onnx_and_py(
            [a], pm.math.logdet(a), [value], rtol=1e-12 if value is not ill else 1e-9
        )
    compare_onnx_and_py([a], pytensor.grad(pm.math.logdet(a), a), [general], rtol=1e-12)
    # An exactly singular matrix: log |det| = -inf (NumPy's SVD leaves a tiny singular value).
    f = pytensor.function([a], pm.math.logdet(a), mode="ONNX")
    assert np.isneginf(f(np.array([[1.0, 2.0], [2.0, 4.0]])))
    with pytest.raises(ValueError, match="logdet"):
        f(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(NotImplementedError, match="non-square"):
        f(np.ones((2, 3)))
    d = pt.dmatrix("d")
    for value in (np.arange(6.0).reshape(2, 3), np.zeros((0, 3)), np.array([[np.inf, np.nan]])):
        compare_onnx_and_py([d], pm.math.batched_diag(d), [value])
    i = pt.lmatrix("i")
    with pytest.raises(UnsupportedOpError, match="cast it to a float dtype"):
        pytensor.function([i], pm.math.logdet(i), mode="ONNX")


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("ext", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_scipy_splines_and_their_derivatives(k, ext, dtype):
    """SplineWrapper (Interpolated's density) of a SciPy spline of degree k, each of its
    extrapolation modes (0 extrapolate, 1 zeros, 2 raise, 3 const), at its knots (the degree-0
    derivative jumps there: the piece on the right), past both ends, NaN and +-inf, and its
    gradient, against PyMC's Op."""
    from pymc.distributions.dist_math import SplineWrapper
    from scipy.interpolate import InterpolatedUnivariateSpline

    from pt_onnxscript.testing import compare_onnx_and_py

    points = np.random.default_rng(k)
    knots = np.sort(points.uniform(0, 5, 12))
    op = SplineWrapper(InterpolatedUnivariateSpline(knots, np.sin(knots) + 2, k=k, ext=ext))
    x = pt.vector("x", dtype=dtype)
    # The end knots rounded to float32 may fall outside the span (ext=2 raises there).
    at_knots = knots if dtype == "float64" else knots[1:-1]
    inside = np.concatenate([at_knots, points.uniform(knots[1], knots[-2], 20)]).astype(dtype)
    # Extrapolating to +-inf, FITPACK's B-spline recursion gives NaN or +-inf by the signs of
    # the end coefficients (inf - inf, or not); the translation gives NaN. Not compared.
    ends = [np.inf, -np.inf] if ext else []
    outside = np.array([-1.0, 6.0, np.nan, *ends], dtype=dtype)
    values = [inside] if ext == 2 else [np.concatenate([inside, outside])]
    outputs = [op(x), pytensor.grad(op(x).sum(), x)]
    # Each piece's Taylor form at its left knot rounds apart from FITPACK's B-spline sums.
    rtol, atol = (1e-11, 1e-13) if dtype == "float64" else (None, None)
    compare_onnx_and_py(
        [x], outputs, values, more_inputs=[[np.zeros(0, dtype)]], rtol=rtol, atol=atol
    )
    if ext == 2:
        f = pytensor.function([x], op(x), mode="ONNX")
        with pytest.raises(ValueError, match="not in the domain"):
            f(outside[:1])


def test_a_spline_wrapper_of_another_scipy_spline_is_refused_by_name():
    from pymc.distributions.dist_math import SplineWrapper
    from scipy.interpolate import CubicSpline

    from pt_onnxscript.errors import UnsupportedOpError

    x = pt.dvector("x")
    op = SplineWrapper(CubicSpline(np.arange(5.0), np.arange(5.0) ** 2))
    with pytest.raises(UnsupportedOpError, match="SplineWrapper of a CubicSpline"):
        pytensor.function([x], op(x), mode="ONNX")


def test_export_of_a_model_without_free_variables_says_so():
    with pm.Model() as model:
        pm.Normal("y", 0, 1, observed=[0.5])
    with pytest.raises(ValueError, match="no free random variables"):
        export_logp(model)


def test_export_says_nothing_about_the_infinities_it_folds():
    # Constant folding evaluates IEEE arithmetic (1 / 0 = inf in the Student-t's special
    # functions) with NumPy, which warns: the user has nothing to act on.
    import warnings

    with pm.Model() as model:
        nu = pm.Gamma("nu", 2, 0.1)
        pm.StudentT("y", nu=nu, mu=0, sigma=1, observed=np.linspace(-2, 2, 20))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_logp(model)
    assert not [w for w in caught if "onnx" in w.filename], [str(w.message) for w in caught]


def test_ravel_point_names_what_is_missing():
    model = glm()
    with pytest.raises(KeyError, match="sigma_log__"):
        ravel_point({"beta": np.zeros(3)}, layout(model))


# ---------------------------------------------------------------- random draws


def prior_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 1, 2)
        sigma = pm.HalfNormal("sigma", 1)
        nu = pm.Gamma("nu", 2, 0.5)
        pm.StudentT("t", nu=nu, mu=mu, sigma=sigma)
        pm.Poisson("k", 4.0)
        pm.Dirichlet("w", a=np.array([1.0, 2.0, 3.0]))
        pm.MvNormal("mv", mu=np.zeros(2), cov=np.array([[1.0, 0.5], [0.5, 2.0]]))
        pm.Deterministic("twice_mu", 2 * mu)
    return model


def assert_same_distribution(ours, pymc_own, name):
    ours, pymc_own = np.asarray(ours), np.asarray(pymc_own)
    assert ours.shape == pymc_own.shape and ours.dtype == pymc_own.dtype, name
    flat_ours, flat_own = ours.reshape(len(ours), -1), pymc_own.reshape(len(pymc_own), -1)
    for column in range(flat_ours.shape[1]):
        pvalue = ks_2samp(flat_ours[:, column], flat_own[:, column]).pvalue
        assert pvalue > 1e-3, f"{name}[{column}]: p = {pvalue}"


def test_draw_and_prior_predictive_in_mode_onnx():
    model = prior_model()
    first = pm.draw(model["mu"], draws=5, mode="ONNX", random_seed=3)
    np.testing.assert_array_equal(pm.draw(model["mu"], draws=5, mode="ONNX", random_seed=3), first)
    assert len(set(first.tolist())) == 5
    kwargs = {"draws": 2000, "model": model, "return_inferencedata": False, "random_seed": 1}
    ours = pm.sample_prior_predictive(compile_kwargs={"mode": "ONNX"}, **kwargs)
    own = pm.sample_prior_predictive(**kwargs)
    assert set(ours) == set(own)
    for name in own:
        assert_same_distribution(ours[name], own[name], name)
    np.testing.assert_array_equal(ours["twice_mu"], 2 * ours["mu"])
    again = pm.sample_prior_predictive(compile_kwargs={"mode": "ONNX"}, **kwargs)
    np.testing.assert_array_equal(again["t"], ours["t"])


INTERPOLATION_GRID = np.linspace(-3, 3, 40)
WISHART_SCALE = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])
PYMC_RVS = {
    "skew_normal": lambda: pm.SkewNormal.dist(mu=1.0, sigma=2.0, alpha=-3.0, shape=3),
    "wald": lambda: pm.Wald.dist(mu=1.0, lam=2.0, alpha=0.5, shape=3),
    "rice": lambda: pm.Rice.dist(nu=1.5, sigma=0.7, shape=3),
    "moyal": lambda: pm.Moyal.dist(0.5, 2.0, shape=3),
    "skew_student_t": lambda: pm.SkewStudentT.dist(a=2.0, b=3.0, mu=0.3, sigma=1.5, shape=3),
    "discrete_uniform": lambda: pm.DiscreteUniform.dist(-2, 7, shape=3),
    "matrix_normal": lambda: pm.MatrixNormal.dist(
        mu=np.arange(6.0).reshape(2, 3),
        rowcov=np.array([[2.0, 0.5], [0.5, 1.0]]),
        colcov=np.array([[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0.0, 0.1, 1.5]]),
        shape=(2, 2, 3),
    ),
    # at alpha = 0.05, one draw beta(1, alpha) in six rounds to 1.0: the weights after it are 0
    "stick_breaking_weights": lambda: pm.StickBreakingWeights.dist(alpha=[0.05, 0.5, 3.0], K=4),
    # nu truncated to 3, as PyMC's rng_fn does
    "wishart": lambda: pm.Wishart.dist(nu=3.7, V=WISHART_SCALE, size=(2,)),
    "interpolated": lambda: pm.Interpolated.dist(
        INTERPOLATION_GRID, np.exp(-(INTERPOLATION_GRID**2) / 2) + 0.1, shape=3
    ),
    # PyTensor's own random variables, in a graph of set_subtensors
    "lkj_corr": lambda: pm.LKJCorr.dist(n=3, eta=2.0),
    "truncated_normal": lambda: pm.TruncatedNormal.dist(
        mu=[0.0, 1.0, -1.0], sigma=[1.0, 2.0, 0.5], lower=[-1.0, -np.inf, 0.0], upper=2.0
    ),
}


@pytest.mark.parametrize("make", PYMC_RVS.values(), ids=PYMC_RVS.keys())
def test_pymc_random_variables_draw_as_pymc(make, caplog):
    """PyMC's own random variables (their rng_fn call NumPy or SciPy) draw in mode "ONNX" with
    PyMC's law (KS against PyMC's draws) and dtype, and, with the same seed, the same draws.
    Every value of the model keeps its type (onnx-ir warns of one with a shape and none)."""
    var = make()
    with caplog.at_level("WARNING", logger="onnx_ir"):
        ours = pm.draw(var, draws=3000, random_seed=1, mode="ONNX")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert_same_distribution(ours, pm.draw(var, draws=3000, random_seed=2), var.owner.op.name)
    np.testing.assert_array_equal(pm.draw(var, draws=5, random_seed=1, mode="ONNX"), ours[:5])


def test_truncated_normal_draws_in_either_tail():
    """TruncatedNormal draws by SciPy's truncnorm ppf, in logs: intervals far in either tail
    (where the normal CDF underflows) fit SciPy's law and stay inside their bounds."""
    lower = np.array([-1, 2, -np.inf, 40, -1000, 0.5, 8])
    upper = np.array([2, np.inf, -30, 41, -999, 0.5001, 9])
    var = pm.TruncatedNormal.dist(mu=0.0, sigma=1.0, lower=lower, upper=upper, shape=(3000, 7))
    draws = pm.draw(var, random_seed=3, mode="ONNX")
    assert np.all((draws >= lower) & (draws <= upper))
    for column, (a, b) in enumerate(zip(lower, upper, strict=True)):
        assert kstest(draws[:, column], st.truncnorm(a, b).cdf).pvalue > 1e-3, (a, b)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: pm.SkewNormal.dist(mu=0.0, sigma=-1.0, alpha=1.0), "skewnorm"),
        (lambda: pm.Rice.dist(b=-1.0, sigma=1.0), "rice"),
        (lambda: pm.Moyal.dist(0.0, -1.0), "moyal"),
        (lambda: pm.SkewStudentT.dist(a=-1.0, b=2.0, mu=0.0, sigma=1.0), "jf_skew_t"),
        (lambda: pm.Wald.dist(mu=-1.0, lam=1.0), "mean <= 0"),
        (lambda: pm.DiscreteUniform.dist(5, 2), "randint"),
        (lambda: pm.TruncatedNormal.dist(mu=0.0, sigma=1.0, lower=2.0, upper=1.0), "truncnorm"),
        (lambda: pm.StickBreakingWeights.dist(alpha=-1.0, K=3), "b <= 0"),
        (lambda: pm.StickBreakingWeights.dist(alpha=1.0, K=-1), "K needs to be positive"),
        (lambda: pm.Wishart.dist(nu=2, V=WISHART_SCALE), "Degrees of freedom must be greater"),
    ],
)
def test_pymc_random_variables_refuse_parameters_as_pymc(make, message):
    var = make()
    with pytest.raises(ValueError, match=message):
        pm.draw(var, random_seed=1)
    with pytest.raises(ValueError, match=message):
        pm.draw(var, random_seed=1, mode="ONNX")


def test_wishart_of_a_scale_that_is_not_positive_definite_raises_as_scipy():
    var = pm.Wishart.dist(nu=5, V=np.array([[1.0, 2.0], [2.0, 1.0]]))
    for mode in (None, "ONNX"):
        with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
            pm.draw(var, random_seed=1, mode=mode)


def test_time_series_and_hurdle_draws_whose_scans_draw():
    """AR, GARCH11 and EulerMaruyama draw inside a Scan, which carries the random generator
    from step to step; a hurdle Poisson, a discrete distribution truncated by PyMC, redraws in
    a while Scan until each draw falls in the bounds. Both were refused ("untraced outputs
    that are not tensors")."""
    with pm.Model() as model:
        pm.AR("ar", rho=[0.5, -0.2], sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=8)
        pm.GARCH11("garch", omega=0.1, alpha_1=0.2, beta_1=0.5, initial_vol=1.0, steps=8)
        pm.EulerMaruyama(
            "sde",
            dt=0.1,
            sde_fn=lambda x, k: (-k * x, 1.0),
            sde_pars=(0.5,),
            init_dist=pm.Normal.dist(0, 1),
            steps=8,
        )
        pm.HurdlePoisson("hurdle", psi=0.7, mu=3.0, shape=3)
    kwargs = {"draws": 2000, "model": model, "return_inferencedata": False, "random_seed": 4}
    ours = pm.sample_prior_predictive(compile_kwargs={"mode": "ONNX"}, **kwargs)
    own = pm.sample_prior_predictive(**kwargs)
    for name in own:
        assert_same_distribution(ours[name], own[name], name)


@pytest.mark.parametrize(
    "dists, truncated, bounds, rtol",
    [
        ([pm.InverseGamma.dist(3.0, 2.0)], pm.Gamma.dist(2.0, 1.0), (1.0, 4.0), 1e-13),
        (
            [pm.Beta.dist(2.5, 0.7), pm.StudentT.dist(nu=3.5, mu=1.0, sigma=2.0)],
            pm.Beta.dist(2.0, 5.0),
            (0.1, 0.6),
            1e-12,
        ),
    ],
    ids=["gamma family: gammaincinv", "beta and Student-t: betaincinv"],
)
def test_icdf_and_truncated_draws_in_mode_onnx(dists, truncated, bounds, rtol):
    """icdf of these distributions is an inverse incomplete gamma or beta function (and a
    truncated one draws through it, by the inverse CDF): in mode "ONNX" they were an
    unsupported GammaIncInv and BetaIncInv."""
    q = pt.dvector("q")
    values = np.array([1e-6, 0.1, 0.5, 0.93, 0.999])
    for dist in dists:
        out = pm.icdf(dist, q)
        ours = pytensor.function([q], out, mode="ONNX")(values)
        np.testing.assert_allclose(ours, pytensor.function([q], out)(values), rtol=rtol)
    lower, upper = bounds
    with pm.Model():
        x = pm.Truncated("x", truncated, lower=lower, upper=upper)
    ours = pm.draw(x, draws=1000, mode="ONNX", random_seed=1)
    assert lower <= ours.min() and ours.max() <= upper
    assert_same_distribution(ours, pm.draw(x, draws=1000, random_seed=1), "x")


def test_posterior_predictive_in_mode_onnx():
    import arviz as az

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        pm.Normal("y", mu, 1, observed=np.zeros(4))
    posterior = az.from_dict(posterior={"mu": np.full((2, 500), 3.0)})
    ours = pm.sample_posterior_predictive(
        posterior, model=model, compile_kwargs={"mode": "ONNX"}, random_seed=2, progressbar=False
    )
    y = ours.posterior_predictive["y"].values
    assert y.shape == (2, 500, 4)
    assert kstest(y.ravel() - 3.0, "norm").pvalue > 1e-3


def test_exported_prior_predictive_names_each_state_after_its_variable():
    """A generator is named after the variable whose graph draws from it, also where no draw
    of it is that variable (AR's Scan and initial draw, LKJCorr's several draws): no state is
    left as "random_rng"."""
    with pm.Model() as model:
        pm.AR("ar", rho=[0.5], sigma=1.0, init_dist=pm.Normal.dist(0, 1), steps=4)
        pm.LKJCorr("corr", n=3, eta=2.0)
        pm.Normal("mu")
    proto = export_prior_predictive(model)
    assert sorted(initial_states(proto, seed=0)) == ["ar_rng", "ar_rng_1", "corr_rng", "mu_rng"]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    ar, corr, mu, *_ = session.run(None, initial_states(proto, seed=0))
    assert ar.shape == (5,) and corr.shape == (3,) and mu.shape == ()


def test_exported_prior_predictive_runs_without_pymc(tmp_path):
    model = prior_model()
    path = tmp_path / "prior.onnx"
    export_prior_predictive(model, path)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    states = initial_states(proto, seed=7)
    assert sorted(states) == sorted(f"{v.name}_rng" for v in model.basic_RVs)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in proto.graph.output]
    n_draws = len(names) - len(states)
    draws = {name: [] for name in names[:n_draws]}
    for _ in range(2000):
        outs = session.run(None, states)
        for name, value in zip(names[:n_draws], outs):
            draws[name].append(value)
        states = {
            name.removesuffix("_updated"): v for name, v in zip(names[n_draws:], outs[n_draws:])
        }
    own = pm.sample_prior_predictive(
        draws=2000, model=model, return_inferencedata=False, random_seed=1
    )
    assert set(draws) == set(own)
    for name, values in draws.items():
        assert_same_distribution(np.stack(values), own[name], name)
    # The same seed gives the same draws; another seed others.
    first = session.run(None, initial_states(proto, seed=7))[0]
    np.testing.assert_array_equal(first, session.run(None, initial_states(proto, seed=7))[0])
    assert not np.array_equal(first, session.run(None, initial_states(proto, seed=8))[0])


def regression_model():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 2))
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=2)
        sigma = pm.HalfNormal("sigma", 1)
        counts = pm.Poisson("counts_rate", 3.0)
        mu = pm.Deterministic("mu", x @ beta)
        pm.Normal("y", mu, sigma, observed=rng.normal(size=6))
        pm.Poisson("k", counts + 1.0, observed=np.arange(3))
    return model


@pytest.mark.parametrize("batch", [True, 4, False])
def test_exported_posterior_predictive_draws_as_pymc_for_each_posterior_draw(batch, tmp_path):
    """One predictive draw per posterior draw (a discrete free variable among them), as
    pm.sample_posterior_predictive draws them, from an InferenceData's draws."""
    import arviz as az

    model = regression_model()
    chains, draws = 2, 1200
    rng = np.random.default_rng(0)
    # Two halves of the posterior far apart: each row must use its own draw.
    beta = np.where(rng.random((chains, draws, 1)) < 0.5, [1.0, 2.0], [-3.0, 0.5])
    posterior = az.from_dict(
        posterior={
            "beta": beta,
            "sigma": rng.uniform(0.2, 1.0, (chains, draws)),
            "counts_rate": rng.integers(0, 5, (chains, draws)),
        }
    )
    path = tmp_path / "predictive.onnx"
    proto = export_posterior_predictive(model, path, batch=batch)
    onnx.checker.check_model(str(path), full_check=True)
    slots = posterior_layout(model)
    assert [s.name for s in slots] == ["beta", "sigma", "counts_rate"]
    assert read_layout(proto) == slots
    rows = posterior_points(posterior, slots)
    assert rows.shape == (chains * draws, 4)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    states = initial_states(proto, seed=3)
    assert sorted(states) == ["k_rng", "y_rng"]
    names = [o.name for o in proto.graph.output]
    assert names[:2] == ["k", "y"]
    if batch is False:
        rows = rows[:400]  # one call per draw
    size = 1 if batch is False else len(rows) if batch is True else batch
    ours = {"k": [], "y": []}
    for start in range(0, len(rows), size):
        feed = rows[start] if batch is False else rows[start : start + size]
        outs = session.run(None, {"draw" if batch is False else "draws": feed, **states})
        for name, value in zip(names[:2], outs, strict=False):
            ours[name].append(value[None] if batch is False else value)
        states = {n.removesuffix("_updated"): v for n, v in zip(names[2:], outs[2:], strict=True)}
    pymc_own = pm.sample_posterior_predictive(
        posterior, model=model, random_seed=1, progressbar=False
    ).posterior_predictive
    for name in ("k", "y"):
        values = np.concatenate(ours[name])
        own = pymc_own[name].values.reshape(chains * draws, -1)[: len(values)]
        assert values.dtype == own.dtype and values.shape == own.shape
        # Each half of the posterior against PyMC's draws from the same half.
        for half in (rows[:, 0] > 0, rows[:, 0] < 0):
            assert_same_distribution(values[half], own[half], name)
    # The same seed gives the same draws.
    feed = {"draw" if batch is False else "draws": rows[0] if batch is False else rows[:4]}
    first = session.run(None, feed | initial_states(proto, seed=3))[1]
    np.testing.assert_array_equal(first, session.run(None, feed | initial_states(proto, seed=3))[1])


def test_posterior_predictive_export_says_what_is_wrong():
    model = regression_model()
    with pytest.raises(ValueError, match="draws variables given by the posterior.*beta"):
        export_posterior_predictive(model, var_names=["beta", "y"])
    for export in (export_posterior_predictive, export_prior_predictive):
        with pytest.raises(ValueError, match="Unrecognized var_names.*nope"):
            export(model, var_names=["nope"])
    slots = posterior_layout(model)
    with pytest.raises(KeyError, match="no draws of 'sigma'"):
        posterior_points({"beta": np.zeros((1, 3, 2)), "counts_rate": np.zeros((1, 3))}, slots)
    bad = {"beta": np.zeros((1, 3, 3)), "sigma": np.zeros((1, 3)), "counts_rate": np.zeros((1, 3))}
    with pytest.raises(ValueError, match="'beta' has shape .*\\(2,\\) expected"):
        posterior_points(bad, slots)
