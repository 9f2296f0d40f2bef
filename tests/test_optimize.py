"""The ONNX-level optimiser's own passes: Loops unrolled, no-op Expands dropped, Where's
sign repair shortened."""

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.graph.traversal import ancestors
from test_scan import scan

from pt_onnxscript import export_onnx
from pt_onnxscript.optimize import UNROLL_BUDGET, unroll_loops
from pt_onnxscript.testing import PY_MODE, _all_nodes, compare_onnx_and_py


def op_types(model):
    return [node.op_type for node in _all_nodes(model.graph)]


@pytest.mark.parametrize("function", [pt.gammaln, pt.psi, pt.tri_gamma, pt.erfinv, pt.i0])
def test_special_functions_export_without_loops(function, rng, opset):
    """Their scripted `for k in range(n)` loops have a fixed count: unrolled, as plain
    elementwise nodes (the values are those of the Loop, checked against PyTensor)."""
    x = pt.dvector("x")
    values = rng.uniform(-0.99, 0.99, size=20) if function is pt.erfinv else rng.gamma(2, size=20)
    compare_onnx_and_py([x], function(x), [values], opset=opset, forbidden_ops=["Loop"])
    compare_onnx_and_py([x], function(x), [np.zeros(0)], opset=opset)
    if function is not pt.psi:  # psi's recurrence is a sum over a step axis
        assert "Loop" in op_types(export_onnx(([x], [function(x)]), optimize=False))


def test_a_scan_of_constant_length_unrolls_with_its_stacked_outputs(rng, opset):
    x = pt.dvector("x")
    # A recurrence reading the step number, carrying a value and stacking two outputs.
    steps, totals = scan(
        lambda k, total, x: (k * 2, total + x * k),
        sequences=[pt.arange(4)],
        outputs_info=[None, pt.zeros_like(x)],
        non_sequences=[x],
    )
    compare_onnx_and_py(
        [x], [steps, totals, totals[-1]], [rng.normal(size=3)], opset=opset, forbidden_ops=["Loop"]
    )


def test_a_scan_of_constant_length_as_the_graph_output_keeps_the_output_name(rng):
    x = pt.dvector("x")
    powers = scan(lambda p, x: p * x, outputs_info=[pt.ones_like(x)], non_sequences=[x], n_steps=3)
    model = export_onnx(([x], [powers]), output_names=["powers"])
    assert [o.name for o in model.graph.output] == ["powers"]
    assert "Loop" not in op_types(model)
    compare_onnx_and_py([x], powers, [rng.normal(size=2)], forbidden_ops=["Loop"])


def test_a_long_or_symbolic_loop_stays_a_loop(rng):
    x = pt.dvector("x")
    k = pt.lscalar("k")
    long = scan(lambda p: p + 1.0, outputs_info=[x], n_steps=UNROLL_BUDGET + 1)[-1]
    symbolic = scan(lambda p: p + 1.0, outputs_info=[x], n_steps=k)[-1]
    compare_onnx_and_py([x], long, [rng.normal(size=2)], expected_ops=["Loop"])
    compare_onnx_and_py([x, k], symbolic, [rng.normal(size=2), np.array(3)], expected_ops=["Loop"])


def test_loops_inside_a_loop_unroll_and_the_outer_one_stays(rng):
    """psi's fixed loops inside a Scan of symbolic length: unrolled in the body."""
    x = pt.dmatrix("x")
    rows = scan(lambda row, prev: pt.psi(row + prev), sequences=[x], outputs_info=[x[0] * 0])
    assert op_types(export_onnx(([x], [rows]))).count("Loop") == 1
    compare_onnx_and_py([x], rows, [rng.gamma(2, size=(3, 4))], expected_ops=["Loop"])


def _loop_bodies(model):
    return [attr.g for node in _all_nodes(model.graph) for attr in node.attribute if attr.g.node]


