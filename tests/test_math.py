import numpy as np
import pytensor.tensor as pt
import pytest

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("axis", [None, 0, (0, 2), -1, ()])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int8", "int64", "uint8", "uint32"])
def test_reductions(axis, dtype, rng, opset):
    x = pt.tensor3("x", dtype=dtype)
    xv = rng.integers(0, 4, size=(2, 3, 4)).astype(dtype)
    outputs = [reduce(x, axis=axis) for reduce in (pt.sum, pt.prod, pt.max, pt.min)]
    compare_onnx_and_py([x], outputs, [xv], opset=opset)


@pytest.mark.parametrize("reduce", [pt.sum, pt.prod, pt.all, pt.any, pt.max, pt.min])
def test_bool_reductions(reduce, rng):
    x = pt.matrix("x", dtype="bool")
    compare_onnx_and_py([x], reduce(x, axis=1), [rng.integers(0, 2, size=(3, 2)).astype(bool)])


@pytest.mark.parametrize("reduce", [pt.all, pt.any])
def test_all_any_of_numbers(reduce):
    x = pt.vector("x")
    compare_onnx_and_py([x], reduce(x), [np.array([0.0, np.nan, 2.0])])


def test_max_min_propagate_nan_like_numpy():
    x = pt.matrix("x")
    xv = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]])
    compare_onnx_and_py([x], [pt.max(x, axis=1), pt.min(x, axis=1), pt.max(x)], [xv])


def test_sum_and_prod_of_empty_and_size_one(opset):
    x = pt.matrix("x")
    compare_onnx_and_py([x], [x.sum(axis=0), x.prod(axis=1), x.sum()], [np.zeros((0, 3))], opset=opset)
    compare_onnx_and_py([x], [x.sum(axis=0), x.prod(axis=1)], [np.full((1, 1), 2.5)])


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), (1, 2)])
@pytest.mark.parametrize("dtype", ["float64", "int16", "bool"])
def test_argmax_argmin(axis, dtype, rng, opset):
    x = pt.tensor3("x", dtype=dtype)
    xv = rng.integers(0, 3, size=(2, 3, 4)).astype(dtype)
    outputs = [pt.argmax(x, axis=axis), pt.argmax(x, axis=axis, keepdims=True)]
    if dtype != "bool":
        outputs.append(pt.argmin(x, axis=axis))
    compare_onnx_and_py([x], outputs, [xv], opset=opset)


@pytest.mark.parametrize(
    "shapes", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((0, 3), (3, 2))]
)
@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"), ("int8", "int8"), ("int32", "float32")])
def test_dot(shapes, dtypes, rng, opset):
    x = pt.tensor("x", dtype=dtypes[0], shape=(None,) * len(shapes[0]))
    y = pt.tensor("y", dtype=dtypes[1], shape=(None,) * len(shapes[1]))
    xv = rng.integers(-3, 4, size=shapes[0]).astype(dtypes[0])
    yv = rng.integers(-3, 4, size=shapes[1]).astype(dtypes[1])
    compare_onnx_and_py([x, y], [pt.dot(x, y), x @ y], [xv, yv], opset=opset)
