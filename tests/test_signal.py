import numpy as np
import pytensor.tensor as pt
import pytest
from pytensor.tensor.signal import convolve1d, convolve2d

from pt_onnxscript.testing import PY_MODE, compare_onnx_and_py, py_reference


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("mode", ["valid", "full", "same"])
def test_convolve_modes_and_batches(dtype, mode, rng):
    x = pt.tensor3("x", dtype=dtype)
    k = pt.tensor("k", dtype=dtype, shape=(1, 3, 2))
    v = pt.matrix("v", dtype=dtype)
    kv = pt.tensor("kv", dtype=dtype, shape=(3,))
    outs = [convolve2d(x, k, mode=mode), convolve1d(v, kv, mode=mode)]
    values = [
        rng.normal(size=(4, 6, 5)).astype(dtype),
        rng.normal(size=(1, 3, 2)).astype(dtype),
        rng.normal(size=(2, 7)).astype(dtype),
        rng.normal(size=3).astype(dtype),
    ]
    compare_onnx_and_py([x, k, v, kv], outs, values)


@pytest.mark.parametrize("mode", ["valid", "full", "same"])
def test_unbatched_convolutions_and_kernels_larger_than_their_input(mode, rng):
    # Unbatched, the mode reaches the Op through ScalarFromTensor; a 'valid' convolution
    # whose kernel is the larger slides the input under it (SciPy and NumPy swap them).
    static = pt.matrix("static", shape=(2, 3))
    x, v = pt.matrix("x"), pt.vector("v")
    k = pt.matrix("k", shape=(3, 4))
    kv = pt.vector("kv", shape=(4,))
    outs = [convolve2d(static, k, mode=mode), convolve2d(x, k, mode=mode)]
    outs.append(convolve1d(v, kv, mode=mode))
    kernels = [rng.normal(size=(3, 4)), rng.normal(size=4)]
    compare_onnx_and_py(
        [static, x, k, v, kv],
        outs,
        [
            rng.normal(size=(2, 3)),
            rng.normal(size=(5, 6)),
            kernels[0],
            rng.normal(size=7),
            kernels[1],
        ],
        more_inputs=[
            [
                rng.normal(size=(2, 3)),
                rng.normal(size=(2, 3)),
                kernels[0],
                rng.normal(size=2),
                kernels[1],
            ],
            [
                rng.normal(size=(2, 3)),
                rng.normal(size=(3, 4)),
                kernels[0],
                rng.normal(size=4),
                kernels[1],
            ],
        ],
    )


def test_valid_sizes_that_fit_neither_way_are_refused_as_by_scipy():
    import pytensor

    message = "one must be at least as large as the other in every dimension"
    k = pt.matrix("k", shape=(3, 3))
    with pytest.raises(ValueError, match=message):
        pytensor.function([k], convolve2d(pt.ones((2, 5)), k, mode="valid"), mode="ONNX")
    x = pt.matrix("x")
    fn = pytensor.function([x, k], convolve2d(x, k, mode="valid"), mode="ONNX")
    with pytest.raises(ValueError, match=message):
        fn(np.ones((2, 5)), np.ones((3, 3)))


def test_a_batch_of_modes_shares_one(rng):
    import pytensor
    from pytensor.tensor.blockwise import Blockwise
    from pytensor.tensor.signal.conv import Convolve2d

    x, k = pt.tensor3("x"), pt.tensor3("k", shape=(2, 3, 3))
    full = pt.vector("full", dtype="bool")
    out = Blockwise(Convolve2d())(x, k, full)
    values = [rng.normal(size=(2, 5, 5)), rng.normal(size=(2, 3, 3))]
    compare_onnx_and_py(
        [x, k, full],
        out,
        [*values, np.array([True, True])],
        more_inputs=[[*values, np.array([False, False])]],
    )
    fn = pytensor.function([x, k, full], out, mode="ONNX")
    with pytest.raises(ValueError, match="not all 'full' or all 'valid'"):
        fn(*values, np.array([True, False]))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients_of_the_cnn_idiom_train_it_in_mode_onnx(dtype, rng):
    """PyTensor's gradients of the channel convolution choose their modes from the inputs'
    sizes, which the pooling's reshape by x.shape hides from its rewrites."""
    import pytensor

    x = pt.tensor4("x", dtype=dtype, shape=(None, 2, 8, 8))
    y = pt.lvector("y")
    w = pt.tensor4("w", dtype=dtype, shape=(4, 2, 3, 3))
    b = pt.vector("b", dtype=dtype, shape=(4,))
    conv = convolve2d(x[:, None], w[None], mode="valid").sum(axis=2) + b[None, :, None, None]
    hidden = pt.maximum(conv, 0)
    pooled = hidden.reshape((x.shape[0], 4, 3, 2, 3, 2)).max(axis=(3, 5))
    logits = pooled.reshape((x.shape[0], -1))
    loss = -pt.special.log_softmax(logits, axis=-1)[pt.arange(y.shape[0]), y].mean()
    grads = pytensor.grad(loss, [x, w, b])
    values = [
        rng.normal(size=(5, 2, 8, 8)).astype(dtype),
        rng.integers(0, 36, 5),
        rng.normal(size=(4, 2, 3, 3)).astype(dtype),
        rng.normal(size=4).astype(dtype),
    ]
    tol = 1e-4 if dtype == "float32" else None
    compare_onnx_and_py([x, y, w, b], [loss, *grads], values, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["valid", "full"])
