import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.tensor.blas import (
    _dot22,
    _dot22scalar,
    batched_dot,
    gemm_no_inplace,
    gemv_no_inplace,
    ger,
)

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import assert_same, compare_onnx_and_py


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_blas_ops(dtype, rng, opset):
    A, B, C = (pt.matrix(n, dtype=dtype) for n in "ABC")
    x, y = pt.vector("x", dtype=dtype), pt.vector("y", dtype=dtype)
    a, b = pt.scalar("a", dtype=dtype), pt.scalar("b", dtype=dtype)
    outputs = [
        gemv_no_inplace(y, a, A, x, b),
        gemm_no_inplace(C, a, A, B, b),
        ger(A, a, y, x),
        _dot22(A, B),
        _dot22scalar(A, B, a),
    ]
    values = [
        rng.normal(size=s).astype(dtype) for s in [(2, 3), (3, 3), (2, 3), (3,), (2,), (), ()]
    ]
    compare_onnx_and_py([A, B, C, x, y, a, b], outputs, values, opset=opset)


def test_gemv_with_zero_beta_does_not_read_y(rng):
    A, x, y = pt.matrix("A"), pt.vector("x"), pt.vector("y")
    out = gemv_no_inplace(y, pt.constant(2.0), A, x, pt.constant(0.0))
    values = [rng.normal(size=(2, 3)), rng.normal(size=3), np.array([np.nan, np.inf])]
    compare_onnx_and_py([A, x, y], out, values)


@pytest.mark.filterwarnings("ignore:batched_dot is deprecated")  # its Op is still PyTensor's
def test_batched_dot(rng):
    x, y = pt.tensor3("x"), pt.tensor3("y")
    compare_onnx_and_py(
        [x, y], batched_dot(x, y), [rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))]
    )


def test_export_function_compiled_with_c_blas(tmp_path, rng):
    if not pytensor.__version__.startswith("2."):
        pytest.skip("PyTensor 3 compiles to Numba by default, without BLAS ops")
    A, v = pt.matrix("A"), pt.vector("v")
    f = pytensor.function([A, v], [A @ v, A @ A.T])
    ops = {type(node.op).__name__ for node in f.maker.fgraph.apply_nodes}
    assert ops & {"Gemv", "CGemv", "Dot22"}
    path = tmp_path / "blas.onnx"
    export_onnx(f, path)
    import onnxruntime as ort

    Av, vv = rng.normal(size=(3, 3)), rng.normal(size=3)
    got = ort.InferenceSession(str(path)).run(None, {"A": Av, "v": vv})
    for g, e in zip(got, f(Av, vv)):
        assert_same(g, e)


def test_gemv_of_a_transposed_matrix(rng):
    """Gemv of a transposed matrix is MatMul(Transpose(A), x) of a vector x, which ONNX
    Runtime's MatmulTransposeFusion gets wrong (QUIRKS["matmul_transpose_vector"]): written
    MatMul(x, A). As in PyTensor 2.38's C graph of the gradient of a least-squares loss."""
    from pytensor.compile.mode import Mode

    A, x, y = pt.matrix("A"), pt.vector("x"), pt.vector("y")
    b = pt.tensor3("b")
    outs = [
        gemv_no_inplace(y, pt.constant(2.0), A.T, x, pt.constant(0.5)),
        pt.matmul(b.mT, x),
    ]
    values = [rng.normal(size=(5, 4)), rng.normal(size=5), rng.normal(size=4)]
    values.append(rng.normal(size=(2, 5, 4)))
    compare_onnx_and_py([A, x, y, b], outs, values)
    # As written (no rewrite moves the transpose), exported and run by a new session.
    fn = pytensor.function([A, x, y, b], outs, mode=Mode(linker="py", optimizer=None))
    model = export_onnx(fn)
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for got, expected in zip(session.run(None, dict(zip("Axyb", values))), fn(*values)):
        assert_same(got, expected)
    v, w = pt.vector("v"), pt.vector("w")
    grad = pytensor.grad(((A @ v - w) ** 2).sum(), v)  # 2.38's default mode: Gemv of A.T
    f = pytensor.function([A, v, w], grad)
    session = ort.InferenceSession(export_onnx(f).SerializeToString())
    args = [values[0], rng.normal(size=4), rng.normal(size=5)]
    assert_same(session.run(None, dict(zip("Avw", args)))[0], f(*args))
