import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scan import scan

from pt_onnxscript import (
    ExecutionError,
    IndexOutOfBoundsError,
    UnsupportedOpError,
    export_onnx,
)
from pt_onnxscript.testing import PY_MODE, compare_onnx_and_py


def test_basic_forms(rng, opset):
    x = pt.tensor3("x")
    i, j = pt.lscalar("i"), pt.lscalar("j")
    outs = [x[1:-1:2], x[::-1], x[i:j], x[-3], x[None, :, 0], x[:, 2, ::-2], x[-10::-1], x[j:i:-1]]
    value = rng.normal(size=(5, 4, 3))
    compare_onnx_and_py([x, i, j], outs, [value, np.array(1), np.array(4)], opset=opset)
    compare_onnx_and_py([x, i, j], outs, [value, np.array(-9), np.array(-2)], opset=opset)


def test_symbolic_step_and_bounds(rng):
    x = pt.vector("x")
    i, j, k = pt.lscalar("i"), pt.lscalar("j"), pt.lscalar("k")
    outs = [x[i:j:k], x[::k], x[i::k], x[:j:k]]
    value = rng.normal(size=6)
    for bounds in [(1, 5, 2), (-1, -7, -1), (-20, 3, -1), (20, -20, -3), (0, 0, 1)]:
        compare_onnx_and_py([x, i, j, k], outs, [value, *map(np.array, bounds)])


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint16", "bool"])
def test_dtypes_and_index_dtypes(dtype, rng):
    x = pt.matrix("x", dtype=dtype)
    i = pt.scalar("i", dtype="int8")
    idx = pt.vector("idx", dtype="uint8")
    value = (rng.normal(size=(4, 3)) * 10).astype(dtype)
    outs = [x[i], x[1:i], x[idx], x[idx, i], x[:, idx]]
    compare_onnx_and_py(
        [x, i, idx], outs, [value, np.array(-2, "int8"), np.array([2, 0, 2], "uint8")]
    )


def test_advanced_forms(rng, opset):
    x = pt.tensor3("x")
    idx = pt.lvector("idx")
    idx2 = pt.lmatrix("idx2")
    outs = [
        x[idx],
        x[idx2, :, idx],  # separated arrays: broadcast dims first
        x[:, idx2, idx],  # adjacent arrays: broadcast dims in place
        x[idx, None, 1:],
        x[1:, idx],
        x[idx, 1:, idx],
        x[idx, -1],
        x[-1, :, idx],
        x[idx2],
    ]
    values = [
        rng.normal(size=(4, 3, 4)),
        np.array([0, -1, 2, 2]),
        np.array([[1, 0, 1, 0], [-3, 2, 0, 1]]),
    ]
    compare_onnx_and_py([x, idx, idx2], outs, values, opset=opset)


def test_empty_index_arrays_and_empty_tensors(rng):
    x = pt.matrix("x")
    idx = pt.lvector("idx")
    outs = [x[idx], x[:, idx], x[idx, idx], x[x > 0]]
    compare_onnx_and_py([x, idx], outs, [rng.normal(size=(3, 4)), np.zeros(0, "int64")])
    compare_onnx_and_py([x, idx], outs, [np.zeros((0, 4)), np.zeros(0, "int64")])


def test_boolean_masks(rng, opset):
    x = pt.tensor3("x")
    m = pt.matrix("m")
    outs = [x[x > 0], m[m > 0], x[m > 0], x[:, m[0] > 0], x[m[:, 0] > 0, 1:], m[m > 0].sum()]
    value = rng.normal(size=(3, 4, 2))
    compare_onnx_and_py([x, m], outs, [value, value[:, :, 0]], opset=opset)


def test_boolean_mask_of_the_wrong_shape_raises():
    x = pt.matrix("x")
    mask = pt.vector("mask", dtype="bool")
    fn = pytensor.function([x, mask], x[mask], mode="ONNX")
    with pytest.raises(Exception, match="Gather"):
        fn(np.ones((3, 2)), np.array([True, False]))


def test_out_of_range_index_raises():
    x = pt.vector("x")
    i = pt.lscalar("i")
    idx = pt.lvector("idx")
    fn = pytensor.function([x, i, idx], [x[i], x[idx]], mode="ONNX")
    fn(np.ones(3), np.array(-3), np.array([2]))
    with pytest.raises(IndexError, match="out of data bounds|Out of range value"):
        fn(np.ones(3), np.array(3), np.array([2]))
    with pytest.raises(IndexError, match="out of data bounds|Out of range value"):
        fn(np.ones(3), np.array(0), np.array([-4]))


