import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.tensor.basic import MakeVector

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import PY_MODE, compare_errors_onnx_and_py, compare_onnx_and_py


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool"])
def test_alloc(dtype, opset):
    v = pt.vector("v", dtype=dtype)
    n = pt.scalar("n", dtype="int64")
    outputs = [
        pt.alloc(v, n, v.shape[0]),
        pt.alloc(pt.constant(1, dtype=dtype), n),
        pt.zeros((n, 2), dtype=dtype),
    ]
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


def test_alloc_of_a_value_that_does_not_fit_the_shape_raises_as_in_pytensor():
    """ONNX's Expand broadcasts both ways: alloc of a (3,) value to (2, 1) gave (2, 3), and
    a length-1 dim not declared broadcastable was broadcast, where PyTensor's Alloc raises
    ValueError (broadcast_to is an Alloc), with its own message for the length-1 dim."""
    v = pt.vector("v")
    n, k = pt.lscalar("n"), pt.lscalar("k")
    for out in [pt.alloc(v, n, k), pt.broadcast_to(v, (n, k))]:
        fn = pytensor.function([v, n, k], out, mode="ONNX")
        assert fn(np.arange(3.0), 2, 3).shape == (2, 3)
        for value, rows, cols in [(np.arange(3.0), 2, 1), (np.ones(1), 2, 3), (np.ones(0), 2, 1)]:
            inputs = [value, np.array(rows), np.array(cols)]
            ours, theirs = compare_errors_onnx_and_py([v, n, k], out, inputs)
            if "Runtime broadcasting" in str(theirs):
                assert str(ours) == str(theirs)
            else:
                assert "could not broadcast" in str(ours)
    one = pt.vector("one", shape=(1,))
    compare_onnx_and_py([one, n, k], pt.alloc(one, n, k), [np.ones(1), np.array(2), np.array(3)])


def test_alloc_empty_has_the_right_shape_and_dtype():
    # Not compared with PyTensor's values: they are whatever memory np.empty returns (NaN
    # included, so even `* 0` differs from run to run); ONNX has no such memory: zeros.
    from pytensor.tensor.basic import AllocEmpty

    n = pt.scalar("n", dtype="int64")
    out = AllocEmpty("float32")(n, 3)
    fn = pytensor.function([n], out, mode="ONNX")
    session = ort.InferenceSession(export_onnx(([n], [out])).SerializeToString())
    for result in (fn(np.array(4)), session.run(None, {"n": np.array(4)})[0]):
        assert result.dtype == np.float32 and result.shape == (4, 3)
        assert not result.any()


@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
def test_join_stack_concatenate(dtype, rng):
    x = pt.matrix("x", dtype=dtype)
    y = pt.matrix("y", dtype="int32" if dtype != "bool" else "bool")
    outs = [
        pt.concatenate([x, y], axis=0),
        pt.concatenate([x, y, x], axis=-1),
        pt.stack([x, x], axis=1),
        pt.join(0, x),
    ]
    values = [
        (rng.normal(size=(2, 3)) * 5).astype(dtype),
        (rng.normal(size=(2, 3)) * 5).astype(y.dtype),
    ]
    compare_onnx_and_py([x, y], outs, values)
    compare_onnx_and_py([x, y], outs[:2], [np.zeros((0, 3), dtype), np.zeros((0, 3), y.dtype)])


def test_join_of_arrays_whose_other_dims_differ_raises_even_when_one_is_empty():
    """PyTensor (NumPy) refuses to join arrays that differ in a dimension other than the
    axis; ONNX Runtime's Concat raises too, except that it skips an empty input, shapes
    unchecked: joining a (2, 3) and a (0, 2) matrix returned the (2, 3) one."""
    x, y = pt.matrix("x"), pt.matrix("y")
    fn = pytensor.function([x, y], pt.concatenate([x, y], axis=0), mode="ONNX")
    session = ort.InferenceSession(
        export_onnx(([x, y], [pt.concatenate([x, y], axis=0)])).SerializeToString()
    )
    for a, b in [((2, 3), (0, 2)), ((0, 3), (2, 2)), ((2, 3), (1, 2))]:
        with pytest.raises(ValueError, match="dimensions other than the join axis 0"):
            fn(np.ones(a), np.ones(b))
        with pytest.raises(Exception, match="dimensions other than the join axis 0"):
            session.run(None, {"x": np.ones(a), "y": np.ones(b)})
    np.testing.assert_array_equal(fn(np.ones((2, 3)), np.ones((0, 3))), np.ones((2, 3)))


