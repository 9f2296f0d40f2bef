"""Transcendental scalar ops (tan, inverse trigonometric and hyperbolic functions, erf, erfc,
sigmoid, softplus, log1p, expm1) against NumPy, SciPy and PyTensor's Python linker."""

import itertools
import math

import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.scalar.math as psm
import pytensor.tensor as pt
import pytest
from pytensor.tensor.elemwise import Elemwise
from scipy import special

from pt_onnxscript import onnx_mode
from pt_onnxscript.ops.scalar import math as sm
from pt_onnxscript.testing import compare_onnx_and_py

# ONNX Runtime's CPU build has no float64 kernel for the first ten; its float64 Sigmoid is
# inaccurate below -18 and Softplus overflows.
NOT_IN_FLOAT64 = ["Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf"]
NOT_IN_FLOAT64 += ["Sigmoid", "Softplus"]

UNARY = [
    ps.tan,
    ps.arcsin,
    ps.arccos,
    ps.arctan,
    ps.sinh,
    ps.cosh,
    ps.arcsinh,
    ps.arccosh,
    ps.arctanh,
    psm.erf,
    psm.erfc,
    psm.sigmoid,
    psm.softplus,
    ps.log1p,
    ps.expm1,
]


def grid(dtype):
    """The whole line: both signs of log-spaced magnitudes from the smallest subnormal to the
    largest float, dense steps below 30, points near +-1, multiples of pi/2 and their
    neighbours (the poles and zeros of tan), the extremes and the non-finite values."""
    info = np.finfo(dtype)
    with np.errstate(over="ignore"):
        magnitudes = np.geomspace(float(info.smallest_subnormal), float(info.max), 30001)
    near_one = np.geomspace(float(info.eps) / 4, 1, 2001)
    multiples = np.arange(-(2**12), 2**12) * (np.pi / 2)
    values = np.concatenate(
        [
            magnitudes,
            -magnitudes,
            np.linspace(-30, 30, 60001),
            1 - near_one,
            1 + near_one,
            -1 + near_one,
            -1 - near_one,
            [0.0, -0.0, np.inf, -np.inf, np.nan, info.max, -info.max],
        ]
    ).astype(dtype)
    poles = multiples.astype(dtype)
    return np.concatenate([values, poles, np.nextafter(poles, 0), np.nextafter(poles, np.inf)])


def assert_accurate(got, want, ulps):
    """Same dtype, NaNs, infinities and signed zeros; finite values within `ulps` eps of
    relative error (2 subnormal steps for subnormal results)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    info = np.finfo(want.dtype)
    np.testing.assert_allclose(
        got, want, rtol=ulps * float(info.eps), atol=2 * float(info.smallest_subnormal)
    )
    zeros = (got == 0) & (want == 0)
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


def edge_values(dtype):
    """Values where implementations differ: signed zeros, non-finite values, extremes, domain
    edges, branch points of the piecewise algorithms."""
    if dtype == "bool":
        return np.array([False, True])
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        negatives = [-3, -1] if info.min else []
        return np.array([info.min, info.min + 1, *negatives, 0, 1, 2, 3, info.max], dtype)
    info = np.finfo(dtype)
    values = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.25, 0.84375]
    values += [1.25, -1.25, 1 / 0.35, 6.0, -6.0, 18.0, 27.0, -37.5, 40.0, -40.0, 710.5, -710.5]
    values += [np.pi / 2, -np.pi / 2, 1e-5, -1e-5, 0.9999999, -0.9999999, 1.0000001]
    values += [info.max, -info.max, info.smallest_subnormal, -info.smallest_subnormal]
    with np.errstate(over="ignore"):
        return np.array(values).astype(dtype)


def elemwise_per_dtype(scalar_op, dtypes):
    """One vector input per dtype and `scalar_op` of each: inputs and outputs."""
    inputs = [pt.vector(f"x_{dtype}", dtype=dtype) for dtype in dtypes]
    return inputs, [Elemwise(scalar_op)(x) for x in inputs]


def pytensor_softplus(x):
    """PyTensor's own softplus (Python ints and floats, as its Python linker runs it)."""
    return np.frompyfunc(psm.softplus.impl, 1, 1)(x.astype(float)).astype(x.dtype)


