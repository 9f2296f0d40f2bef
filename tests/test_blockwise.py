import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.replace import vectorize_graph
from pytensor.tensor.basic import ExtractDiag
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.math import Dot
from pytensor.tensor.sort import ArgSortOp

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("batch", [(2,), (3, 1)])
def test_core_op_looped_over_broadcast_batch(batch, rng):
    """A core op without a batch-aware translation runs once per batch element (a Loop over
    the batch, unrolled by the optimiser: the batch size is static here)."""
    x = pt.tensor("x", shape=(*batch, None, 4))
    y = pt.tensor("y", shape=(None, 4))
    out = Blockwise(ExtractDiag(offset=-1), signature="(m,n)->(k)")(x + y)
    values = [rng.normal(size=(*batch, 3, 4)), rng.normal(size=(3, 4))]
    fn, _ = compare_onnx_and_py([x, y], out, values)
    assert any(isinstance(n.op, Blockwise) for n in fn.maker.fgraph.toposort())


def test_batch_aware_translation_needs_no_loop(rng):
    x = pt.tensor("x", shape=(2, 1, None, 4))
    y = pt.tensor("y", shape=(5, 4, None))
    out = Blockwise(Dot(), signature="(m,k),(k,n)->(m,n)")(x, y)
    compare_onnx_and_py(
        [x, y],
        out,
        [rng.normal(size=(2, 1, 3, 4)), rng.normal(size=(5, 4, 2))],
        expected_ops=["MatMul"],
        forbidden_ops=["Loop"],
    )


def test_a_constant_core_input_reaches_the_core_translation(rng):
    """A Blockwise input that is a constant the same for every batch element reaches the core
    op's translation as that constant: a sort's axis is one (the translation raised reading
    `.data` from a dummy variable)."""
    x = pt.tensor("x", shape=(None, None, 5))
    out = Blockwise(ArgSortOp("stable"), signature="(n),()->(n)")(x, pt.constant([[-1]]))
    compare_onnx_and_py([x], out, [rng.normal(size=(2, 3, 5))])


@pytest.mark.parametrize("shape", [(2, 3, 3), (2, 1, 3, 3)])
def test_gradient_of_a_batched_inverse(shape, rng):
    """PyTensor 3.0's gradient of inv sorts LU pivots by a Blockwise ArgSort whose axis is a
    constant with the batch's dims."""
    a = pt.tensor("a", shape=(None,) * len(shape))
    grad = pytensor.grad((pt.linalg.inv(a) ** 2).sum(), a)
    compare_onnx_and_py([a], grad, [rng.normal(size=shape) + 3 * np.eye(3)])


@pytest.mark.parametrize("batch", [3, 0])
def test_core_output_dims_inferred_from_the_inputs(batch, rng):
    """An output dim no input has (a diagonal's length) is the core op's infer_shape of the
    inputs' dims, as PyTensor infers it: an empty batch has its shape (it raised, reading the
    dim from the loop's results, which an empty batch has none of)."""
    x = pt.tensor3("x")
    out = Blockwise(ExtractDiag(offset=1), signature="(m,n)->(k)")(x)
    if batch:
        compare_onnx_and_py([x], out, [rng.normal(size=(batch, 3, 4))], expected_ops=["Loop"])
    else:  # PyTensor's Python Blockwise raises on an empty batch; its C and Numba do not
        fn = pytensor.function([x], out, mode="ONNX")
        assert fn(np.zeros((0, 3, 4))).shape == (0, 3)


