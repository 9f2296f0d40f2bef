import numpy as np
import pytensor
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
    compare_onnx_and_py(
        [x], [x.sum(axis=0), x.prod(axis=1), x.sum()], [np.zeros((0, 3))], opset=opset
    )
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
@pytest.mark.parametrize(
    "dtypes",
    [("float64", "float64"), ("float32", "float32"), ("int8", "int8"), ("int32", "float32")],
)
def test_dot(shapes, dtypes, rng, opset):
    x = pt.tensor("x", dtype=dtypes[0], shape=(None,) * len(shapes[0]))
    y = pt.tensor("y", dtype=dtypes[1], shape=(None,) * len(shapes[1]))
    xv = rng.integers(-3, 4, size=shapes[0]).astype(dtypes[0])
    yv = rng.integers(-3, 4, size=shapes[1]).astype(dtypes[1])
    compare_onnx_and_py([x, y], [pt.dot(x, y), x @ y], [xv, yv], opset=opset)


@pytest.mark.parametrize(
    "shapes",
    [
        ((3,), (3,)),
        ((2, 3), (3,)),
        ((3,), (3, 4)),
        ((2, 3), (3, 4)),
        ((0, 3), (3, 2)),
        ((2, 0), (0, 3)),
    ],
)
def test_dot_of_booleans_is_numpys(shapes, rng):
    # True where any pair of terms is true (NumPy's boolean dot); it was refused.
    x = pt.tensor("x", dtype="bool", shape=(None,) * len(shapes[0]))
    y = pt.tensor("y", dtype="bool", shape=(None,) * len(shapes[1]))
    values = [rng.random(shape) < 0.3 for shape in shapes]
    compare_onnx_and_py([x, y], [pt.dot(x, y), x @ y], values)
    sparse = [np.zeros(shape, bool) for shape in shapes]
    compare_onnx_and_py([x, y], [pt.dot(x, y), x @ y], sparse)


PY_LINKER = pytensor.compile.mode.Mode(linker="py", optimizer=None)


@pytest.mark.parametrize("reduce", [pt.any, pt.all])
@pytest.mark.parametrize("dtype", ["bool", "int8", "float64"])
def test_any_and_all_of_nothing(reduce, dtype):
    x = pt.matrix("x", dtype=dtype)
    compare_onnx_and_py(
        [x], [reduce(x, axis=1), reduce(x, axis=0), reduce(x)], [np.zeros((2, 0), dtype)]
    )