@pytest.mark.parametrize("steps", [0, 1, 2, 15, 16, 17, 41])
def test_a_small_loop_of_any_length_runs_several_steps_per_iteration(steps, rng, opset):
    """A Scan over a symbolic number of rows: a Loop of the first steps with the body as it
    was, then a Loop running several copies of it per iteration; every row of the stacked
    outputs in order, whatever the remainder (none, or no steps at all)."""
    x = pt.dmatrix("x")
    acc, norms = scan(
        lambda row, total: (total * 0.5 + row, (row**2).sum()),
        sequences=[x],
        outputs_info=[pt.zeros(x.shape[1]), None],
    )
    model = export_onnx(([x], [acc, norms]))
    copies = [
        sum(n.op_type == "Gather" and n.input[0] == "x" for n in body.node)
        for body in _loop_bodies(model)
    ]
    assert min(copies) == 1 and max(copies) >= 4, copies
    for width in (3, 0):
        compare_onnx_and_py(
            [x], [acc, norms, acc[-3:]], [rng.normal(size=(steps, width))], opset=opset
        )


def test_shape_checks_of_scan_rows_leave_the_loop(rng):
    """The check that a Scan's rows do not broadcast at run time reads their shapes from the
    sequence and the initial state: it is computed once, before the Loop; only the failure
    guard stays in the body (it must fail only when a step runs, as PyTensor does)."""
    x = pt.dmatrix("x")
    init = pt.dvector("init")
    acc = scan(lambda row, total: total + row, sequences=[x], outputs_info=[init])
    model = export_onnx(([x, init], [acc]), optimize=True)
    body_ops = {n.op_type for body in _loop_bodies(model) for n in body.node}
    assert "Shape" not in body_ops and "ReduceMax" not in body_ops, body_ops
    fn = pytensor.function([x, init], acc, mode="ONNX")
    np.testing.assert_array_equal(fn(np.zeros((0, 3)), np.ones(1)), np.ones((0, 1)))
    with pytest.raises(ValueError, match="Runtime broadcasting not allowed"):
        fn(np.zeros((2, 3)), np.ones(1))
    compare_onnx_and_py([x, init], acc, [rng.normal(size=(5, 3)), rng.normal(size=3)])


def test_a_loop_that_may_stop_early_is_not_unrolled():
    from pytensor.scan.utils import until

    x = pt.dscalar("x")
    halvings = scan(lambda p: (p / 2, until(p < 1)), outputs_info=[x], n_steps=4)
    model = ir.from_proto(export_onnx(([x], [halvings]), optimize=False))
    assert not unroll_loops(model.graph)
    compare_onnx_and_py([x], halvings, [np.array(10.0)], expected_ops=["Loop"])


def test_expand_to_a_broadcastable_shape_is_dropped_and_a_real_broadcast_kept(rng):
    x = pt.dvector("x")
    s = pt.dvector("s", shape=(1,))
    # Composite outputs not reading an input are expanded by its shape: here s's, (1,).
    out = pt.second(s, x) * 2
    model = export_onnx(([x, s], [out]))
    assert "Expand" not in op_types(model)
    compare_onnx_and_py([x, s], out, [rng.normal(size=3), rng.normal(size=1)])
    wide = pt.second(x, s) * 2  # s broadcast to x's length: a real Expand
    compare_onnx_and_py(
        [x, s], wide, [rng.normal(size=3), rng.normal(size=1)], expected_ops=["Expand"]
    )


def test_indexing_a_vector_with_a_vector_is_gather_elements(rng):
    x = pt.dvector("x")
    i = pt.lvector("i")
    compare_onnx_and_py(
        [x, i],
        [x[i], x[i][::-1]],
        [rng.normal(size=5), np.array([0, 4, -1, 2, 2])],
        expected_ops=["GatherElements"],
        forbidden_ops=["Gather"],
    )
    compare_onnx_and_py([x, i], x[i], [rng.normal(size=5), np.zeros(0, "int64")])
    m = pt.dmatrix("m")  # rows of a matrix: Gather
    compare_onnx_and_py(
        [m, i], m[i], [rng.normal(size=(3, 2)), np.array([2, 0])], expected_ops=["Gather"]
    )


