"""Owen's T function (PyTensor's Owens_t), against SciPy and PyTensor's Python linker."""

import numpy as np
import onnx_ir as ir
import pytensor
import pytensor.tensor as pt
import pytest
import scipy.special as sp

from pt_onnxscript.ops.scalar.owens_t import ARANGE, HRANGE
from pt_onnxscript.testing import compare_onnx_and_py, relative_error

rng = np.random.default_rng(17)


@pytest.fixture(scope="module")
def owens_t_float64():
    h, a = pt.dvector("h"), pt.dvector("a")
    return pytensor.function([h, a], pt.owens_t(h, a), mode="ONNX")


def _region_sweep(count):
    """h and a on both sides of every boundary of the method table, signs mixed, plus a
    above 1 (mapped to 1 / a) and wide log-uniform ranges."""
    h_edges = np.concatenate([[0.0], HRANGE, [6.0]])
    a_edges = np.concatenate([[0.0], ARANGE, [1.0]])
    h = rng.uniform(h_edges[:-1, None], h_edges[1:, None], (h_edges.size - 1, count)).ravel()
    a = rng.uniform(a_edges[:-1, None], a_edges[1:, None], (a_edges.size - 1, count)).ravel()
    h, a = np.meshgrid(h, a)
    h, a = h.ravel(), a.ravel()
    wide_h = np.exp(rng.uniform(np.log(1e-6), np.log(40.0), 4000))
    wide_a = np.exp(rng.uniform(np.log(1e-8), np.log(1e8), 4000))
    h = np.concatenate([h, wide_h])
    a = np.concatenate([a, wide_a])
    sign_h = rng.choice([-1.0, 1.0], h.size)
    sign_a = rng.choice([-1.0, 1.0], a.size)
    return h * sign_h, a * sign_a


def test_against_scipy_in_every_region(owens_t_float64):
    """Patefield and Tandy's 18 regions (each with its method and order) and the map of
    a > 1 to 1 / a: within 2e-12 of SciPy where T is normal, most to the bit. (SciPy's own
    error against the integral is of that size where the series cancel.)"""
    h, a = _region_sweep(12)
    expected = sp.owens_t(h, a)
    got = owens_t_float64(h, a)
    normal = np.abs(expected) > 1e-290
    assert normal.mean() > 0.9
    error = relative_error(got[normal], expected[normal])
    assert error.max() < 2e-12
    assert np.median(error) == 0
    tiny = ~normal
    assert np.all(np.abs(got[tiny] - expected[tiny]) < 1e-300)


def test_edges_like_scipy(owens_t_float64):
    """h = 0 (atan(a) / 2 pi), a = 0, a = 1, infinite h or a, NaN, and signs: T is even in h
    and odd in a, with SciPy's signed zeros."""
    inf, nan = np.inf, np.nan
    h = np.array([0.0, -0.0, 0.0, 1.5, 1.5, -1.5, 2.0, inf, -inf, 3.0, 3.0, 0.0, nan, 1.0])
    a = np.array([0.5, 2.0, -3.0, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, inf, -inf, inf, 1.0, nan])
    expected = sp.owens_t(h, a)
    got = owens_t_float64(h, a)
    assert relative_error(got, expected).max() < 1e-15
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_through_pytensor_broadcast_and_empty(dtype, opset):
    h = pt.matrix("h", dtype=dtype, shape=(None, 1))
    a = pt.vector("a", dtype=dtype)
    out = pt.owens_t(h, a)
    h_value = np.array([[0.0], [0.3], [-2.5], [7.0]], dtype=dtype)
    a_value = np.array([0.05, -0.7, 1.0, 12.0], dtype=dtype)
    rtol = 1e-12 if dtype == "float64" else None
    compare_onnx_and_py(
        [h, a],
        [out],
        [h_value, a_value],
        more_inputs=[[np.zeros((0, 1), dtype=dtype), a_value]],
        opset=opset,
        rtol=rtol,
    )


def test_gradients_and_integer_inputs():
    """PyTensor's gradients (in h: a Gaussian times erf; in a: a Gaussian over 1 + a^2), and
    int64 inputs, which PyTensor computes in float64."""
    h, a = pt.dvector("h"), pt.dvector("a")
    grads = pytensor.grad(pt.owens_t(h, a).sum(), [h, a])
    values = [np.array([0.2, -1.3, 4.0]), np.array([0.4, 2.5, -0.9])]
    compare_onnx_and_py([h, a], grads, values, rtol=1e-12)
    i, j = pt.lvector("i"), pt.lvector("j")
    compare_onnx_and_py([i, j], [pt.owens_t(i, j)], [np.array([0, 1, -3]), np.array([2, -1, 5])])


def test_no_loop_and_each_method_under_its_own_if():
    """The series are unrolled (no Loop), and each of the six methods runs under an If that
    only the elements taking it open: one element of each method, and all six at once."""
    h, a = pt.dvector("h"), pt.dvector("a")
    fn = pytensor.function([h, a], pt.owens_t(h, a), mode="ONNX")
    model = fn.vm.jit_fn.model
    assert "Loop" not in {node.op_type for node in ir_nodes(model.graph)}
    assert sum(node.op_type == "If" for node in model.graph) >= 6
    # (h, a) in a region of each method: T1, T2, T3, T4, T5, T6.
    h_value = np.array([0.01, 6.0, 5.0, 2.0, 3.0, 1.0])
    a_value = np.array([0.5, 0.01, 0.999999, 0.2, 0.9999999, 0.999995])
    expected = sp.owens_t(h_value, a_value)
    for i in range(6):
        np.testing.assert_allclose(
            fn(h_value[i : i + 1], a_value[i : i + 1]), expected[i : i + 1], rtol=1e-14
        )
    np.testing.assert_allclose(fn(h_value, a_value), expected, rtol=1e-14)


def ir_nodes(graph):
    for node in graph:
        yield node
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                yield from ir_nodes(attr.as_graph())
