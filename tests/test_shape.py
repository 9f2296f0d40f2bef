import numpy as np
import onnxruntime as ort
import pytensor.tensor as pt
import pytest

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import assert_same, compare_onnx_and_py


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_shape_and_reshape_with_symbolic_dims(dtype, n, opset):
    x = pt.matrix("x", dtype=dtype)
    outputs = [
        x.shape,
        x.shape[0],
        x.reshape((x.shape[0] * x.shape[1],)),
        x.reshape((-1, 2)),
        x.reshape((x.shape[1], x.shape[0])),
        pt.specify_shape(x, (None, 2)),
    ]
    compare_onnx_and_py([x], outputs, [np.ones((n, 2), dtype=dtype)], opset=opset)


def test_reshape_to_zero_size_and_0d():
    x = pt.vector("x")
    s = pt.vector("s", dtype="int64")
    compare_onnx_and_py([x, s], [x.reshape(s, ndim=2)], [np.ones(0), np.array([0, 5])])
    compare_onnx_and_py([x], [x.reshape(())], [np.array([3.0])])


def test_exported_symbolic_batch_runs_for_any_size(tmp_path):
    x = pt.matrix("x", shape=(None, 3))
    out = (x * 2).reshape((x.shape[0], 3, 1)).sum(axis=2) + x.shape[0]
    path = tmp_path / "m.onnx"
    export_onnx(([x], [out]), path, dims={"x": ("batch", 3)})
    session = ort.InferenceSession(str(path))
    for n in (0, 1, 7, 1000):
        xv = np.arange(3.0 * n).reshape(n, 3)
        assert_same(session.run(None, {"x": xv})[0], xv * 2 + n)


@pytest.mark.parametrize("sizes", [(0, -1), (2, 0, -1)])
def test_reshape_to_a_shape_with_0_and_minus_1_is_refused(sizes):
    """NumPy refuses such a reshape for every array (PyTensor's Python backend raises); the
    export failed ONNX's full check, as "a bug in a translation"."""
    from pt_onnxscript import UnsupportedOpError

    x, n = pt.matrix("x"), pt.lscalar("n")
    shape = [n if size == 2 else size for size in sizes]
    with pytest.raises(UnsupportedOpError, match="both 0 and -1"):
        export_onnx(([x, n], [x.reshape(shape)]))