def test_join_checks_only_dims_not_known_equal():
    """No check where the other dims are static, or the same graph input's dim."""
    x = pt.matrix("x", shape=(None, 3))
    y = pt.matrix("y", shape=(None, 3))
    z = pt.matrix("z")
    for outputs in ([pt.concatenate([x, y], axis=0)], [pt.concatenate([z, z**2], axis=1)]):
        ops = {node.op_type for node in export_onnx(([x, y, z], outputs)).graph.node}
        assert ops <= {"Concat", "Mul"}, ops


def test_split(rng):
    x = pt.matrix("x")
    sizes = pt.lvector("sizes")
    outs = [*pt.split(x, sizes, n_splits=3, axis=1), *pt.split(x, [1, 0, 1], n_splits=3, axis=0)]
    compare_onnx_and_py([x, sizes], outs, [rng.normal(size=(2, 5)), np.array([2, 0, 3])])


@pytest.mark.parametrize(
    "length, sizes, n_splits, message",
    [
        (5, [2, 2], 2, "Split sizes do not sum to the length of axis 0"),
        (7, [2, -4, 8], 3, "Split sizes do not sum to the length of axis 0"),
        (5, [6, -1], 2, "Split sizes cannot be negative"),
        # As many sizes as outputs, as PyTensor's Split checks (none gave two empty outputs).
        (0, [], 2, "Length of splits is not equal to n_splits"),
        (5, [5], 2, "Length of splits is not equal to n_splits"),
        (5, [1, 2, 2], 2, "Length of splits is not equal to n_splits"),
    ],
)
def test_split_sizes_raise_pytensors_errors_in_its_order(length, sizes, n_splits, message):
    x = pt.vector("x")
    size_var = pt.lvector("sizes")
    outs = pt.split(x, size_var, n_splits=n_splits)
    inputs = [np.ones(length), np.array(sizes, "int64")]
    ours, theirs = compare_errors_onnx_and_py([x, size_var], outs, inputs)
    assert message in str(ours)
    # PyTensor's message, but for the sums its Python code writes in (which ONNX cannot).
    assert str(theirs).splitlines()[0].split(" sum to")[0] in message


ARANGES = [
    (0, 5, 1),
    (5, 0, -2),
    (3, 3, 1),
    (-4, 7, 3),
    (0.1, 2.3, 0.2),
    (1.0, -1.0, -0.3),
    (0, 1e-3, 1e-4),
]


@pytest.mark.parametrize("start, stop, step", ARANGES)
def test_arange(start, stop, step):
    dtype = "float64" if isinstance(step, float) else "int64"
    a, b, c = (pt.scalar(n, dtype=dtype) for n in "abc")
    outs = [pt.arange(a, b, c)]
    if dtype == "float64":
        outs.append(pt.arange(a.astype("float32"), b.astype("float32"), c.astype("float32")))
    else:
        outs.append(pt.arange(a.astype("int16"), b.astype("int16"), c.astype("int16")))
    compare_onnx_and_py([a, b, c], outs, [np.array(v, dtype) for v in (start, stop, step)])


@pytest.mark.parametrize(
    "start, stop, step",
    [
        (0.0, 5.0, np.inf),  # the quotient underflows: one element
        (0.0, -5.0, np.inf),
        (0.0, 1e-300, 1e300),
        (0.0, 0.0, np.inf),
        (-0.0, 1.0, 0.5),  # NumPy keeps the start's -0.0
        (-0.0, -1.0, -0.5),
    ],
)
def test_arange_edges_as_numpy(start, stop, step):
    a, b, c = pt.dscalars("a", "b", "c")
    values = [np.array(v) for v in (start, stop, step)]
    compare_onnx_and_py([a, b, c], pt.arange(a, b, c), values)
    compare_onnx_and_py([a, b, c], pt.arange(*(v.astype("float32") for v in (a, b, c))), values)


@pytest.mark.parametrize(
    "start, stop, step, error",
    [
        (0.0, 5.0, 0.0, ZeroDivisionError),
        (1.0, 1.0, 0.0, ZeroDivisionError),
        (0.0, np.nan, 1.0, ValueError),  # NumPy: cannot compute length
        (0.0, np.inf, 1.0, ValueError),  # NumPy: maximum allowed size exceeded
        (0.0, -np.inf, 1.0, ValueError),
        (0.0, 1e30, 1.0, ValueError),
    ],
)
def test_arange_raises_where_numpy_does(start, stop, step, error):
    """These gave an empty array."""
    a, b, c = pt.dscalars("a", "b", "c")
    for dtype in ["float64", "int64"] if step == 0 else ["float64"]:
        out = pt.arange(*(v.astype(dtype) for v in (a, b, c)))
        values = [np.array(v) for v in (start, stop, step)]
        with pytest.raises(error):
            pytensor.function([a, b, c], out, mode=PY_MODE)(*values)
        with pytest.raises(error):
            pytensor.function([a, b, c], out, mode="ONNX")(*values)