def erfc_reference(x):
    """libm's erfc (within an ulp of the truth), with SciPy's 0 once x*x > 709.78."""
    with np.errstate(over="ignore"):
        beyond = x.astype(float) ** 2 > 7.09782712893383996843e2
    exact = np.array([math.erfc(v) if not math.isnan(v) else v for v in x.astype(float)])
    return np.where(beyond & (x > 0), 0.0, exact).astype(x.dtype)


def arctan(x):
    """atan as the ArcTan translation computes it in float64: atan2(x, 1)."""
    return sm.arctan2(x, np.ones_like(x))


# Scripted function, reference, and the dtypes it serves with the maximum error measured on
# grid() in units of eps (eps = 2.2e-16 in float64, 1.2e-7 in float32).
EAGER = {
    "tan": (sm.tan_float64, np.tan, {"float64": 2.8}),
    "sinh": (sm.sinh, np.sinh, {"float64": 1.9}),
    "cosh": (sm.cosh, np.cosh, {"float64": 1.5}),
    "arcsinh": (sm.arcsinh, np.arcsinh, {"float64": 2.0}),
    "arccosh": (sm.arccosh, np.arccosh, {"float64": 2.0}),
    "arctanh": (sm.arctanh, np.arctanh, {"float64": 1.2}),
    "erf": (sm.erf, special.erf, {"float64": 1.8}),
    "erfc": (sm.erfc, erfc_reference, {"float64": 2.4, "float32": 1.9}),
    "sigmoid": (sm.sigmoid, special.expit, {"float64": 1.4, "float32": 1.8}),
    "log1p": (sm.log1p, np.log1p, {"float64": 1.0, "float32": 2.0}),
    "expm1": (sm.expm1, np.expm1, {"float64": 2.0, "float32": 2.7}),
    "arctan2(x, 1)": (arctan, np.arctan, {"float64": 1.0, "float32": 1.0}),
}


@pytest.mark.parametrize("name, dtype", [(n, d) for n, entry in EAGER.items() for d in entry[2]])
def test_scripted_function_accuracy(name, dtype):
    """Each scripted function, run eagerly over the whole line, within 4 eps."""
    function, reference, _ = EAGER[name]
    x = grid(dtype)
    with np.errstate(all="ignore"):
        want = reference(x)
    assert_accurate(function(x), want, 4)


def test_erfc_matches_scipy():
    """SciPy's erfc itself is off by up to 6e-14 in its far tail (exp(-x*x) rounds x*x)."""
    x = grid("float64")
    got, want = sm.erfc(x), special.erfc(x)
    normal = np.abs(want) >= np.finfo("float64").tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=6e-14)
    np.testing.assert_array_equal(got == 0, want == 0)


