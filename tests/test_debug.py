import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.scan.op import Scan
from pytensor.tensor.basic import AllocEmpty, ScalarFromTensor, TensorFromScalar
from pytensor.tensor.elemwise import Elemwise
from test_scan import scan, user_scan

from pt_onnxscript import UnsupportedOpError
from pt_onnxscript.debug import Divergence, compare_nodes, find_divergence
from pt_onnxscript.registry import (
    _blockwise_translations,
    _scalar_translations,
    _translations,
    load_builtins,
)
from pt_onnxscript.testing import assert_same

UNREWRITTEN = Mode(linker="py", optimizer=None)
load_builtins()  # the tests below replace some, which loading them later would refuse


@pytest.fixture
def exp_off_by_1e3(monkeypatch):
    """Make the Exp translation wrong: exp(x + 1e-3)."""
    monkeypatch.setitem(_scalar_translations, ps.Exp, lambda g, node, x: g.Exp(g.Add(x, 1e-3)))


def is_exp(node):
    return isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Exp)


@pytest.mark.parametrize("rows", [0, 2])
def test_correct_graph_agrees_at_every_node(rows, opset, rng):
    x = pt.matrix("x", shape=(None, 3))
    k = pt.vector("k", dtype="int32")
    w = pytensor.shared(rng.normal(size=3).astype("float32"), name="w")
    hidden = pt.maximum(pt.exp(x.T) * 2 - 3, 0) / 2
    outputs = [pt.log(hidden + 2).T * k, -pt.cast(k, "float32") * w]
    values = [rng.normal(size=(rows, 3)), np.array([1, -2, 3], dtype="int32")]

    reports = compare_nodes(([x, k], outputs), values, opset=opset)
    assert len(reports) > 2
    assert not any(isinstance(r, Divergence) or r.message for r in reports)
    for report in reports:
        for actual, expected in zip(report.actual, report.expected, strict=True):
            assert_same(actual, expected)
    assert "agrees" in str(reports[0])
    assert find_divergence(([x, k], outputs), values, opset=opset) is None


def test_wrong_translation_is_found_at_its_node_with_its_values(exp_off_by_1e3):
    x, v = pt.vector("x"), pt.vector("v")
    y = pt.log(pt.exp(x * v) + v)
    fn = pytensor.function([x, v], y, mode=UNREWRITTEN)
    x_value, v_value = np.array([0.5, -1.0, 2.0]), np.full(3, 2.0)

    reports = compare_nodes(fn, [x_value, v_value])
    assert [r.node for r in reports] == fn.maker.fgraph.toposort()
    divergence = find_divergence(fn, [x_value, v_value])
    assert isinstance(divergence, Divergence) and is_exp(divergence.node)
    assert reports[divergence.index].node is divergence.node
    assert not any(isinstance(r, Divergence) for r in reports[divergence.index + 1 :])
    assert_same(divergence.inputs[0], x_value * 2)
    assert_same(divergence.expected[0], np.exp(x_value * 2))
    assert_same(divergence.actual[0], np.exp(x_value * 2 + 1e-3))
    np.testing.assert_allclose(divergence.max_rel_diff, np.expm1(1e-3))
    np.testing.assert_allclose(divergence.max_abs_diff, np.exp(4.0) * np.expm1(1e-3))
    text = str(divergence)
    assert str(divergence.node) in text and "differs: output 0" in text
    assert "max abs diff" in text and "max rel diff 0.001" in text


def test_wrong_translation_inside_a_fused_composite(exp_off_by_1e3):
    x = pt.matrix("x")
    y = pt.exp((x * 2 - 1).T) / 3  # fused into one Composite after the transpose
    x_value = np.arange(6.0).reshape(2, 3) / 6
    divergence = find_divergence(([x], [y]), [x_value])
    assert isinstance(divergence.node.op.scalar_op, ps.Composite)
    assert_same(divergence.inputs[0], x_value.T)
    assert_same(divergence.actual[0], np.exp(x_value.T * 2 - 1 + 1e-3) / 3)
    assert find_divergence(([x], [y]), [x_value], rtol=2e-3) is None


def test_translation_giving_the_wrong_dtype_is_reported(monkeypatch):
    monkeypatch.setitem(_scalar_translations, ps.Exp, lambda g, node, x: g.Cast(g.Exp(x), to=1))
    x = pt.vector("x", dtype="float64")
    divergence = find_divergence(([x], [pt.exp(x)]), [np.ones(2)])
    assert divergence.actual is None
    assert "TranslationError" in divergence.message
    assert "FLOAT where PyTensor gives float64" in divergence.message
    assert "ONNX differs: TranslationError" in str(divergence)