@pytest.mark.parametrize("start", [10**17, -(10**18), 2**62, 2**63 - 10])
def test_arange_of_large_integers_takes_their_exact_difference(start):
    """stop - start in int64, as NumPy: in float64, 10**17 + 3 - 10**17 was 0, an empty
    result (and `pt.tri(3, 3, k)`, an arange from -k, had no columns for |k| >= 10**17)."""
    a, b, c = pt.lscalars("a", "b", "c")
    values = [np.array(v, "int64") for v in (start, start + 3, 1)]
    compare_onnx_and_py([a, b, c], pt.arange(a, b, c), values)
    k = pt.lscalar("k")
    tri = [pt.tri(3, 3, k), pt.triu(pt.ones((3, 3)), k)]
    for value in (start, -start):
        compare_onnx_and_py([k], tri, [np.array(value, "int64")])


def test_eye_of_a_negative_size_raises():
    """As NumPy's eye: it gave an empty matrix."""
    n, m = pt.lscalar("n"), pt.lscalar("m")
    fn = pytensor.function([n, m], pt.eye(n, m), mode="ONNX")
    assert fn(np.array(0), np.array(2)).shape == (0, 2)
    for sizes in [(-1, 2), (2, -1)]:
        with pytest.raises(ValueError, match="negative dimensions"):
            pytensor.function([n, m], pt.eye(n, m), mode=PY_MODE)(*map(np.array, sizes))
        with pytest.raises(ValueError, match="negative dimensions"):
            fn(*map(np.array, sizes))


def test_arange_of_a_symbolic_size(rng):
    x = pt.vector("x")
    out = x * pt.arange(x.shape[0])
    for n in [0, 1, 7]:
        compare_onnx_and_py([x], out, [rng.normal(size=n)])


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_eye_tri_tril_triu(dtype, rng):
    n, m, k = pt.lscalar("n"), pt.lscalar("m"), pt.lscalar("k")
    x = pt.matrix("x")
    outs = [
        pt.eye(n, m, k, dtype=dtype),
        pt.eye(3, dtype=dtype),
        pt.tri(n, m, k, dtype=dtype),
        pt.tril(x, k),
        pt.triu(x, -1),
    ]
    for sizes in [(3, 4, 1), (4, 2, -1), (0, 3, 0)]:
        compare_onnx_and_py([n, m, k, x], outs, [*map(np.array, sizes), rng.normal(size=(3, 4))])


def test_diagonals(rng):
    x = pt.tensor3("x")
    v = pt.vector("v")
    outs = [
        pt.diagonal(x, 0, 1, 2),
        pt.diagonal(x, 1, 0, 2),
        pt.diagonal(x, -2, 2, 0),
        pt.diagonal(x, 5, 1, 2),
        pt.diag(v),
        pt.diag(x[0]),
        pt.diag(v, k=-1),
    ]
    compare_onnx_and_py([x, v], outs, [rng.normal(size=(3, 4, 5)), rng.normal(size=3)])


def test_nonzero_and_one_argument_where(rng):
    x = pt.matrix("x")
    outs = [*pt.nonzero(x > 0), pt.flatnonzero(x > 0), *pt.where(x < 0), pt.nonzero_values(x)]
    compare_onnx_and_py([x], outs, [np.round(rng.normal(size=(3, 4)))])
    compare_onnx_and_py([x], outs, [np.zeros((0, 4))])


def test_shape_idioms(rng):
    x = pt.tensor3("x", shape=(None, 1, 3))
    y = pt.matrix("y")
    outs = [
        pt.flatten(x),
        pt.flatten(x, 2),
        pt.squeeze(x),
        pt.expand_dims(y, (0, 2)),
        pt.broadcast_to(y, (2, *y.shape)),
        pt.flip(x),
        pt.flip(y, 1),
        pt.tile(y, (2, 3)),
        pt.tile(y, 2),
        y.T,
        x.transpose(2, 0, 1),
        pt.moveaxis(x, 0, -1),
        pt.roll(y, 2, axis=1),
        pt.swapaxes(x, 0, 2),
    ]
    compare_onnx_and_py([x, y], outs, [rng.normal(size=(2, 1, 3)), rng.normal(size=(2, 3))])


def test_alloc_with_a_constant_zero_size_survives_onnx_runtimes_optimizer():
    import pytensor

    x = pt.scalar("x")
    a = pt.alloc(x, 0, 0, 1)
    outs = [a[a > 0], a[(a > 0).any(axis=-1)], pt.alloc(x, 2, 0) + 1]
    for out in outs:
        compare_onnx_and_py([x], out, [np.array(1.0)])
    fn = pytensor.function([x], outs[0], mode="ONNX")
    assert fn(1.0).shape == (0,)