def test_erfc_model_accuracy():
    """In a model, erfc's exact split of x*x survives ONNX Runtime's rewrites: within 4 eps of
    libm where SciPy strays to 6e-14."""
    inputs, outputs = elemwise_per_dtype(psm.erfc, ["float64"])
    fn = pytensor.function(inputs, outputs, mode=onnx_mode())
    x = grid("float64")
    assert_accurate(fn(x)[0], erfc_reference(x), 4)  # 2.4 eps


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_logistic_functions_share_their_parts(dtype):
    """softplus(x), softplus(-x), sigmoid(x) and sigmoid(-x) in one Composite (a logistic
    log-likelihood and its gradient) compute one Exp and one Log between them, with no
    branch and no sign repair, within 4 eps of PyTensor's softplus and SciPy's expit over
    the whole line; a Switch between the negated softplus terms keeps their signed zeros."""
    x = pt.vector("x", dtype=dtype)
    y = pt.vector("y", dtype="bool")
    outputs = [
        pt.softplus(x),
        pt.softplus(-x),
        pt.sigmoid(x),
        pt.sigmoid(-x),
        pt.switch(y, -pt.softplus(-x), -pt.softplus(x)),
    ]
    values = grid(dtype)
    flags = np.arange(values.size) % 2 == 0
    rtol = 4 * float(np.finfo(dtype).eps)
    fn, _ = compare_onnx_and_py(
        [x, y], outputs, [values, flags], rtol=rtol, atol=2 * float(np.finfo(dtype).tiny)
    )
    ops = [node.op_type for node in fn.vm.jit_fn.model.graph]
    assert (ops.count("Exp"), ops.count("Log")) == (1, 1), ops
    assert "If" not in ops and "Mul" not in ops and ops.count("Where") == 3, ops


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_arctan2_accuracy(dtype, rng):
    """atan2 of random pairs spanning 80 decades, and of every pair of edge values (signed
    zeros, infinities and NaNs in each quadrant), as NumPy gives them."""
    n = 100_000
    y, x = (rng.standard_normal(n) * np.exp(rng.uniform(-40, 40, n)) for _ in range(2))
    pairs = np.array(list(itertools.product(edge_values(dtype), repeat=2)))
    y = np.concatenate([y, pairs[:, 0]]).astype(dtype)
    x = np.concatenate([x, pairs[:, 1]]).astype(dtype)
    with np.errstate(all="ignore"):
        want = np.arctan2(y, x)
    assert_accurate(sm.arctan2(y, x), want, 2)  # 1.7 eps in float32, 1 in float64


def test_tan_reduction(rng):
    """tan near every multiple of pi/2 up to 2**21, where the reduction changes, and beyond."""
    k = np.arange(1, 2**21, 97)
    multiples = k * (np.pi / 2)
    x = np.concatenate(
        [
            multiples,
            np.nextafter(multiples, 0),
            np.nextafter(multiples, np.inf),
            rng.uniform(-(2**22), 2**22, 100_000),
        ]
    )
    assert_accurate(sm.tan_float64(x), np.tan(x), 4)  # 3.0 eps


@pytest.mark.parametrize("scalar_op", UNARY, ids=str)
def test_unary_sweep(scalar_op):
    """Over the whole line, float64 stays within 4 eps of PyTensor (2.8 measured) and its model
    has none of the ops lacking an accurate float64 kernel; float32, using ONNX Runtime's
    kernels where accurate, within 5 eps (2.9 measured, 3.8 for Asin on a denser grid)."""
    for dtype, ulps, forbidden in [("float64", 4, NOT_IN_FLOAT64), ("float32", 5, ())]:
        info = np.finfo(dtype)
        rtol = ulps * float(info.eps)
        if scalar_op is psm.erfc and dtype == "float64":
            rtol = 6e-14  # SciPy's erfc is off by up to 6e-14 in its far tail.
        inputs, outputs = elemwise_per_dtype(scalar_op, [dtype])
        compare_onnx_and_py(
            inputs,
            outputs,
            [grid(dtype)],
            rtol=rtol,
            atol=2 * float(info.smallest_subnormal),
            forbidden_ops=forbidden,
        )


DTYPES = ["float16", "float32", "float64", "bool", "int8", "int64"]
# f(-0.0) = -0.0 for these: 1 / f(x) shows the sign of their zeros.
ODD = [ps.tan, ps.arcsin, ps.arctan, ps.sinh, ps.arcsinh, ps.arctanh, psm.erf, ps.log1p, ps.expm1]