def test_compiled_function_in_default_mode_with_shared_and_updates(exp_off_by_1e3):
    """The compiled graph is compared as it is (inplace ops included); inputs stay intact."""
    x = pt.matrix("x")
    w = pytensor.shared(np.full(3, 0.5), name="w")
    fn = pytensor.function([x], pt.exp(x * w + 1) * 2, updates={w: w + 1})
    x_value = np.arange(6.0).reshape(2, 3)
    copy = x_value.copy()

    reports = compare_nodes(fn, [x_value])
    assert [r.node for r in reports] == fn.maker.fgraph.toposort()
    divergence = find_divergence(fn, [x_value])
    assert divergence is not None
    assert_same(divergence.expected[0], np.exp(x_value * 0.5 + 1) * 2)
    assert_same(x_value, copy)
    assert_same(w.get_value(), np.full(3, 0.5))


def test_non_tensor_outputs_are_skipped_and_feed_consumers_as_constants(monkeypatch):
    monkeypatch.setitem(_translations, ScalarFromTensor, lambda g, node, x: g.Identity(x))
    monkeypatch.setitem(_translations, TensorFromScalar, lambda g, node, x: g.Identity(x))
    i = pt.scalar("i", dtype="int64")
    fn = pytensor.function([i], TensorFromScalar()(ScalarFromTensor()(i)) + 1, mode=UNREWRITTEN)

    reports = compare_nodes(fn, [np.array(4)])
    skipped, consumer, _ = reports
    assert isinstance(skipped.node.op, ScalarFromTensor) and skipped.actual is None
    assert "not compared" in str(skipped) and not isinstance(skipped, Divergence)
    assert isinstance(consumer.node.op, TensorFromScalar)
    assert_same(consumer.actual[0], np.array(4, dtype="int64"))
    assert find_divergence(fn, [np.array(4)]) is None


class NoTranslation(Op):
    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0]


def test_unsupported_ops_and_bad_values_are_errors():
    x = pt.vector("x")
    with pytest.raises(UnsupportedOpError, match="NoTranslation"):
        find_divergence(([x], [NoTranslation()(x)]), [np.ones(2)])
    with pytest.raises(ValueError, match="Got 2 values for 1 inputs"):
        find_divergence(([x], [x + 1]), [np.ones(2), np.ones(2)])
    with pytest.raises(TypeError, match="pytensor.function"):
        find_divergence(x, [np.ones(2)])


def test_symbolic_ops_of_a_default_mode_function(rng):
    """PyTensor 3's Softmax is an OpFromGraph whose inner graph the default mode makes inplace."""
    x = pt.matrix("x")
    fn = pytensor.function([x], pt.special.softmax(pt.exp(x), axis=-1))
    assert find_divergence(fn, [rng.normal(size=(2, 3))]) is None


def test_a_scan_agrees_though_its_empty_buffers_hold_anything():
    # A Scan's output buffers are AllocEmpty: memory whose values PyTensor leaves as they
    # were (any numbers), where ONNX Runtime gives zeros. Their shape and dtype are compared.
    x = pt.vector("x")
    ys = scan(lambda xi, acc: acc * 0.5 + pt.exp(xi), sequences=[x], outputs_info=[pt.zeros(())])
    values = [np.array([0.5, -1.0, 2.0])]
    reports = compare_nodes(([x], [ys]), values)
    empty = [r for r in reports if isinstance(r.node.op, AllocEmpty)]
    assert empty and not any(isinstance(r, Divergence) for r in empty)
    assert all("values are unspecified" in str(r) and r.actual is not None for r in empty)
    assert find_divergence(([x], [ys]), values) is None


def test_a_wrong_step_is_found_at_its_scan(exp_off_by_1e3):
    x = pt.vector("x")
    # exp(-acc) is not pushed out of the loop
    ys = scan(lambda xi, acc: pt.exp(-acc) + xi, sequences=[x], outputs_info=[pt.zeros(())])
    divergence = find_divergence(([x], [ys]), [np.array([0.5, -1.0, 2.0])])
    assert isinstance(divergence, Divergence) and isinstance(divergence.node.op, Scan)


def test_a_reduction_fused_by_pytensor_238_is_evaluated_as_its_parts():
    # PyTensor 2.38's C backend fuses sum(exp(x)) into one CAReduce of
    # Composite{i0 + exp(i1)}, whose Python implementation starts from x[0], not exp(x[0]):
    # the PyTensor side of the comparison was wrong, and the translation reported.
    x = pt.matrix("x")
    fn = pytensor.function([x], pt.exp(x).sum(0))
    nodes = fn.maker.fgraph.apply_nodes
    if len(nodes) != 1 or not isinstance(next(iter(nodes)).op.scalar_op, ps.Composite):
        pytest.skip("PyTensor 3's default mode fuses no reduction with an Elemwise")
    value = np.arange(6.0).reshape(2, 3)
    (report,) = compare_nodes(fn, [value])
    assert not isinstance(report, Divergence)
    assert_same(report.expected[0], np.exp(value).sum(0))


def _rnn():
    w = pytensor.shared(np.random.default_rng(0).normal(size=(3, 3)) * 0.5, name="w")
    b = pytensor.shared(np.ones(3), name="b")
    x = pt.matrix("x")
    return x, user_scan(
        lambda xt, h: pt.tanh(pt.dot(h, w) + xt + pt.exp(b).sum()),
        sequences=[x],
        outputs_info=[pt.zeros(3)],
    )


