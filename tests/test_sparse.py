"""Products with a sparse constant (pytensor.sparse's Dot and StructuredDot of a SciPy matrix
known at export): SciPy's sums, to the bit, through mode "ONNX" and the exported file."""

import numpy as np
import pytensor
import pytensor.sparse as psp
import pytensor.tensor as pt
import pytest
import scipy.sparse as sps

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py


def _matrix(fmt, m=5, n=4, density=0.4, dtype="float64"):
    return sps.random(m, n, density=density, format=fmt, random_state=1, dtype=dtype)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_products_of_a_sparse_constant_are_scipys_to_the_bit(fmt, rng):
    a = _matrix(fmt)
    x, v = pt.vector("x"), pt.vector("v")
    m, q = pt.matrix("m"), pt.matrix("q")
    outputs = [
        psp.dot(a, x),
        psp.dot(a, m),
        psp.dot(v, a),
        psp.dot(q, a),
        psp.structured_dot(a, m),
        pytensor.grad((psp.dot(q, a) ** 2).sum(), q),  # a Dot with a's transpose
        pytensor.grad((psp.dot(a, m) ** 2).sum(), m),
    ]
    values = [rng.normal(size=4), rng.normal(size=5), rng.normal(size=(4, 3))]
    values.append(rng.normal(size=(2, 5)))
    compare_onnx_and_py(
        [x, v, m, q],
        outputs,
        values,
        # NaN and inf meet the stored entries only (0 * inf is never computed), empty dims
        more_inputs=[
            [np.array([np.inf, -0.0, np.nan, 1.0]), np.full(5, -np.inf), np.zeros((4, 0))]
            + [np.zeros((0, 5))]
        ],
        rtol=0,
        atol=0,
        expected_ops=["ScatterElements"],
        forbidden_ops=["MatMul"],
    )


@pytest.mark.parametrize(
    "matrix",
    [
        sps.csr_matrix((3, 4)),  # no stored entry
        sps.csr_matrix(([1.0, 2.0, 3.0], [1, 1, 0], [0, 2, 3, 3]), shape=(3, 4)),  # a duplicate
        _matrix("csr", 300, 200, 0.02),
        _matrix("csr", dtype="float32"),
        sps.csr_matrix(np.array([[1, 0, 2, 0], [0, 0, 0, -3]], dtype="int64")),
    ],
    ids=["empty", "duplicate", "large", "float32", "int64"],
)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_stored_entries_and_dtypes_as_scipy(matrix, dtype, rng):
    x = pt.vector("x", dtype=dtype)
    value = (rng.normal(size=matrix.shape[1]) * 4).astype(dtype)
    compare_onnx_and_py([x], psp.dot(matrix, x), [value], rtol=0, atol=0)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_a_sparse_constant_plus_a_dense_matrix_is_scipys(fmt, rng):
    a = _matrix(fmt) + sps.csr_matrix(([0.5], ([0], [0])), shape=(5, 4)).asformat(fmt)
    y, yi = pt.matrix("y"), pt.matrix("yi", dtype="int64")
    compare_onnx_and_py(
        [y, yi],
        [psp.add(a, y), psp.add(yi, a)],
        [rng.normal(size=(5, 4)), rng.integers(-5, 5, (5, 4))],
        more_inputs=[[np.full((5, 4), np.inf), np.zeros((5, 4), "int64")]],
        rtol=0,
        atol=0,
    )
    fn = pytensor.function([y], psp.add(a, y), mode="ONNX")
    with pytest.raises(ValueError, match="Incompatible shapes"):
        fn(np.ones((5, 5)))


def test_operands_of_the_wrong_size_raise_as_in_pytensor(rng):
    x, v = pt.vector("x"), pt.vector("v")
    a = _matrix("csr")
    right = pytensor.function([x], psp.dot(a, x), mode="ONNX")
    left = pytensor.function([v], psp.dot(v, a), mode="ONNX")
    for fn, size in [(right, 3), (right, 5), (left, 4), (left, 6)]:
        with pytest.raises(ValueError, match="dimension mismatch"):
            fn(rng.normal(size=size))


def test_sparse_values_not_known_at_export_are_refused_with_the_way_out(rng):
    x = pt.vector("x")
    variable = psp.csr_matrix("s")
    with pytest.raises(TypeError, match="ONNX has no sparse tensors.*known at export"):
        pytensor.function([variable, x], psp.dot(variable, x), mode="ONNX")
    dense = pt.matrix("d")
    with pytest.raises(TypeError, match="ONNX has no sparse tensors"):
        export_onnx(([dense, x], [psp.dot(psp.csr_from_dense(dense), x)]))

    # A shared one is known at export: export_onnx bakes it.
    a = _matrix("csc")
    shared = pytensor.shared(a, name="W")
    model = export_onnx(pytensor.function([x], psp.dot(shared, x)))
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    value = rng.normal(size=4)
    np.testing.assert_array_equal(session.run(None, {"x": value})[0], a @ value)


def test_a_sparse_shared_variable_in_mode_onnx_is_baked_and_every_change_seen(rng):
    # pm.Data of a SciPy matrix is one: mode "ONNX" bakes it into the model (ONNX Runtime
    # takes no sparse input) and translates again when its value changes.
    shared = pytensor.shared(_matrix("csr"), name="W")
    x, b = pt.vector("x"), pytensor.shared(np.arange(5.0), name="b")
    fn = pytensor.function([x], psp.dot(shared, x) + b, mode="ONNX", updates={b: b + 1})
    value = rng.normal(size=4)
    for step in range(6):  # past mode "ONNX"'s respecialisations: the general model
        matrix = shared.get_value()
        np.testing.assert_array_equal(fn(value), matrix @ value + np.arange(5.0) + step)
        if step % 2:
            shared.set_value(_matrix("csr", 5, 4, 0.6) * (step + 1))  # other entries
        else:
            shared.get_value(borrow=True).data[0] += 1.0  # changed in place
    shared.set_value(_matrix("csc", 5, 3))  # another format and shape: x must follow
    with pytest.raises(ValueError, match="dimension mismatch"):
        fn(value)
    np.testing.assert_array_equal(
        fn(value[:3]), shared.get_value() @ value[:3] + np.arange(5.0) + 6
    )


def test_inner_graphs_read_the_sparse_constants_their_inputs_stand_for(rng):
    # A Scan's step and an OpFromGraph take the sparse matrix as an input; each translation
    # reads the constant outside. A shared one in a function compiled in PyTensor's default
    # mode (in-place Ops in the Scan's step, which PyTensor cannot rebuild with the constant
    # inlined) is baked by export_onnx.
    from pytensor.compile.builders import OpFromGraph

    a = _matrix("csr", 4, 4, 0.5)
    shared = pytensor.shared(a, name="W")
    x = pt.vector("x")
    inner, vector = psp.csr_matrix("inner"), pt.vector("vector")
    product = OpFromGraph([inner, vector], [psp.dot(inner, vector)])
    steps = pytensor.scan(
        lambda h: psp.dot(shared, h) * 0.5 + product(psp.as_sparse_variable(a), h),
        outputs_info=x,
        n_steps=4,
        return_updates=False,
    )
    compare_onnx_and_py([x], steps, [rng.normal(size=4)], rtol=0, atol=0)
    model = export_onnx(pytensor.function([x], steps))
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    value = rng.normal(size=4)
    expected = pytensor.function([x], steps, mode="FAST_COMPILE")(value)
    np.testing.assert_array_equal(session.run(None, {"x": value})[0], expected)