@pytest.mark.parametrize("scalar_op", UNARY, ids=str)
def test_unary_edges(scalar_op, opset):
    """Edge values of each dtype (integers and bools compute in PyTensor's upcast float), a
    0-d input and an empty one; signed zeros through 1 / f(x)."""
    # PyTensor's Python softplus of a bool computes in float16 (NumPy's exp(True)); its C
    # code, like this translation, in float32.
    dtypes = [d for d in DTYPES if not (scalar_op is psm.softplus and d == "bool")]
    inputs, outputs = elemwise_per_dtype(scalar_op, dtypes)
    values = [edge_values(dtype) for dtype in dtypes]
    scalar, empty = pt.scalar("scalar", dtype="float64"), pt.matrix("empty", dtype="float32")
    inputs += [scalar, empty]
    outputs += [Elemwise(scalar_op)(scalar), Elemwise(scalar_op)(empty)]
    values += [np.array(-0.75), np.zeros((0, 3), "float32")]
    if scalar_op in ODD:
        outputs.append(1 / outputs[dtypes.index("float64")])
    compare_onnx_and_py(inputs, outputs, values, opset=opset)


ARCTAN2_DTYPES = [
    ("float64", "float64"),
    ("float32", "float32"),
    ("float16", "float16"),
    ("int8", "int8"),
    ("int64", "float32"),
    ("bool", "uint16"),
    ("uint64", "int8"),
]


def test_arctan2_edges(opset):
    """Every pair of edge values, by broadcasting a column against a row, for each dtype pair
    (mixed ones compute in PyTensor's upcast); signed zeros through 1 / atan2(y, x)."""
    inputs, outputs, values = [], [], []
    for dy, dx in ARCTAN2_DTYPES:
        y = pt.matrix(f"y_{dy}_{dx}", dtype=dy, shape=(None, 1))
        x = pt.matrix(f"x_{dy}_{dx}", dtype=dx, shape=(1, None))
        inputs += [y, x]
        outputs.append(Elemwise(ps.arctan2)(y, x))
        values += [edge_values(dy)[:, None], edge_values(dx)[None, :]]
    outputs.append(1 / outputs[0])
    compare_onnx_and_py(inputs, outputs, values, opset=opset)


def test_float64_sin_cos_tan_to_a_few_ulp_near_their_zeros():
    """Cody-Waite reduction in float64: ONNX Runtime's own Sin/Cos lose relative accuracy near
    their zeros (sin(-9.425) was 13,554 ulp off, cos(-7.854) 90,363 ulp)."""
    x = pt.dvector("x")
    fn = pytensor.function([x], [pt.sin(x), pt.cos(x), pt.tan(x)], mode="ONNX")
    rng = np.random.default_rng(3)
    near = rng.integers(-60_000, 60_000, 3000) * (np.pi / 2)
    xs = np.concatenate(
        [
            rng.uniform(-1e5, 1e5, 20_000),
            near,
            np.nextafter(near, np.inf),
            np.nextafter(near, -np.inf),
            [-9.425, -7.854, 0.0, -0.0, 5e-324, 1e-300, 1e5],
        ]
    )
    with np.errstate(all="ignore"):
        for got, expected, limit in zip(
            fn(xs), [np.sin(xs), np.cos(xs), np.tan(xs)], [4, 4, 4], strict=True
        ):
            assert got.dtype == np.float64
            ulps = np.abs(got - expected) / np.spacing(np.abs(expected))
            assert np.max(ulps) <= limit
    sin, _, tan = fn(np.array([-0.0, np.inf, np.nan]))
    assert np.signbit(sin[0]) and np.signbit(tan[0]) and np.isnan(sin[1:]).all()


def test_logistic_parts_are_shared_only_within_one_graph():
    """softplus of a value inside a Scan's step and sigmoid of the same value outside it:
    each graph computes its own parts (the step's are not readable outside it)."""
    x = pt.dvector("x")
    steps = pytensor.scan(
        lambda acc, v: acc + pt.softplus(v).sum(),
        outputs_info=[pt.zeros(())],
        non_sequences=[x],
        n_steps=3,
        return_updates=False,
    )
    outputs = [steps[-1], pt.sigmoid(x)]
    compare_onnx_and_py([x], outputs, [np.linspace(-40, 40, 9)])