@pytest.mark.parametrize(
    "index",
    [
        lambda x, m, i: x[i],  # AdvancedSubtensor1
        lambda x, m, i: m[i, i],  # AdvancedSubtensor
        lambda x, m, i: m[:, i],
        lambda x, m, i: pt.set_subtensor(x[i], 1.0),
        lambda x, m, i: pt.inc_subtensor(x[i], 1.0),
        lambda x, m, i: pt.inc_subtensor(m[i, 1:], 1.0),
        lambda x, m, i: pt.take(m, i, axis=1),
    ],
    ids=["take_rows", "pairs", "columns", "set", "inc", "inc_rows", "take_axis"],
)
@pytest.mark.parametrize("bad", [7, -8])
def test_an_index_out_of_bounds_is_an_index_error_as_in_pytensor(index, bad):
    """PyTensor's modes raise IndexError for an index out of bounds; mode "ONNX" raises an
    ExecutionError that is one too (IndexOutOfBoundsError), naming the node."""
    x, m, i = pt.dvector("x"), pt.dmatrix("m"), pt.lvector("i")
    out = index(x, m, i)
    values = [np.arange(5.0), np.arange(20.0).reshape(5, 4), np.array([0, bad])]
    with pytest.raises(IndexError):
        pytensor.function([x, m, i], out, on_unused_input="ignore", mode=PY_MODE)(*values)
    fn = pytensor.function([x, m, i], out, on_unused_input="ignore", mode="ONNX")
    with pytest.raises(IndexOutOfBoundsError, match="PyTensor op: Advanced") as raised:
        fn(*values)
    assert isinstance(raised.value, IndexError) and isinstance(raised.value, ExecutionError)
    # The way out is the user's indices, not a bug report; no C++ from ONNX Runtime.
    message = str(raised.value)
    assert "check the indices given." in message and "please report" not in message
    assert "onnxruntime::" not in message
    fn(values[0], values[1], np.array([0, 3]))  # in bounds: runs


def test_other_failures_are_no_index_errors():
    """A failure guard's Gather (inv's and det's of a non-square matrix raise NumPy's
    LinAlgError, as PyTensor's ValueError) or another operator failing is no IndexError."""
    x, k, a = pt.dvector("x"), pt.lscalar("k"), pt.dmatrix("a")
    for ins, out, values, error in [
        ([x, k], x.reshape((k, -1)), [np.ones(5), np.array(2)], ExecutionError),
        ([a], pt.linalg.inv(a), [np.ones((2, 3))], np.linalg.LinAlgError),
        ([a], pt.linalg.det(a), [np.ones((2, 3))], np.linalg.LinAlgError),
    ]:
        fn = pytensor.function(ins, out, mode="ONNX")
        with pytest.raises(error) as raised:
            fn(*values)
        assert not isinstance(raised.value, IndexError)


def test_onnx_runtimes_internals_stay_out_of_execution_errors():
    """ONNX Runtime's source location, C++ function and failed assertion are cut from what
    it says; its message stays."""
    x, y = pt.dvector("x"), pt.dvector("y")
    fn = pytensor.function([x, y], x + y, mode="ONNX")
    with pytest.raises(ExecutionError) as raised:
        fn(np.zeros(3), np.zeros(4))
    said = next(line for line in str(raised.value).splitlines() if "ONNX Runtime said" in line)
    assert said.endswith("Attempting to broadcast an axis by a dimension other than 1. 3 by 4")
    assert "onnxruntime::" not in said and "was false" not in said


def test_an_index_out_of_bounds_in_a_scan_step_is_an_index_error():
    x, i = pt.dvector("x"), pt.lvector("i")
    ys = scan(
        lambda j, acc, x: acc + x[j], sequences=[i], outputs_info=[pt.zeros(())], non_sequences=[x]
    )
    fn = pytensor.function([x, i], ys, mode="ONNX")
    np.testing.assert_array_equal(fn(np.arange(3.0), np.array([2, 1])), [2.0, 3.0])
    with pytest.raises(IndexOutOfBoundsError, match="Scan"):
        fn(np.arange(3.0), np.array([2, 5]))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "uint8", "bool"])