def test_alloc_diag_offsets_axes_and_signed_zeros(rng):
    """AllocDiag (pt.diag of a vector, and its batched form) translated directly: offsets
    either side, the diagonal's axes anywhere, empty inputs, and -0.0 kept on the diagonal."""
    from pytensor.tensor.basic import alloc_diag

    v = pt.vector("v")
    x = pt.tensor3("x")
    outs = [
        alloc_diag(v),
        alloc_diag(v, offset=2),
        alloc_diag(v, offset=-3),
        alloc_diag(x, offset=1, axis1=0, axis2=3),
        alloc_diag(x, offset=-1, axis1=1, axis2=2),
        alloc_diag(x, axis1=2, axis2=0),
    ]
    for n in (0, 1, 4):
        value = rng.normal(size=n)
        if n:
            value[0] = -0.0
        _, results = compare_onnx_and_py([v, x], outs, [value, rng.normal(size=(2, 3, n))])
        if n:
            assert np.signbit(results[0][0, 0])
    # Off the diagonal a constant 0, broadcast: a Where that keeps -0.0 as it is, no repair
    # of signs (Div, Less, Mul) and no matrix of zeros. (PyTensor inlines the AllocDiags
    # above; those in Cholesky's gradient stay.)
    m = pt.matrix("m")
    grad = pytensor.grad(pt.log(pt.diagonal(pt.linalg.cholesky(m))).sum(), m)
    nodes = [node for node in export_onnx(([m], [grad])).graph.node if "AllocDiag" in node.name]
    assert nodes
    assert not {node.op_type for node in nodes} & {"Div", "Less", "Mul", "Expand"}


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_choose(mode, rng):
    """np.choose: a broadcast against the choices' shape, out-of-range entries wrapped, clipped
    or raising (NumPy's ValueError)."""
    a, choices = pt.lmatrix("a"), pt.tensor3("c")
    out = pt.choose(a, choices, mode=mode)
    picks = rng.integers(-4, 7, size=(3, 1)) if mode != "raise" else rng.integers(0, 3, size=(3, 1))
    fn, _ = compare_onnx_and_py([a, choices], out, [picks, rng.normal(size=(3, 3, 4))])
    if mode == "raise":
        with pytest.raises(ValueError, match="invalid entry in choice array"):
            fn(np.array([[3]]), rng.normal(size=(3, 1, 2)))


@pytest.mark.parametrize("inverse", [False, True])
def test_permute_row_elements(inverse, rng):
    """A permutation per row, one for every row, and one vector permuted by each row."""
    x, y = pt.matrix("x"), pt.lmatrix("y")
    perms = np.stack([rng.permutation(5) for _ in range(3)])
    compare_onnx_and_py(
        [x, y], pt.permute_row_elements(x, y, inverse), [rng.normal(size=(3, 5)), perms]
    )
    v = pt.lvector("v")
    compare_onnx_and_py(
        [x, v], pt.permute_row_elements(x, v, inverse), [rng.normal(size=(3, 5)), perms[0]]
    )
    u = pt.vector("u")
    compare_onnx_and_py([u, y], pt.permute_row_elements(u, y, inverse), [rng.normal(size=5), perms])


@pytest.mark.parametrize("inverse", [False, True])
def test_permute_row_elements_of_rows_that_do_not_fit_raises(inverse, rng):
    """As PyTensor: a y longer than x's rows gathered a longer result; a row of y broadcast
    at run time over x's rows was taken for each."""
    x, v, y = pt.matrix("x"), pt.lvector("v"), pt.lmatrix("y")
    fn = pytensor.function([x, v], pt.permute_row_elements(x, v, inverse), mode="ONNX")
    for perm in [np.array([0, 1, 2, 0]), np.array([0, 1])]:
        with pytest.raises(ValueError, match="Dimension mismatch"):
            pytensor.function([x, v], pt.permute_row_elements(x, v, inverse), mode=PY_MODE)(
                rng.normal(size=(2, 3)), perm
            )
        with pytest.raises(ValueError, match="Dimension mismatch"):
            fn(rng.normal(size=(2, 3)), perm)
    fn = pytensor.function([x, y], pt.permute_row_elements(x, y, inverse), mode="ONNX")
    with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
        fn(rng.normal(size=(2, 3)), np.array([[2, 0, 1]]))
    if not inverse:  # one index for every entry of a row, as NumPy's x[y]
        compare_onnx_and_py([x, v], pt.permute_row_elements(x, v), [rng.normal(size=(2, 3)), [2]])
