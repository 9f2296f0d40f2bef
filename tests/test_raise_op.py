import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.raise_op import Assert, CheckAndRaise

from pt_onnxscript import UnsupportedOpError, export_onnx
from pt_onnxscript.testing import compare_errors_onnx_and_py, compare_onnx_and_py


def test_assert_is_kept_and_raises_with_its_message(tmp_path):
    x = pt.vector("x")
    out = Assert("x must be positive")(x, pt.all(x > 0)) * 2
    compare_onnx_and_py([x], out, [np.array([1.0, 2.0])])
    fn = pytensor.function([x], out, mode="ONNX")
    np.testing.assert_array_equal(fn(np.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(AssertionError, match="x must be positive"):
        fn(np.array([1.0, -2.0]))
    # The exported file fails in ONNX Runtime with the message in the failing node's name.
    export_onnx(([x], [out]), tmp_path / "m.onnx")
    session = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="x must be positive"):
        session.run(None, {"x": np.array([-1.0])})


def test_check_and_raise_keeps_its_exception_type_and_non_bool_conditions():
    x = pt.vector("x")
    n = pt.scalar("n", dtype="int64")
    out = CheckAndRaise(ValueError, "n must be nonzero")(x, n, pt.all(x < 100))
    fn = pytensor.function([x, n], out, mode="ONNX")
    np.testing.assert_array_equal(fn(np.array([-0.0, 1.0]), 3), [-0.0, 1.0])
    assert np.signbit(fn(np.array([-0.0]), 3)[0])
    with pytest.raises(ValueError, match="n must be nonzero"):
        fn(np.array([1.0]), 0)
    with pytest.raises(ValueError, match="n must be nonzero"):
        fn(np.array([200.0]), 1)


def test_a_check_summed_is_checked_after_the_sum():
    """A PyMC log-density sums checked terms: Sum(Check(terms, condition)). The check moves
    after the reduction, so the failure guard holds up a scalar, not a copy of every term; it
    still raises where the condition is false, and a checked value read elsewhere keeps its
    check where it is."""
    x, sigma = pt.vector("x"), pt.scalar("sigma")
    check = CheckAndRaise(ValueError, "sigma > 0")
    terms = -0.5 * (x / sigma) ** 2 - pt.log(sigma)
    logp = check(terms, pt.gt(sigma, 0)).sum()
    values = [np.linspace(-3, 3, 7), np.array(1.5)]
    compare_onnx_and_py([x, sigma], logp, values)
    model = export_onnx(([x, sigma], [logp]))
    shapes = {v.name: v.type.tensor_type.shape for v in model.graph.value_info}
    guarded = [node.input[0] for node in model.graph.node if node.op_type == "Expand"]
    assert len(guarded) == 1 and len(shapes[guarded[0]].dim) == 0  # the sum, not the terms
    fn = pytensor.function([x, sigma], logp, mode="ONNX")
    np.testing.assert_allclose(fn(*values), pytensor.function([x, sigma], logp)(*values))
    with pytest.raises(ValueError, match="sigma > 0"):
        fn(values[0], np.array(-1.0))
    # Read elsewhere too (and by a max): the terms stay checked where they are.
    both = [check(terms, pt.gt(sigma, 0)).sum(), check(terms, pt.gt(sigma, 0)).max()]
    both.append(check(terms, pt.gt(sigma, 0)) * 2)
    compare_onnx_and_py([x, sigma], both, values)
    fn = pytensor.function([x, sigma], both, mode="ONNX")
    with pytest.raises(ValueError, match="sigma > 0"):
        fn(values[0], np.array(-1.0))


def test_constant_false_assert_fails_at_export():
    x = pt.vector("x")
    out = Assert("never true")(x, pt.constant(False))
    with pytest.raises(AssertionError, match="never true"):
        export_onnx(([x], [out]))
    with pytest.raises(AssertionError, match="never true"):
        pytensor.function([x], out, mode="ONNX")


def test_assert_inside_scan_raises():
    x = pt.vector("x")
    ys = pytensor.scan(
        lambda v: Assert("v is small")(v * 2, v < 10), sequences=[x], return_updates=False
    )
    fn = pytensor.function([x], ys, mode="ONNX")
    np.testing.assert_array_equal(fn(np.array([1.0, 2.0])), [2.0, 4.0])
    with pytest.raises(AssertionError, match="v is small"):
        fn(np.array([1.0, 20.0]))


def test_cholesky_on_error_raise():
    a = pt.matrix("a")
    with pytest.warns(FutureWarning):
        out = pt.linalg.cholesky(a, on_error="raise")
    fn = pytensor.function([a], out, mode="ONNX")
    np.testing.assert_allclose(fn(np.eye(2) * 4), np.eye(2) * 2)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        fn(np.array([[1.0, 2.0], [2.0, 1.0]]))


def test_unsupported_error_is_importable():
    assert issubclass(UnsupportedOpError, NotImplementedError)


def test_specify_shape_is_checked():
    x = pt.matrix("x")
    out = pt.specify_shape(x, (None, 3)) + 1
    fn = pytensor.function(
        [x], out, mode=pytensor.compile.mode.Mode(linker=pt_mode().linker, optimizer=None)
    )
    np.testing.assert_array_equal(fn(np.zeros((2, 3))), np.ones((2, 3)))
    with pytest.raises(AssertionError, match=r"SpecifyShape: .* specified, \(None, 3\)"):
        fn(np.zeros((2, 4)))


def test_specify_shape_message_names_symbolic_sizes_and_is_the_same_in_every_export():
    """The message is part of the model: no object addresses, so files are reproducible."""
    x, n = pt.matrix("x"), pt.lscalar("n")
    out = pt.specify_shape(x, (n, None)) + 1
    fn = pytensor.function(
        [x, n], out, mode=pytensor.compile.mode.Mode(linker=pt_mode().linker, optimizer=None)
    )
    with pytest.raises(AssertionError, match=r"specified, \(n, None\)"):
        fn(np.zeros((2, 4)), 3)
    first, second = (export_onnx(([x, n], [out])).SerializeToString() for _ in range(2))
    assert first == second and b" at 0x" not in first


def pt_mode():
    from pt_onnxscript import onnx_mode

    return onnx_mode()


def test_split_sizes_and_batched_dot_batches_are_checked():
    x = pt.vector("x")
    sizes = pt.vector("sizes", dtype="int64")
    a, b = pt.split(x, sizes, n_splits=2)
    fn = pytensor.function([x, sizes], [a, b], mode="ONNX")
    _, second = fn(np.arange(5.0), np.array([2, 3]))
    np.testing.assert_array_equal(second, [2.0, 3.0, 4.0])
    for bad in ([2, 2], [6, -1]):
        with pytest.raises(ValueError, match="Split sizes"):
            fn(np.arange(5.0), np.array(bad))

    u = pt.tensor3("u")
    v = pt.tensor3("v")
    with pytest.warns(FutureWarning):
        out = pt.blas.batched_dot(u, v)
    fn = pytensor.function([u, v], out, mode="ONNX")
    assert fn(np.ones((2, 3, 4)), np.ones((2, 4, 5))).shape == (2, 3, 5)
    # PyTensor's BatchedDot raises a TypeError (its JAX backend's tests ask the same), the
    # Blockwise Dot it was before the rewrites (what the Python linker runs) a ValueError.
    for batches in [(2, 1), (2, 3)]:
        values = [np.ones((batches[0], 3, 4)), np.ones((batches[1], 4, 5))]
        ours, _ = compare_errors_onnx_and_py([u, v], out, values)
        assert isinstance(ours, TypeError) and "same size in axis 0" in str(ours)