def test_set_and_inc_with_repeated_indices(dtype, rng, opset):
    x = pt.matrix("x", dtype=dtype)
    y = pt.vector("y", dtype=dtype)
    idx = pt.lvector("idx")
    outs = [
        pt.set_subtensor(x[idx], y),
        pt.inc_subtensor(x[idx], y),
        pt.inc_subtensor(x[idx, idx], y[0]),
        pt.set_subtensor(x[idx, -1], y[:4]),
        pt.inc_subtensor(x[idx, 1:], y[1:], ignore_duplicates=True),
        pt.inc_subtensor(x[:, idx], y[0]),
    ]
    value = (rng.normal(size=(5, 4)) * 5).astype(dtype)
    y_value = (np.arange(4) + 1).astype(dtype)
    compare_onnx_and_py([x, y, idx], outs, [value, y_value, np.array([1, -4, 3, 1])], opset=opset)


def test_writes_on_a_vector_read_by_gather_elements(rng):
    """ONNX Runtime's Gather copies a vector element by element (several times slower than
    GatherElements on thousands of indices): writes at index arrays into a vector read
    their positions and old values with GatherElements, and are exact either way."""
    x, y, idx = pt.vector("x"), pt.vector("y"), pt.lvector("idx")
    outs = [
        pt.set_subtensor(x[idx], y),
        pt.inc_subtensor(x[idx], y),
        pt.inc_subtensor(x[idx], y, ignore_duplicates=True),
    ]
    values = [rng.normal(size=6), rng.normal(size=4), np.array([1, -4, 3, 1])]
    compare_onnx_and_py([x, y, idx], outs, values)
    for out in outs:
        model = export_onnx(([x, y, idx], [out]))
        # (A check's Gather of an empty row, which raises when y does not fit, reads no x.)
        reads = {node.op_type for node in model.graph.node if "check:" not in node.name}
        assert "Gather" not in reads


def test_basic_set_and_inc(rng):
    x = pt.tensor3("x")
    i = pt.lscalar("i")
    y = pt.scalar("y")
    outs = [
        pt.set_subtensor(x[1:, i], y),
        pt.inc_subtensor(x[::-1, :, 0], y),
        pt.inc_subtensor(x[-1], x[0]),
        pt.set_subtensor(x[i:, ::2, 1], pt.ones(2)),
    ]
    compare_onnx_and_py([x, i, y], outs, [rng.normal(size=(3, 4, 2)), np.array(-2), np.array(0.5)])


def test_a_value_that_does_not_fit_the_part_written_raises(rng):
    """ONNX's Expand broadcasts both ways: a value longer than a part of length 1 made x
    longer (x[1:2] = [0, 1, 2] gave 6 elements), and a mask with fewer true entries than
    values took the first; PyTensor raises ValueError, and so does the translation. A value
    that fits, or broadcasts, is written as before."""
    x, y = pt.vector("x"), pt.vector("y")
    m, w = pt.matrix("m"), pt.matrix("w")
    a, b = pt.lscalar("a"), pt.lscalar("b")
    writes = [
        ([x, y, a, b], pt.set_subtensor(x[a:b], y), [np.zeros(4), np.arange(3.0), 1, 2]),
        ([x, y, a, b], pt.inc_subtensor(x[a:b], y), [np.zeros(4), np.arange(3.0), 1, 2]),
        ([m, w, a, b], pt.set_subtensor(m[:, a:b], w), [np.zeros((4, 2)), np.ones((4, 3)), 0, 1]),
        ([m, y, a], pt.set_subtensor(m[a], y), [np.zeros((4, 1)), np.arange(3.0), 1]),
        ([x, y], pt.set_subtensor(x[x > 0], y), [np.array([0.0, 1.0, 0.0]), np.arange(3.0)]),
    ]
    for inputs, out, values in writes:
        fn = pytensor.function(inputs, out, mode="ONNX")
        with pytest.raises(ValueError, match="does not broadcast to the shape of the part"):
            fn(*values)
    fitting = [
        pt.set_subtensor(x[a:b], y[:2]),
        pt.inc_subtensor(x[a:b], y[:1]),
        pt.set_subtensor(x[x > 0], y[: (x > 0).sum()]),
    ]
    compare_onnx_and_py(
        [x, y, a, b], fitting, [rng.normal(size=4), rng.normal(size=4), np.array(1), np.array(3)]
    )