@pytest.mark.parametrize("reduce", [pt.max, pt.min, pt.argmax, pt.argmin])
@pytest.mark.parametrize("dtype", ["float64", "int64", "bool", "uint8"])
def test_max_min_argmax_of_nothing_raise_like_numpy(reduce, dtype):
    x = pt.matrix("x", dtype=dtype)
    empty = np.zeros((0, 3), dtype)
    fn = pytensor.function([x], [reduce(x, axis=1)], mode="ONNX")
    assert fn(empty)[0].shape == (0,)
    for axis in (0, None):
        fn = pytensor.function([x], reduce(x, axis=axis), mode="ONNX")
        with pytest.raises(ValueError, match="zero-size|empty sequence"):
            fn(empty)
        with pytest.raises(ValueError):
            pytensor.function([x], reduce(x, axis=axis), mode=PY_LINKER)(empty)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_argmax_and_argmin_pick_the_first_nan(axis):
    x = pt.matrix("x")
    value = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, 5.0, -1.0, 2.0], [0.0, 1.0, 2.0, -3.0]])
    compare_onnx_and_py([x], [pt.argmax(x, axis=axis), pt.argmin(x, axis=axis)], [value])
    compare_onnx_and_py([x], [pt.argmax(x, axis=axis), pt.argmin(x, axis=axis)], [value[2:]])


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint64", "uint8", "int8"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_integer_sums_and_products_are_exact_and_wrap(dtype, axis, rng):
    x = pt.matrix("x", dtype=dtype)
    info = np.iinfo(dtype)
    value = np.array(
        [
            [info.max, info.max, 3, 2**53 % (info.max + 1) + 1],
            [info.min, 7, info.max // 3, 5],
            [1, 2, 3, info.max],
        ],
        dtype=dtype,
    )
    outs = [pt.sum(x, axis=axis), pt.prod(x, axis=axis)]
    if dtype in ("int64", "uint64"):  # (CumOp.perform upcasts narrower ints against its type)
        outs += [pt.cumsum(x, axis=0), pt.cumprod(x, axis=1)]
    compare_onnx_and_py([x], outs, [value])
    compare_onnx_and_py([x], outs[:2], [np.zeros((0, 4), dtype)])
    compare_onnx_and_py(
        [x], outs[:2], [rng.integers(info.min, info.max, size=(7, 13), dtype=dtype, endpoint=True)]
    )


def test_int64_sum_above_two_to_the_53():
    x = pt.vector("x", dtype="int64")
    value = np.array([2**53, 1, 1, 2**62, 2**62], dtype="int64")
    fn = pytensor.function([x], [x.sum(), x.prod()], mode="ONNX")
    total, product = fn(value)
    assert total == value.sum() and product == value.prod()


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64", "int8", "int16"])
@pytest.mark.parametrize("inner", [0, 3])
def test_integer_dot_with_any_inner_dim(dtype, inner):
    x = pt.matrix("x", dtype=dtype)
    y = pt.matrix("y", dtype=dtype)
    info = np.iinfo(dtype)
    a = np.full((2, inner), info.max, dtype)
    b = np.full((inner, 3), info.max - 1, dtype)
    compare_onnx_and_py([x, y], pt.dot(x, y), [a, b])


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_uint64_max_min_argmax_over_the_whole_range(axis):
    x = pt.matrix("x", dtype="uint64")
    top = np.iinfo("uint64").max
    value = np.array([[0, top, 2**63], [2**63 - 1, 5, top - 1]], dtype="uint64")
    compare_onnx_and_py(
        [x],
        [
            pt.max(x, axis=axis),
            pt.min(x, axis=axis),
            pt.argmax(x, axis=axis),
            pt.argmin(x, axis=axis),
        ],
        [value],
    )


@pytest.mark.parametrize("axis", [(1,), (0,), (0, 1), None])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_product_without_zeros(axis, dtype):
    """ProdWithoutZeros (the gradient of prod where an input may be 0): the product of the
    nonzero elements, and where a slice has none, the last zero PyTensor's MulWithoutZeros
    keeps (-0.0 included); an empty slice gives 0."""
    from pytensor.tensor.math import ProdWithoutZeros

    x = pt.matrix("x", dtype=dtype)
    rows = [[0, 0, 0], [0, 5, 0], [3, 0, 2], [2, 4, 1.5], [-0.0, 0, -0.0], [0, -0.0, 0]]
    if dtype != "int64":
        rows.append([np.nan, 0, 1])
    values = np.array(rows).astype(dtype)
    _, (got,) = compare_onnx_and_py([x], [ProdWithoutZeros(axis=axis)(x)], [values])
    if axis == (1,):
        if dtype != "int64":
            assert np.signbit(got).tolist()[4:6] == [True, False]
        compare_onnx_and_py([x], [ProdWithoutZeros(axis=axis)(x)], [np.zeros((2, 0), dtype)])


def test_the_gradient_of_a_product_with_zeros(rng):
    x = pt.matrix("x")
    grad = pytensor.grad(pt.prod(x, axis=1).sum(), x)
    values = np.array([[1.0, 2.0, 3.0], [0.0, 2.0, 3.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    compare_onnx_and_py([x], grad, [values])
    compare_onnx_and_py([x], pytensor.grad(pt.prod(x), x), [rng.normal(size=(3, 2))])


def test_reductions_fused_with_an_elemwise(rng):
    """PyTensor's local_careduce_fusion (its C backend's; 2.38's default mode) makes
    CAReduce(Composite([acc, x], [acc + f(x)])) of sum(f(x)): translated as the Elemwise f,
    then the sum (or product). Exporting a default-mode 2.38 function with ``(x ** 2).sum()``
    raised UnsupportedOpError."""
    import pytensor.scalar as ps
    from pytensor.compile.mode import Mode
    from pytensor.tensor.elemwise import CAReduce

    from pt_onnxscript import export_onnx

    def fused(scalar_op, f, axis, acc_dtype, dtype):
        acc, arg = ps.get_scalar_type(acc_dtype)(), ps.get_scalar_type(dtype)()
        out = scalar_op(acc, f(arg))
        if out.type.dtype != acc_dtype:
            out = ps.cast(out, acc_dtype)
        composite = ps.Composite([acc, arg], [out])
        composite.identity, composite.nin, composite.nout = scalar_op.identity, 2, 1
        return CAReduce(
            composite, axis=axis, dtype=acc_dtype, acc_dtype=acc_dtype, upcast_discrete_output=True
        )

    x = pt.matrix("x")
    i = pt.matrix("i", dtype="int32")
    outs = [
        fused(ps.add, ps.sqrt, (1,), "float64", "float64")(x),
        fused(ps.mul, ps.exp, None, "float64", "float64")(x),
        fused(ps.add, ps.sqr, (0,), "int64", "int32")(i),
    ]
    values = [rng.uniform(0.5, 2, size=(3, 4)), rng.integers(-5, 5, size=(3, 4)).astype("int32")]
    expected = [
        np.sqrt(values[0]).sum(1),
        np.exp(values[0]).prod(),
        (values[1].astype("int64") ** 2).sum(0),
    ]
    fn = pytensor.function([x, i], outs, mode=Mode(linker="py", optimizer=None))
    for mode in ("ONNX", None):
        if mode is None:
            import onnxruntime as ort

            session = ort.InferenceSession(export_onnx(fn).SerializeToString())
            got = session.run(None, {"x": values[0], "i": values[1]})
        else:
            got = pytensor.function([x, i], outs, mode=mode)(*values)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype
            np.testing.assert_allclose(g, e, rtol=1e-13)