def test_cnn_idiom_is_one_conv_per_layer(dtype, mode, rng):
    """The channel sum of a batched convolve2d, plus bias and ReLU, then 2x2 max pooling."""
    x = pt.tensor4("x", dtype=dtype, shape=(None, 3, 8, 8))
    w = pt.tensor4("w", dtype=dtype, shape=(4, 3, 3, 3))
    b = pt.vector("b", dtype=dtype, shape=(4,))
    conv = convolve2d(x[:, None], w[None], mode=mode).sum(axis=2) + b[None, :, None, None]
    hidden = pt.maximum(conv, 0)
    side = 3 if mode == "valid" else 5
    pooled = hidden.reshape((x.shape[0], 4, side, 2, side, 2)).max(axis=(3, 5))
    values = [
        rng.normal(size=(5, 3, 8, 8)).astype(dtype),
        rng.normal(size=(4, 3, 3, 3)).astype(dtype),
        rng.normal(size=4).astype(dtype),
    ]
    rtol = 1e-5 if dtype == "float32" else None
    ops = ["Conv", "MaxPool", "Relu"] if dtype == "float32" else ["MaxPool", "Relu"]
    compare_onnx_and_py([x, w, b], pooled, values, expected_ops=ops, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_stacked_convolution_layers_are_each_a_conv(dtype, rng):
    """Two convolve2d layers, the second reading the first's ReLU expanded to a channel axis
    (PyTensor's rewrites move that expansion under the ReLU and merge it with the first
    layer's dropping of its single input channel): each layer is one Conv (float32)."""
    import pytensor

    from pt_onnxscript import export_onnx

    w1 = pytensor.shared(rng.normal(size=(4, 1, 3, 3)).astype(dtype), name="w1")
    w2 = pytensor.shared(rng.normal(size=(5, 4, 3, 3)).astype(dtype), name="w2")
    b2 = pytensor.shared(rng.normal(size=5).astype(dtype), name="b2")
    x = pt.tensor4("x", dtype=dtype, shape=(None, 1, 10, 10))
    h = pt.maximum(convolve2d(x[:, None], w1[None], mode="valid").sum(axis=2), 0)
    h2 = convolve2d(h[:, None], w2[None], mode="full").sum(axis=2) + b2[None, :, None, None]
    out = pt.maximum(h2, 0).sum(axis=(2, 3))
    rtol = 1e-5 if dtype == "float32" else None
    values = [rng.normal(size=(3, 1, 10, 10)).astype(dtype)]
    expected = ["Conv"] if dtype == "float32" else []
    compare_onnx_and_py([x], out, values, expected_ops=expected, rtol=rtol, atol=rtol)
    if dtype == "float32":
        ops = [node.op_type for node in export_onnx(([x], [out])).graph.node]
        assert ops.count("Conv") == 2, ops


def test_pooling_raises_when_the_image_does_not_tile():
    import pytensor

    from pt_onnxscript.rewrites import Pool2d

    x = pt.tensor4("x")
    fn = pytensor.function([x], Pool2d(2, 3, 3)(x), mode="ONNX")
    assert fn(np.ones((1, 1, 6, 6))).shape == (1, 1, 3, 3)
    with pytest.raises(ValueError, match="cannot pool the image into 3 x 3 windows of 2 x 2"):
        fn(np.ones((1, 1, 4, 9)))
    # A size known at export needs no check, and the maximum of -0.0s stays -0.0 (NumPy's).
    y = pt.tensor4("y", shape=(1, 1, 6, 6))
    zeros = pytensor.function([y], Pool2d(2, 3, 3)(y), mode="ONNX")(np.full((1, 1, 6, 6), -0.0))
    assert np.signbit(zeros).all()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_cnn_with_shared_weights_and_pooling_written_with_shapes_exports_lean(dtype, rng):
    """Baked shared weights are constants to PyTensor's rewrites: the kernel's size, and so
    the pooling's tiling written with `h.shape`, are known at export."""
    import onnxruntime as ort
    import pytensor

    from pt_onnxscript import export_onnx

    w = pytensor.shared(rng.normal(size=(4, 1, 3, 3)).astype(dtype), name="w")
    b = pytensor.shared(rng.normal(size=4).astype(dtype), name="b")
    x = pt.tensor4("x", dtype=dtype, shape=(None, 1, 8, 8))
    conv = convolve2d(x[:, None], w[None], mode="valid").sum(axis=2) + b[None, :, None, None]
    h = pt.maximum(conv, 0)
    n, c, rows, cols = h.shape
    pooled = h.reshape((n, c, rows // 2, 2, cols // 2, 2)).max(axis=(3, 5))
    out = pooled.reshape((n, -1))
    model = export_onnx(([x], [out]))
    ops = [node.op_type for node in model.graph.node]
    assert ops.count("MaxPool") == 1
    assert "Shape" not in ops, ops  # the flatten reads its own batch size
    if dtype == "float32":
        assert ops.count("Conv") == 1
        assert len(ops) <= 6, ops
    images = rng.normal(size=(5, 1, 8, 8)).astype(dtype)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = py_reference(pytensor.function([x], out, mode=PY_MODE), images)
    rtol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(session.run(None, {"x": images})[0], expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "bool"])
@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_kernels_of_symbolic_size(dtype, mode, rng):
    """Neither input has a static size: one Loop step per kernel entry (per output entry
    where a 'valid' convolution has fewer, as its gradients do), batched by broadcasting.
    Sizes cover a kernel larger than its input (swapped in 'valid'), equal sizes and 1 x 1."""
    x, k = pt.tensor3("x", dtype=dtype), pt.tensor("k", dtype=dtype, shape=(1, None, None))
    v, kv = pt.matrix("v", dtype=dtype), pt.vector("kv", dtype=dtype)
    # SciPy's method "auto" takes the FFT for the largest sizes here, inexact in float32.
    outs = [convolve2d(x, k, mode=mode, method="direct"), convolve1d(v, kv, mode=mode)]
    if dtype == "bool":  # SciPy's 2-d convolution takes no bools
        outs = outs[1:]

    def values(xs, ks, vs, kvs):  # small integers: sums exact in float32 whatever the order
        return [rng.integers(-3, 4, size=s).astype(dtype) for s in (xs, ks, vs, kvs)]

    compare_onnx_and_py(
        [x, k, v, kv],
        outs,
        values((2, 6, 5), (1, 3, 2), (2, 7), (3,)),
        more_inputs=[
            values((3, 3, 2), (1, 6, 5), (1, 3), (7,)),
            values((2, 4, 4), (1, 4, 4), (3, 5), (5,)),
            values((1, 1, 1), (1, 1, 1), (1, 1), (1,)),
            values((2, 9, 8), (1, 6, 7), (2, 12), (9,)),
        ],
    )


def test_gradients_of_convolutions_of_symbolic_size(rng):
    """PyTensor's gradients of a 'valid' convolution convolve with the output's gradient,
    whose size is known only when it runs (they were refused for a kernel of no static
    size)."""
    import pytensor

    x, k, v, kv = pt.matrix("x"), pt.matrix("k"), pt.vector("v"), pt.vector("kv")
    for mode in ("valid", "full", "same"):
        cost = (convolve2d(x, k, mode=mode) ** 2).sum() + (convolve1d(v, kv, mode=mode) ** 3).sum()
        compare_onnx_and_py(
            [x, k, v, kv],
            pytensor.grad(cost, [x, k, v, kv]),
            [rng.normal(size=s) for s in ((6, 7), (3, 2), (40,), (5,))],
            more_inputs=[[rng.normal(size=s) for s in ((2, 3), (4, 5), (3,), (8,))]],
        )


def test_empty_inputs_as_numpy_and_scipy(rng):
    """NumPy's convolve (so convolve1d in every PyTensor backend but Numba) refuses an empty
    input; a 'valid' 2-d convolution of an empty input inside the kernel is SciPy's m - n + 1
    zeros (it was the 'full' convolution's middle, sliced from -1: one zero)."""
    import pytensor

    v, kv = pt.vector("v"), pt.vector("kv", shape=(3,))
    for mode in ("full", "valid"):
        fn = pytensor.function([v, kv], convolve1d(v, kv, mode=mode), mode="ONNX")
        with pytest.raises(ValueError, match="convolve1d of an empty input"):
            fn(np.zeros(0), np.ones(3))
        np.testing.assert_array_equal(
            fn(np.ones(2), np.ones(3)),
            py_reference(
                pytensor.function([v, kv], [convolve1d(v, kv, mode=mode)], mode=PY_MODE),
                np.ones(2),
                np.ones(3),
            )[0],
        )
    with pytest.raises(ValueError, match="convolve1d of an empty input"):
        pytensor.function([v], convolve1d(v, pt.zeros(0)), mode="ONNX")
    x, k = pt.matrix("x"), pt.matrix("k", shape=(2, 2))
    dynamic = pt.matrix("dynamic")
    compare_onnx_and_py(
        [x, k, dynamic],
        [convolve2d(x, k, mode="valid"), convolve2d(x, dynamic, mode="valid")],
        [np.zeros((0, 0)), rng.normal(size=(2, 2)), rng.normal(size=(2, 3))],
        more_inputs=[[np.zeros((0, 1)), rng.normal(size=(2, 2)), rng.normal(size=(2, 1))]],
    )