def test_mask_set_and_inc(rng):
    x = pt.matrix("x")
    outs = [
        pt.set_subtensor(x[x > 0], 0.0),
        pt.inc_subtensor(x[x < 0], 1.0),
        pt.set_subtensor(x[x[:, 0] > 0, 1:], -1.0),
    ]
    compare_onnx_and_py([x], outs, [rng.normal(size=(4, 3))])


def test_gradient_of_indexing_accumulates(rng):
    w = pt.vector("w")
    group = pt.lvector("group")
    x = pt.matrix("x")
    loss = (w[group] ** 2).sum() + (x[group, ::-1] * x[1:, :].sum()).sum()
    grads = pytensor.grad(loss, [w, x])
    values = [rng.normal(size=3), np.array([0, 2, 2, 1, 0, 2]), rng.normal(size=(3, 2))]
    compare_onnx_and_py([w, group, x], grads, values)


def test_symbolic_slices_among_index_arrays(rng):
    x = pt.tensor3("x")
    idx = pt.lvector("idx")
    i, j = pt.lscalar("i"), pt.lscalar("j")
    outs = [x[idx, i:j], x[i:, idx, ::j], pt.inc_subtensor(x[idx, :j], 1.0)]
    values = [rng.normal(size=(4, 5, 3)), np.array([3, 0, 3]), np.array(1), np.array(-1)]
    compare_onnx_and_py([x, idx, i, j], outs, values)


def test_symbolic_batch_size(rng):
    """One exported model serves every batch size, shape arithmetic included."""
    x = pt.matrix("x", shape=(None, 3))
    n = x.shape[0]
    out = [x[n // 2 :], x[n - 1 :], pt.set_subtensor(x[:, 0], n)]
    for rows in [0, 1, 7, 1000]:
        compare_onnx_and_py([x], out, [rng.normal(size=(rows, 3))])


bounds = st.none() | st.integers(-7, 7)
slices = st.builds(slice, bounds, bounds, st.none() | st.integers(-3, 3).filter(bool))


@settings(max_examples=30, deadline=None)
@given(index=st.tuples(slices, slices | st.integers(-3, 2)), data=st.data())
def test_random_slices(index, data):
    x = pt.matrix("x", shape=(None, 3))
    rows = data.draw(st.integers(0, 6))
    compare_onnx_and_py(
        [x], [x[index], pt.inc_subtensor(x[index], 1.5)], [np.arange(rows * 3.0).reshape(rows, 3)]
    )


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_random_index_arrays(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=2, max_size=3))
    x = pt.tensor("x", shape=(None,) * len(shape))
    picked = data.draw(
        st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True)
    )
    index_shape = data.draw(st.lists(st.integers(0, 3), max_size=2))
    index, values = [slice(None)] * len(shape), []
    for axis in sorted(picked):
        ix = pt.tensor(f"i{axis}", dtype="int64", shape=(None,) * len(index_shape))
        index[axis] = ix
        values.append(
            np.asarray(
                data.draw(
                    st.lists(
                        st.integers(-shape[axis], shape[axis] - 1),
                        min_size=int(np.prod(index_shape)),
                        max_size=int(np.prod(index_shape)),
                    )
                ),
                dtype="int64",
            ).reshape(index_shape)
        )
    inputs = [x, *(i for i in index if not isinstance(i, slice))]
    x_value = np.arange(np.prod(shape), dtype="float64").reshape(shape)
    outs = [x[tuple(index)], pt.inc_subtensor(x[tuple(index)], 1.0)]
    compare_onnx_and_py(inputs, outs, [x_value, *values])


def test_named_batch_dim_survives_indexing(tmp_path):
    from pt_onnxscript import export_onnx

    x = pt.matrix("x", shape=(None, 3))
    out = pt.inc_subtensor(x[:, 0], x[:, 1:].sum(axis=1) * x.shape[0])
    model = export_onnx(([x], [out]), tmp_path / "m.onnx", dims={"x": ("batch", 3)})
    dims = [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 3]