SWITCHES = {
    "constant zero": lambda x, y, s: pt.switch(x >= 0, -x, np.float64(0)),
    "integer zero, cast": lambda x, y, s: pt.switch(x >= 0, -x, 0),
    "constant vector": lambda x, y, s: pt.switch(x >= 0, -x, pt.constant(np.zeros(3))),
    "constant first": lambda x, y, s: pt.switch(x < 0, np.float64(0), -x),
    "two inputs": lambda x, y, s: pt.switch(x >= 0, -x, y),
    "broadcast branch": lambda x, y, s: pt.switch(x >= 0, -s, y),
    "broadcast condition": lambda x, y, s: pt.switch(s >= 0, -s, y),
    # -inf is a constant only once folded: the repair's -0.0 test folds to false first
    "constant after folding": lambda x, y, s: pt.switch(pt.eq(x, 0), -np.inf, y[0]),
    "two repairs": lambda x, y, s: pt.concatenate(
        [pt.switch(x >= 0, -x, 0), pt.switch(x < 1, -x * 2, 0)]
    ),
}


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("case", SWITCHES)
def test_switch_keeps_negative_zeros(case, optimize):
    """ONNX Runtime's Where loses a -0.0 from its second input, and fuses a Not before it
    into swapped branches: `where` negates with Xor and repairs the sign; the optimiser's
    rule shortens the repair once a branch is a known constant."""
    x, y, s = pt.dvector("x"), pt.dvector("y"), pt.dvector("s", shape=(1,))
    out = SWITCHES[case](x, y, s)
    values = {"x": np.array([0.0, 1.0, -2.0]), "y": np.array([-0.0, -0.0, 3.0]), "s": [0.0]}
    inputs = [v for v in (x, y, s) if v in ancestors([out])]
    feeds = [np.asarray(values[v.name]) for v in inputs]
    expected = pytensor.function(inputs, out, mode=PY_MODE)(*feeds)
    model = export_onnx((inputs, [out]), optimize=optimize)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, dict(zip([v.name for v in inputs], feeds, strict=True)))[0]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    constant = ("constant zero", "integer zero, cast", "constant first", "constant after folding")
    if optimize and case in constant:
        assert len(model.graph.node) <= 4, op_types(model)