def test_vectorized_indexing_and_solve_over_an_empty_broadcast_batch():
    """`vectorize_graph` of an indexing, and a solve (whose rewrite indexes b by the LU
    pivots in a Blockwise AdvancedSubtensor), over batch dims that broadcast to 0."""
    v, i = pt.vector("v"), pt.lvector("i")
    x, index = pt.matrix("x"), pt.lmatrix("index")
    fn = pytensor.function([x, index], vectorize_graph(v[i], {v: x, i: index}), mode="ONNX")
    assert fn(np.zeros((0, 3)), np.zeros((0, 2), dtype="int64")).shape == (0, 2)
    np.testing.assert_array_equal(fn(np.eye(3)[:2], np.array([[0, 1], [2, 0]])), [[1, 0], [0, 0]])
    a = pt.tensor("a", shape=(None, 1, None, None))
    b = pt.tensor("b", shape=(1, None, None, None))
    fn = pytensor.function([a, b], pt.linalg.solve(a, b), mode="ONNX")
    result = fn(np.zeros((0, 1, 4, 4)), np.ones((1, 5, 4, 2)))
    assert result.shape == (0, 5, 4, 2)


def test_core_output_dims_from_the_loop():
    """An output dim only the core op knows (a repeat's length, from the repeats' values)
    comes from the loop's results; an empty batch has none, and raises as PyTensor's Python
    and Numba Blockwise do, saying so."""
    v, r = pt.vector("v"), pt.lvector("r")
    x, repeats = pt.matrix("x"), pt.lmatrix("repeats")
    out = vectorize_graph(pt.repeat(v, r, axis=0), {v: x, r: repeats})
    fn = pytensor.function([x, repeats], out, mode="ONNX")
    np.testing.assert_array_equal(
        fn(np.arange(6.0).reshape(2, 3), np.array([[1, 2, 0], [0, 0, 3]])),
        [[0, 1, 1], [5, 5, 5]],
    )
    with pytest.raises(NotImplementedError, match="empty batch: its output's core dim 0"):
        fn(np.zeros((0, 3)), np.zeros((0, 3), dtype="int64"))


def test_runtime_broadcasting_of_batch_dims_raises_like_pytensor():
    a = pt.tensor3("a")
    b = pt.tensor3("b")
    out = pt.linalg.solve(a, b, b_ndim=2)
    fn = pytensor.function([a, b], out, mode="ONNX")
    eye = np.broadcast_to(np.eye(2), (3, 2, 2)).copy()
    np.testing.assert_allclose(fn(eye, np.ones((3, 2, 1))), np.ones((3, 2, 1)))
    with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
        fn(eye, np.ones((1, 2, 1)))


def test_vectorized_join_and_split_of_batched_and_unbatched_arrays(rng):
    """vectorize_graph leaves a Blockwise Join (Split) where some of its arrays have the batch
    dims and others not (PyTensor's vectorize_join broadcasts none): one Concat (Split) past
    the batch dims, no Loop over the batch; an axis it computes from constants (a batch of
    one's Squeeze of [0]) is known at export."""
    x = pt.vector("x", shape=(3,))
    fixed = pt.constant(np.array([7.0, 8.0]))
    joined = pt.join(0, x * 2, fixed)
    first, second = pt.split(x, [1, 2], n_splits=2)
    parts = [pt.join(0, second, fixed), first]
    for size in (None, 1):
        xs = pt.matrix("xs", shape=(size, 3))
        outs = vectorize_graph([joined, *parts], replace={x: xs})
        values = [rng.normal(size=(4 if size is None else 1, 3))]
        compare_onnx_and_py([xs], outs, values, forbidden_ops=["Loop"])


def test_the_lengths_of_a_vectorized_graph_share_their_checks(rng):
    """The rows of a vectorized graph keep the number of points through reshapes, and
    PyTensor's shape inference says so: adding rows of two of its values needs no
    runtime-broadcasting check, nor joining them a check of the other dims."""
    from pt_onnxscript import export_onnx

    x = pt.vector("x", shape=(6,))
    reshaped = x.reshape((2, 3)).sum(axis=0)
    out = pt.join(0, reshaped * x[:3], pt.exp(x[3:] + reshaped))
    xs = pt.matrix("xs", shape=(None, 6))
    [batched] = vectorize_graph([out], replace={x: xs})
    model = export_onnx(([xs], [batched]))
    names = [node.name for node in model.graph.node]
    assert not [name for name in names if "check" in name], names
    compare_onnx_and_py([xs], batched, [rng.normal(size=(5, 6))], more_inputs=[[np.ones((1, 6))]])