@pytest.mark.parametrize("x_dtype", ["int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("y_dtype", ["float64", "float32"])
def test_integer_x_incremented_by_floats_like_numpy(x_dtype, y_dtype):
    x = pt.vector("x", dtype=x_dtype)
    y = pt.vector("y", dtype=y_dtype)
    idx = pt.vector("idx", dtype="int64")
    outs = [pt.inc_subtensor(x[idx], y), pt.set_subtensor(x[idx], y), pt.inc_subtensor(x[1], y[0])]
    values = [
        np.array([5, 5, 1], x_dtype),
        np.array([-0.25, -0.25, 0.75], y_dtype),
        np.array([0, 0, 2]),
    ]
    compare_onnx_and_py([x, y, idx], outs, values)
    # Where PyTensor raises NumPy's casting error, export refuses before building.
    for out in [
        pt.inc_subtensor(x[idx], y, ignore_duplicates=True),
        pt.inc_subtensor(x[:2], y[:2]),
    ]:
        with pytest.raises(UnsupportedOpError, match="same_kind"):
            export_onnx(([x, y, idx], [out]))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_writes_and_cumprod_with_zero_size_dims(shape):
    x = pt.matrix("x")
    idx = pt.vector("idx", dtype="int64")
    outs = [
        pt.inc_subtensor(x[:, idx], 1.0),
        pt.set_subtensor(x[idx], 2.0),
        pt.cumprod(x, axis=0),
        pt.cumprod(x, axis=1),
    ]
    compare_onnx_and_py([x, idx], outs, [np.zeros(shape), np.zeros(0, "int64")])


def test_float16_accumulation_is_refused_before_building():
    x = pt.vector("x", dtype="float16")
    idx = pt.vector("idx", dtype="int64")
    v = pt.vector("v", dtype="float64")
    with pytest.raises(UnsupportedOpError) as info:
        export_onnx(([x, idx, v], [pt.inc_subtensor(x[idx], v), pt.cumsum(x)]))
    assert "float16" in str(info.value) and "cumulative sum of float16" in str(info.value)


def test_a_box_on_one_axis_is_concatenated_not_masked(rng):
    """A box that slices one axis (a Scan's buffer with its first rows set) is x's part
    before it, the box set or incremented, and x's part after it, concatenated: a Where and
    two Pads over the whole of x took 18% of a 1,000-step Scan of 100-vectors."""
    x, row, columns = pt.matrix("x"), pt.matrix("row"), pt.matrix("columns")
    outs = [pt.set_subtensor(x[:1], row), pt.inc_subtensor(x[:, 2:4], columns)]
    model = export_onnx(([x, row, columns], outs))
    ops = {node.op_type for node in model.graph.node}
    assert not ops & {"Where", "Pad"}, ops
    values = [rng.normal(size=(1000, 5)), rng.normal(size=(1, 5)), rng.normal(size=(1000, 2))]
    compare_onnx_and_py([x, row, columns], outs, values)


@pytest.mark.parametrize("dtype", ["float64", "float32", "int32", "bool"])
def test_writes_on_a_box_of_slices(dtype, rng):
    """set/inc_subtensor on slices of step 1 (a box: y padded to x's shape and added, or
    written by Where): negative, out-of-range, empty and symbolic bounds, y broadcast; a float
    x keeps its -0.0 and NaN outside the box."""
    x = pt.matrix("x", dtype=dtype)
    y = pt.matrix("y", dtype=dtype)
    i = pt.lscalar("i")
    outs = [
        pt.set_subtensor(x[1:3], y[:2]),
        pt.inc_subtensor(x[:, -2:], y[:, :2]),
        pt.inc_subtensor(x[1:, 1:], y[0, 0]),  # a scalar broadcast
        pt.set_subtensor(x[-10:10, 2:3], y[:, :1]),  # bounds past the ends
        pt.inc_subtensor(x[3:1], y[:0]),  # empty
        pt.inc_subtensor(x[i:, :i], y[i:, :i]),  # symbolic
        pt.set_subtensor(x[:i], y[:i]),
    ]
    value = rng.normal(size=(4, 5)) * 3
    if dtype.startswith("float"):
        value[0, 0], value[3, 4], value[2, 0] = -0.0, np.nan, -0.0
    cases = [
        [value.astype(dtype), (rng.normal(size=(4, 5)) * 3).astype(dtype), np.array(k)]
        for k in (0, 2, 4)
    ]
    _, results = compare_onnx_and_py([x, y, i], outs, cases[0], more_inputs=cases[1:])
    if dtype.startswith("float"):
        assert np.signbit(results[1][0, 0]) and np.signbit(results[1][2, 0])
