import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.tensor.special import log_softmax, softmax

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("fn", [softmax, log_softmax])
@pytest.mark.parametrize(
    "axis", [-1, 0, None] + ([(0, 2)] if not pytensor.__version__.startswith("2.") else [])
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_forms(fn, axis, dtype, rng, opset):
    x = pt.tensor3("x", dtype=dtype)
    xv = rng.normal(size=(2, 3, 4)).astype(dtype)
    compare_onnx_and_py([x], fn(x, axis=axis), [xv], opset=opset)


@pytest.mark.parametrize("fn", [softmax, log_softmax])
def test_softmax_extremes_and_empty(fn):
    x = pt.matrix("x")
    xv = np.array([[1e300, -1e300, 0.0], [-np.inf, 0.0, 1.0], [700.0, 710.0, -710.0]])
    compare_onnx_and_py([x], fn(x, axis=-1), [xv], expected_ops=[fn.__name__.title().replace("_", "")])
    compare_onnx_and_py([x], fn(x, axis=-1), [np.zeros((0, 3))])


def test_softmax_gradient(rng):
    x = pt.matrix("x")
    w = pt.matrix("w")
    cost = (softmax(x, axis=-1) * w).sum() + (log_softmax(x, axis=0) * w).sum()
    compare_onnx_and_py([x, w], pytensor.grad(cost, x), [rng.normal(size=(3, 4)), rng.normal(size=(3, 4))])