def test_expand_to_a_0d_shape_is_dropped_whatever_the_input():
    """Expand(x, []) is x even when x's rank is unknown (a check that folded to passing)."""
    from onnx import TensorProto, helper, numpy_helper

    from pt_onnxscript.optimize import optimize

    graph = helper.make_graph(
        [helper.make_node("Expand", ["x", "shape"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializer=[numpy_helper.from_array(np.zeros(0, np.int64), "shape")],
    )
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    optimize(model)
    assert [node.op_type for node in model.graph] in ([], ["Identity"])


@pytest.mark.parametrize(
    ("then_shape", "else_shape", "expected"),
    [([2, 3], [2, 3], [2, 3]), ([2, 3], [5, 3], [None, 3]), ([2, 3], [6], None)],
)
def test_an_if_has_the_shape_its_branches_agree_on(then_shape, else_shape, expected):
    """ONNX's node-by-node inference cannot type an If (it needs the branches), so the
    optimiser gives its outputs the dims both branches agree on: a Shape of them folds
    when they agree fully, and stays otherwise."""
    from onnx import TensorProto, helper

    from pt_onnxscript.optimize import optimize

    def branch(name, shape):
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.DOUBLE, None)
        node = helper.make_node("ConstantOfShape", [f"{name}_shape"], [f"{name}_out"])
        shape = helper.make_node("Constant", [], [f"{name}_shape"], value_ints=shape)
        return helper.make_graph([shape, node], name, [], [out])

    graph = helper.make_graph(
        [
            helper.make_node(
                "If",
                ["c"],
                ["y"],
                then_branch=branch("then", then_shape),
                else_branch=branch("else", else_shape),
            ),
            helper.make_node("Shape", ["y"], ["s"]),
        ],
        "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("s", TensorProto.INT64, None),
        ],
    )
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    optimize(model)
    (if_node,) = [node for node in model.graph if node.op_type == "If"]
    (y,) = if_node.outputs
    assert y.type == ir.TensorType(ir.DataType.FLOAT)  # ConstantOfShape's default
    if expected is None:
        assert y.shape is None
    else:
        assert [d if isinstance(d, int) else d.value for d in y.shape] == expected
    folded = all(isinstance(d, int) for d in expected or [None])
    assert ("Shape" in [node.op_type for node in model.graph]) != folded


def test_a_gammaln_result_keeps_its_shape_through_the_if(rng):
    """What follows gammaln's Ifs has a known shape: a Composite output that does not read
    gammaln's result, expanded by its shape (as Elemwise broadcasts), keeps no Shape or
    Expand in the model (a PyMC log-density calling gammaln kept a dozen)."""
    x, y = pt.vector("x", shape=(1,)), pt.vector("y", shape=(5,))
    shared = pt.log1p(y * y)
    outputs = [shared + pt.gammaln(x), shared * 3.0]  # one Composite, two outputs
    model = export_onnx(([x, y], outputs))
    assert not {"Shape", "Expand"} & {node.op_type for node in model.graph.node}
    compare_onnx_and_py([x, y], outputs, [rng.uniform(0.5, 30, 1), rng.normal(size=5)])


def test_a_leading_unsqueeze_into_a_broadcasting_op_is_dropped_only_when_exact():
    x, m = pt.matrix("x", shape=(None, 3)), pt.tensor3("m", shape=(None, 2, 3))
    v, s = pt.vector("v", shape=(3,)), pt.scalar("s")
    outputs = [x - v, v / x, m * v[None, :], v[:, None] + x[0], m - s]
    model = export_onnx(([x, m, v, s], outputs))
    assert sum(n.op_type == "Unsqueeze" for n in model.graph.node) == 1  # v[:, None] stays
    compare_onnx_and_py(
        [x, m, v, s],
        outputs,
        [
            np.ones((2, 3)),
            np.arange(12.0).reshape(2, 2, 3),
            np.array([1.0, 2.0, 4.0]),
            np.array(3.0),
        ],
    )


def test_a_scalar_against_a_column_keeps_the_column_rank(rng):
    """ONNX Runtime broadcasts a 0-d or 1-element vector against an (..., n, 1) tensor one
    element per call: such constants are given the rank of the node's output, and the leading
    Unsqueeze of a dynamic scalar into a column stays. The values are the same."""
    from onnx import TensorProto, helper, numpy_helper

    from pt_onnxscript.optimize import optimize

    graph = helper.make_graph(
        [
            helper.make_node("Add", ["x", "half"], ["sum"]),
            helper.make_node("Greater", ["x", "zero"], ["positive"]),
            helper.make_node("Where", ["positive", "x", "half"], ["kept"]),
            helper.make_node("Unsqueeze", ["s", "axes"], ["s2"]),
            helper.make_node("Mul", ["x", "s2"], ["scaled"]),
            helper.make_node("Add", ["v", "half"], ["shifted"]),  # a vector: as it was
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", 1]),
            helper.make_tensor_value_info("s", TensorProto.DOUBLE, []),
            helper.make_tensor_value_info("v", TensorProto.DOUBLE, ["n"]),
        ],
        [
            helper.make_tensor_value_info(name, TensorProto.DOUBLE, None)
            for name in ("sum", "kept", "scaled", "shifted")
        ],
        initializer=[
            numpy_helper.from_array(np.array(0.5), "half"),
            numpy_helper.from_array(np.array([0.0]), "zero"),
            numpy_helper.from_array(np.array([0, 1]), "axes"),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    proto.ir_version = 8
    model = ir.from_proto(proto)
    optimize(model)
    ranks = {
        node.op_type + node.outputs[0].name: [
            len(value.const_value.shape) for value in node.inputs if value.const_value is not None
        ]
        for node in model.graph
        if node.op_type in ("Add", "Greater", "Where")
    }
    assert ranks == {"Addsum": [2], "Greaterpositive": [2], "Wherekept": [2], "Addshifted": [0]}
    assert [node.op_type for node in model.graph if node.op_type == "Unsqueeze"] == ["Unsqueeze"]
    x, s, v = rng.normal(size=(5, 1)), np.array(3.0), rng.normal(size=5)
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    got = session.run(["sum", "kept", "scaled", "shifted"], {"x": x, "s": s, "v": v})
    for value, expected in zip(got, [x + 0.5, np.where(x > 0, x, 0.5), x * s, v + 0.5]):
        assert value.shape == expected.shape
        np.testing.assert_array_equal(value, expected)


def test_a_gather_of_constants_past_64_entries_is_folded(rng, caplog):
    """onnx's reference GatherElements (np.choose) fails past 64 entries along its axis: the
    export logged "Evaluation failed" and every call gathered the constant positions of a
    write at constant indices (PyMC's gradient of theta[group]). They are folded."""
    import logging

    v = pt.vector("v")
    index = rng.integers(-1000, 1000, 5000)
    outputs = [pt.inc_subtensor(pt.zeros(1000)[index], v), pt.zeros(1000)[index] + v]
    with caplog.at_level(logging.WARNING):
        model = export_onnx(([v], outputs))
    assert "Evaluation failed" not in caplog.text
    constants = {init.name for init in model.graph.initializer}
    gathers_of_constants = [
        node.name
        for node in model.graph.node
        if node.op_type == "GatherElements" and set(node.input) <= constants
    ]
    assert gathers_of_constants == []
    compare_onnx_and_py([v], outputs, [rng.normal(size=5000)])


def test_a_fold_that_leaves_nothing_to_do_is_not_repeated(monkeypatch, rng):
    """Shapes of static dims fold to Constants that their readers use in the same pass (the
    pass does not visit the nodes it puts in): sorting a matrix of static shape is folded
    once, not a second time to find that nothing changed."""
    from pt_onnxscript import optimize

    folds = []
    fold = optimize._FoldConstants.call
    monkeypatch.setattr(
        optimize._FoldConstants, "call", lambda self, model: folds.append(1) or fold(self, model)
    )
    m = pt.matrix("m", shape=(3, 4))
    export_onnx(([m], [pt.sort(m, axis=0)]))
    assert len(folds) == 1
    compare_onnx_and_py([m], [pt.sort(m, axis=0)], [rng.normal(size=(3, 4))])


def test_nodes_the_fold_leaves_unread_do_not_block_a_rewrite():
    """The fold's replacements leave their old readers dead until removed; the rewrites run
    after that removal, or a pattern that needs its inner value read once (a Reshape of a
    Reshape in det's graph) would not match."""
    a = pt.matrix("a")
    model = export_onnx(([a], [pt.linalg.det(a)]))
    nodes = list(_all_nodes(model.graph))
    producers = {out: node for node in nodes for out in node.output}
    constants = {init.name for init in model.graph.initializer}
    reshaped_twice = [
        node.name
        for node in nodes
        if node.op_type == "Reshape"
        and node.input[1] in constants  # onnxscript's rule merges these
        and getattr(producers.get(node.input[0]), "op_type", None) == "Reshape"
    ]
    assert not reshaped_twice


def test_unread_nodes_are_removed_and_the_pass_skipped_when_there_are_none(monkeypatch):
    """onnx-ir's RemoveUnusedNodesPass (~5 us a node) runs only when something is unread: a
    dead node inside an If's branch, a dead node at top level or an unread initializer go;
    a model with none of them is left to the check alone."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx_ir.passes import common as common_passes

    from pt_onnxscript.optimize import remove_unread

    runs = []
    call = common_passes.RemoveUnusedNodesPass.call
    monkeypatch.setattr(
        common_passes.RemoveUnusedNodesPass,
        "call",
        lambda self, model: runs.append(1) or call(self, model),
    )

    def model(dead_in_branch=False, dead_node=False, dead_initializer=False):
        then_nodes = [helper.make_node("Neg", ["x"], ["t"])]
        if dead_in_branch:
            then_nodes.append(helper.make_node("Exp", ["x"], ["unread_in_branch"]))
        then = helper.make_graph(
            then_nodes, "then", [], [helper.make_tensor_value_info("t", TensorProto.DOUBLE, [2])]
        )
        other = helper.make_graph(
            [helper.make_node("Abs", ["x"], ["e"])],
            "else",
            [],
            [helper.make_tensor_value_info("e", TensorProto.DOUBLE, [2])],
        )
        nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
        if dead_node:
            nodes.append(helper.make_node("Sqrt", ["x"], ["unread"]))
        initializers = [numpy_helper.from_array(np.ones(2), "unread_w")] if dead_initializer else []
        graph = helper.make_graph(
            nodes,
            "g",
            [
                helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2]),
            ],
            [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])],
            initializer=initializers,
        )
        opsets = [helper.make_opsetid("", 18)]
        return ir.from_proto(helper.make_model(graph, opset_imports=opsets))

    clean = model()
    remove_unread(clean)
    assert runs == []
    assert op_types(ir.to_proto(clean)) == ["If", "Abs", "Neg"]
    for dead in ("dead_in_branch", "dead_node", "dead_initializer"):
        runs.clear()
        pruned = model(**{dead: True})
        remove_unread(pruned)
        assert runs == [1]
        assert op_types(ir.to_proto(pruned)) == ["If", "Abs", "Neg"]
        assert list(pruned.graph.initializers) == []


def test_a_check_that_fails_on_constants_is_left_to_fail_at_run_time(caplog):
    """A check whose condition is known at export to fail (a normal draw of constant scale
    -1) is not folded: the folding logged "Evaluation failed: index 1 is out of bounds" at
    every export and compilation. It raises when run, as PyTensor's Python linker does."""
    x = pt.random.normal(0.0, -1.0, size=2, rng=pytensor.shared(np.random.default_rng(0)))
    with caplog.at_level("WARNING"):
        fn = pytensor.function([], x, mode="ONNX")
    assert "Evaluation failed" not in caplog.text
    with pytest.raises(ValueError, match="scale < 0"):
        fn()


def test_a_constant_output_logs_no_warning(caplog):
    """onnx-ir warns that an initializer which is a graph output is not deduplicated: a
    constant output (here a gradient that does not depend on x) is the model's right, and
    every compilation in mode "ONNX" would print it."""
    x = pt.vector("x")
    outs = [x.sum(), pytensor.grad(x.sum(), x), pt.ones(3) * 2]
    with caplog.at_level("WARNING"):
        fn = pytensor.function([x], outs, mode="ONNX")
        export_onnx(([x], outs))
    assert not [r for r in caplog.records if r.name.startswith("onnx_ir")], caplog.text
    np.testing.assert_array_equal(fn(np.ones(3))[2], [2.0, 2.0, 2.0])


@pytest.mark.parametrize("optimize", [True, False])
def test_constants_onnx_runtime_takes_for_0_or_1_are_kept(optimize):
    """ONNX Runtime's NoopElimination drops x + c and x * c when c, rounded to float32, is 0
    or 1 (runtime_gaps.QUIRKS["noop_elimination_float32_unit"]): the exported model and mode
    "ONNX" keep them (the optimiser's constants; with optimize=False, those the translation
    writes as constants)."""
    x = pt.dvector("x")
    outs = [
        pt.log(pt.abs(x) + 1e-300),
        pt.exp(x) * (1 + 4e-8),
        pt.sqrt(pt.abs(x)) / (1 - 2e-8),
        (pt.abs(x) - 1e-310) * 2,
    ]
    values = [np.array([0.0, 1.0, -2.5])]
    if optimize:
        compare_onnx_and_py([x], outs, values, rtol=1e-15)
    model = export_onnx(([x], outs), optimize=optimize)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"x": values[0]})
    expected = pytensor.function([x], outs, mode=PY_MODE)(*values)
    for g, e in zip(got, expected, strict=True):  # dropping c is off by 2e-8 or more
        np.testing.assert_allclose(g, e, rtol=1e-15, atol=0)


def test_a_singular_determinant_is_positive_zero_inside_a_graph():
    """det's + 0.0 (NumPy's +0.0 for a singular matrix) survives ONNX Runtime's
    NoopElimination when det is not the graph's output and its shape is static."""
    m = pt.dmatrix("m")
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    compare_onnx_and_py([m], [pt.linalg.det(m) * 2], [singular], more_inputs=[[-singular]])


def test_a_reciprocal_times_a_value_rounds_twice(rng):
    """Mul(Div(1, x), y), as a scripted function writes (1 / x) * y, rounds twice; ONNX
    Runtime's DivMulFusion would make it Div(y, x) (runtime_gaps.QUIRKS["div_mul_fusion"]):
    the exported Div(1, x) is a Reciprocal, the same value."""
    from onnx import TensorProto, helper, numpy_helper

    from pt_onnxscript.optimize import guard_against_runtime_rewrites

    graph = helper.make_graph(
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node("Div", ["one", "a"], ["r"]),
            helper.make_node("Mul", ["r", "y"], ["z"]),
        ],
        "g",
        [helper.make_tensor_value_info(n, TensorProto.DOUBLE, ["n"]) for n in ("x", "y")],
        [helper.make_tensor_value_info("z", TensorProto.DOUBLE, ["n"])],
        initializer=[numpy_helper.from_array(np.array(1.0), "one")],
    )
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    model.ir_version = 8
    guard_against_runtime_rewrites(model)
    assert op_types(ir.to_proto(model)) == ["Abs", "Reciprocal", "Mul"]
    assert not model.graph.initializers  # the 1 only the Div read (ONNX Runtime warned)
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    x, y = rng.uniform(1, 10, 1000), rng.uniform(1, 10, 1000)
    exact = (1 / x) * y
    assert not np.array_equal(exact, y / x)  # the fusion's answer differs
    np.testing.assert_array_equal(session.run(None, {"x": x, "y": y})[0], exact)


