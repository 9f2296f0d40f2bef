import numpy as np
import pytensor.tensor as pt
import pytest
from pytensor.tensor.basic import MakeVector

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool"])
def test_alloc(dtype, opset):
    v = pt.vector("v", dtype=dtype)
    n = pt.scalar("n", dtype="int64")
    outputs = [pt.alloc(v, n, v.shape[0]), pt.alloc(pt.constant(1, dtype=dtype), n), pt.zeros((n, 2), dtype=dtype)]
    compare_onnx_and_py([v, n], outputs, [np.ones(3, dtype=dtype), np.array(2)], opset=opset)
    compare_onnx_and_py([v, n], outputs, [np.ones(0, dtype=dtype), np.array(0)], opset=opset)


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_make_vector_and_scalar_conversions(dtype):
    a = pt.scalar("a", dtype=dtype)
    b = pt.scalar("b", dtype="int8")
    outputs = [
        MakeVector(dtype)(a, pt.cast(b, dtype)),
        MakeVector(dtype)(),
        pt.stack([a, a * 2]),
        pt.as_tensor(pt.scalar_from_tensor(a)),
    ]
    compare_onnx_and_py([a, b], outputs, [np.array(3, dtype=dtype), np.array(-2, dtype="int8")])


def test_alloc_empty_has_the_right_shape_and_dtype():
    from pytensor.tensor.basic import AllocEmpty

    n = pt.scalar("n", dtype="int64")
    out = AllocEmpty("float32")(n, 3) * 0
    compare_onnx_and_py([n], out, [np.array(4)])