def _nested_rnn():
    w = pytensor.shared(np.random.default_rng(0).normal(size=(2, 2)) * 0.5, name="w")
    x = pt.tensor3("x")

    def outer(rows, h):
        inner = user_scan(
            lambda row, hh: pt.tanh(pt.dot(hh, w) + row), sequences=[rows], outputs_info=[h]
        )
        return inner[-1]

    return x, user_scan(outer, sequences=[x], outputs_info=[pt.zeros(2)])


@pytest.mark.parametrize(
    "make, mode",
    [(_rnn, "NUMBA"), (_rnn, "FAST_RUN"), (_nested_rnn, "FAST_RUN")],
    ids=["rnn-NUMBA", "rnn-FAST_RUN", "nested-FAST_RUN"],
)
def test_scans_of_a_compiled_function_agree(make, mode):
    # A compiled function's backend rewrites a Scan's inner graph in place (PyTensor's Numba
    # backend, and 3.0's C backend, leave in-place Ops in it) and Scan refuses to compile
    # such a step again: the PyTensor side raised "Graph must not contain inplace
    # operations". Its step also holds the C backend's fused reductions (exp(b).sum()),
    # whose Python implementation is wrong.
    x, ys = make()
    fn = pytensor.function([x], ys, mode=mode)
    value = np.random.default_rng(1).normal(size=(5, 3) if x.ndim == 2 else (3, 4, 2))
    assert find_divergence(fn, [value]) is None


def test_a_fused_loop_is_evaluated_by_numpy_ufuncs():
    # An Elemwise of a Composite (a fused loop; PyTensor 2.38 fuses PyMC's Exponential
    # log-density into -log(1 / x)) runs its scalar Ops on Python floats in its Python
    # implementation, where PyTensor's reciprocal gives a float32 (np.float32(1.0) / x under
    # NumPy 2's promotion): the exact translation was reported as diverging by 1.5e-6.
    x = ps.float64("x")
    fused = Elemwise(ps.Composite([x], [-ps.log(ps.reciprocal(x)), ps.ge(ps.reciprocal(x), 0)]))
    y = pt.vector("y")
    fn = pytensor.function([y], fused(y), mode=Mode(linker="py", optimizer=None))
    value = np.array([0.95680068, 2.0, 1e-3])
    (report,) = compare_nodes(fn, [value])
    assert not isinstance(report, Divergence)
    assert_same(report.expected[0], np.log(value))
    assert_same(report.expected[1], np.ones(3, dtype=bool))


def test_results_that_differ_only_in_the_sign_of_zeros_are_reported_not_divergent():
    # PyTensor's Python max of [0.0, -0.0] is -0.0, its C and Numba ones (and ONNX
    # Runtime's) 0.0; a sum of negative zeros is 0.0 in PyTensor, -0.0 in ONNX Runtime.
    # PyMC's Categorical log-density and Kumaraswamy gradient stopped the debugger there.
    x = pt.vector("x")
    fn = pytensor.function([x], [pt.max(x), pt.sum(x), x + 1], mode=Mode("py", None))
    for value, op in [([0.0, -0.0], "Max"), ([-0.0, -0.0], "Sum")]:
        assert find_divergence(fn, [np.array(value)]) is None
        reports = compare_nodes(fn, [np.array(value)])
        noted = [r for r in reports if "but for the sign of some zeros" in str(r)]
        assert [type(r.node.op).__name__ for r in noted] == [op]


def _eigh_and_svd():
    a = pt.matrix("a")
    w, v = pt.linalg.eigh(a)
    u, s, vt = pt.linalg.svd(a)
    return pytensor.function([a], [w, v, u, s, vt], mode=UNREWRITTEN)


def test_eigenvectors_and_singular_vectors_are_compared_by_their_invariants():
    # Unique only up to sign: ours need not be LAPACK's (PyMC's KroneckerNormal stopped the
    # debugger at its eigh). Compared by a v - v diag(w), u diag(s) v^T - a, orthonormality.
    value = np.random.default_rng(0).normal(size=(4, 4))  # eigh reads its lower triangle
    reports = compare_nodes(_eigh_and_svd(), [value])
    assert not any(isinstance(r, Divergence) for r in reports)
    assert sum("compared by their invariants" in str(r) for r in reports) == 2


def test_wrong_eigenvectors_are_found(monkeypatch):
    from pt_onnxscript.ops.decompositions import Eigh

    for table in (_translations, _blockwise_translations):  # PyTensor 3's is a Blockwise

        def transposed(g, node, *inputs, right=table[Eigh]):
            values, vectors = right(g, node, *inputs)
            return [values, g.Transpose(vectors, perm=[1, 0])]

        monkeypatch.setitem(table, Eigh, transposed)
    divergence = find_divergence(_eigh_and_svd(), [np.random.default_rng(0).normal(size=(4, 4))])
    assert "a v - b v diag(w) is" in divergence.message