@pytest.mark.parametrize(
    "op_type, constant",
    [
        ("Add", np.array(0.0)),
        ("Sub", np.array(-0.0)),
        ("Add", np.array(0.0, np.float32)),
        ("Sub", np.array([-0.0], np.float16)),
        ("Add", np.array(1e-300)),
        ("Sub", np.array([5e-324])),
        ("Mul", np.array(1 + 4e-8)),
        ("Div", np.array([[1 - 2e-8]])),
    ],
)
def test_operations_onnx_runtime_would_drop_are_kept(op_type, constant):
    """NoopElimination's cases that are not the identity, in an ONNX graph: x + 0.0 and
    x - (-0.0) at x = -0.0 (+0.0), and float64 constants that round to float32's 0 or 1."""
    from onnx import helper, numpy_helper

    from pt_onnxscript.optimize import guard_against_runtime_rewrites

    dtype = helper.np_dtype_to_tensor_dtype(constant.dtype)
    graph = helper.make_graph(
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node("Neg", ["a"], ["b"]),
            helper.make_node(op_type, ["b", "c"], ["t"]),
            helper.make_node("Neg", ["t"], ["y"]),  # (NoopElimination keeps graph outputs)
        ],
        "g",
        [helper.make_tensor_value_info("x", dtype, [2, 3])],
        [helper.make_tensor_value_info("y", dtype, None)],
        initializer=[numpy_helper.from_array(constant, "c")],
    )
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    model.ir_version = 8
    guard_against_runtime_rewrites(model)
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    x = np.array([[0.0, 3.0, 1e-300], [-0.0, 7.0, 2.0]], constant.dtype)
    b = -np.abs(x)
    expected = {"Add": b + constant, "Sub": b - constant, "Mul": b * constant}.get(op_type)
    if expected is None:
        expected = b / constant
    got = -session.run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("sizes", [[1, 3, 2], None])
def test_a_split_of_a_constant_is_folded(sizes, caplog):
    """onnxscript folds nodes of one output only and logged "Skipping constant folding for op
    Split with multiple outputs" for each Split of a constant (the Sturm recurrence's rows in
    the eigendecomposition of a constant covariance, multivariate_normal(method="eigh")),
    which then ran at every call. Split is folded with NumPy, by sizes or in equal parts."""
    import onnx

    from pt_onnxscript.optimize import optimize

    value = np.arange(12.0).reshape(6, 2)
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [2])
    outputs = [
        onnx.helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.DOUBLE, None) for i in range(3)
    ]
    inputs = ["c"] + (["sizes"] if sizes is not None else [])
    nodes = [
        onnx.helper.make_node(
            "Split", inputs, ["p0", "p1", "p2"], axis=0, **({} if sizes else {"num_outputs": 3})
        ),
        *(onnx.helper.make_node("Add", [f"p{i}", "x"], [f"y{i}"]) for i in range(3)),
    ]
    initializers = [onnx.numpy_helper.from_array(value, "c")]
    if sizes is not None:
        initializers.append(onnx.numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    graph = onnx.helper.make_graph(nodes, "split", [x], outputs, initializers)
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model = ir.serde.deserialize_model(proto)
    with caplog.at_level("WARNING"):
        optimize(model)
    assert "Skipping constant folding" not in caplog.text
    assert [node.op_type for node in model.graph] == ["Add"] * 3
    session = ort.InferenceSession(ir.serde.serialize_model(model).SerializeToString())
    got = session.run(None, {"x": np.array([0.5, -1.0])})
    parts = np.split(value, np.cumsum(sizes or [2, 2, 2])[:-1], axis=0)
    for result, part in zip(got, parts, strict=True):
        np.testing.assert_array_equal(result, part + np.array([0.5, -1.0]))


def test_a_slice_of_one_index_along_a_static_axis_is_a_gather(rng, opset):
    """Slices that keep one index of an axis of static size read it by Gather (ONNX
    Runtime's faster kernel); a Slice that may keep none (an axis of symbolic size, a start
    past the end), keeps several or steps stays a Slice. The values are the same."""
    x = pt.tensor("x", shape=(None, 4, 5))
    outputs = [
        x[:, 2:3],
        x[..., -1:],
        x[:, -9:1],  # clamped to index 0
        x[1:2],  # symbolic size: maybe empty
        x[:, 4:],  # empty
        x[:, 1:3],
        x[:, ::3],
        x[:, 1:2, 3:4],  # two axes in one Slice
    ]
    model = export_onnx(([x], outputs), opset=opset)
    producers = {o: node for node in model.graph.node for o in node.output}
    initializers = {t.name: t for t in model.graph.initializer}

    def gathered(output):
        node = producers[output.name]
        if node.op_type != "Gather":
            return node.op_type
        (axis,) = (a.i for a in node.attribute if a.name == "axis")
        index = ir.serde.deserialize_tensor(initializers[node.input[1]]).numpy().tolist()
        return axis, index

    assert [gathered(o) for o in model.graph.output] == [
        (1, [2]),
        (2, [4]),
        (1, [0]),
        *["Slice"] * 5,
    ]
    compare_onnx_and_py([x], outputs, [rng.normal(size=(3, 4, 5))], opset=opset)
    compare_onnx_and_py([x], outputs, [np.zeros((0, 4, 5))], opset=opset)


@pytest.mark.parametrize("how", ["export", "mode ONNX"])
def test_nothing_of_an_exported_model_stays_alive(how):
    """onnxscript's rewrite rules are module-level objects whose matchers kept the graph, node
    and match they last tried: each export's whole model, its weights included, stayed alive
    after the export (or the compiled function) was gone, until the next export."""
    import gc

    x = pt.matrix("x", shape=(None, 3))
    w = pytensor.shared(np.ones((3, 3)), name="probe_weight")
    y = pt.maximum(x @ w + 1, 0)  # a Relu: the rules for Relu are tried
    if how == "export":
        export_onnx(pytensor.function([x], y))
    else:
        fn = pytensor.function([x], y, mode="ONNX")
        np.testing.assert_array_equal(fn(np.ones((2, 3))), np.full((2, 3), 4.0))
        del fn
    del w, y
    gc.collect()
    # type(), not isinstance: ir.Value's Protocol check reads `__class__`, which a dead
    # weakref proxy among the collector's objects raises on.
    alive = [
        obj for obj in gc.get_objects() if type(obj) is ir.Value and obj.name == "probe_weight"
    ]
    assert not alive


def test_reshapes_keep_tensors_of_no_elements_working():
    """onnxscript's Flatten -> Reshape(x, [0, -1]) failed in ONNX Runtime for x of shape
    (0, 3, 4), and its Reshape shape read from the inferred output shape, [-1, 0] under
    allowzero=1, made an invalid model: neither is taken there, and a Flatten whose trailing
    dims are static still becomes a Reshape."""
    x = pt.tensor3("x")
    fn = pytensor.function([x], x.reshape((x.shape[0], -1)), mode="ONNX")
    assert fn(np.zeros((0, 3, 4))).shape == (0, 12)
    assert fn(np.zeros((2, 0, 4))).shape == (2, 0)
    static = pt.tensor("static", shape=(None, 3, 4))
    model = export_onnx(pytensor.function([static], static.reshape((static.shape[0], -1))))
    assert [node.op_type for node in model.graph.node] == ["Reshape"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert session.run(None, {"static": np.zeros((0, 3, 4))})[0].shape == (0, 12)
    empty = pt.tensor("empty", shape=(None, 0, 4))
    fn = pytensor.function([empty], empty.reshape((empty.shape[0], 2, 0)), mode="ONNX")
    assert fn(np.zeros((3, 0, 4))).shape == (3, 2, 0)
    assert fn(np.zeros((0, 0, 4))).shape == (0, 2, 0)
