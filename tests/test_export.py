import gc

import numpy as np
import onnx
import onnxruntime as ort
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.tensor.elemwise import CAReduce, Elemwise
from test_scan import user_scan

from pt_onnxscript import (
    DEFAULT_OPSET,
    UnsupportedOpError,
    UnsupportedTypeError,
    export_onnx,
    newest_opset,
    onnx_export,
)
from pt_onnxscript.testing import assert_same, compare_onnx_and_py


def run(path_or_model, **feeds):
    if isinstance(path_or_model, onnx.ModelProto):
        path_or_model = path_or_model.SerializeToString()
    session = ort.InferenceSession(path_or_model, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def dims_of(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_export_graph_writes_a_checked_model(tmp_path):
    x = pt.matrix("x", shape=(None, 3))
    path = tmp_path / "m.onnx"
    model = export_onnx(([x], [pt.exp(x) + 1]), path)
    onnx.checker.check_model(str(path), full_check=True)
    assert onnx.load(str(path)) == model
    assert model.producer_name == "pt_onnxscript"
    assert [(o.domain, o.version) for o in model.opset_import] == [("", DEFAULT_OPSET)]
    assert model.ir_version <= 8
    assert [i.name for i in model.graph.input] == ["x"]
    assert dims_of(model.graph.input[0]) == ["x_dim0", 3]
    xv = np.arange(6.0).reshape(2, 3)
    (out,) = run(str(path), x=xv)
    assert_same(out, np.exp(xv) + 1)


def test_node_names_trace_back_to_pytensor_nodes():
    x = pt.vector("x")
    model = export_onnx(([x], [pt.exp(x) * 2]))
    names = [n.name for n in model.graph.node]
    assert any("Exp" in n for n in names) and any("Mul" in n for n in names)


def test_models_carry_their_provenance():
    """The model's doc_string and metadata say what was exported with which versions; each
    node names the PyTensor node it translates and the user's line that built it (as
    torch.onnx's stack traces), for Netron and other readers."""
    import json

    x = pt.vector("x")
    scale = pt.scalar("scale")
    y = (pt.exp(x) * scale).sum()  # the line the nodes point back to
    model = export_onnx(([x, scale], [y]), output_names=["total"])
    assert f"PyTensor {pytensor.__version__}" in model.doc_string
    assert "inputs x, scale; outputs total" in model.doc_string
    metadata = {p.key: p.value for p in model.metadata_props}
    assert metadata["pytensor.version"] == pytensor.__version__
    assert set(json.loads(metadata["pytensor.outputs"])) == {"total"}
    for node in model.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        assert props["pkg.pytensor.node"] in props["namespace"]
        assert props["pkg.pytensor.source"].endswith(
            "y = (pt.exp(x) * scale).sum()  # the line the nodes point back to"
        )
        assert __file__ in props["pkg.pytensor.source"]


def test_a_notebook_cells_temporary_file_is_not_recorded():
    from pt_onnxscript.translate import _source_line

    x = pt.vector("x")
    y = x + 1
    y.tag.trace = [[("/tmp/ipykernel_4242/1234567.py", 3, "<module>", "y = x + 1")]]
    assert _source_line(y.owner) == "<notebook cell>:3: y = x + 1"


@pytest.mark.parametrize("opset", sorted({DEFAULT_OPSET, newest_opset()}))
def test_opset_choice(opset):
    x = pt.vector("x", dtype="float32")
    model = export_onnx(([x], [x * 2]), opset=opset)
    assert model.opset_import[0].version == opset
    assert_same(run(model, x=np.ones(2, "float32"))[0], np.full(2, 2, "float32"))


def test_dims_named_fixed_or_symbolic():
    x = pt.tensor3("x", dtype="float32", shape=(None, None, 4))
    model = export_onnx(([x], [x * 2]), dims={"x": ("batch", 5, 4)})
    assert dims_of(model.graph.input[0]) == ["batch", 5, 4]
    assert dims_of(model.graph.output[0]) == ["batch", 5, 4]
    for batch in (0, 1, 7):
        xv = np.ones((batch, 5, 4), "float32")
        assert run(model, x=xv)[0].shape == (batch, 5, 4)
    with pytest.raises(Exception, match="x"):
        run(model, x=np.ones((2, 6, 4), "float32"))


@pytest.mark.parametrize(
    "dims, match",
    [
        ({"x": ("batch",)}, "has 1 entries"),
        ({"x": ("batch", 3)}, "is 4 in the PyTensor graph"),
        ({"y": ("batch", 4)}, "names inputs"),
        ({"x": (1.5, 4)}, "must be an int, a name or None"),
    ],
)
def test_bad_dims_are_reported(dims, match):
    x = pt.matrix("x", shape=(None, 4))
    with pytest.raises((ValueError, TypeError), match=match):
        export_onnx(([x], [x + 1]), dims=dims)


@pytest.mark.parametrize(
    "names, match",
    [
        (["a", "a"], "'a' more than once"),
        (["x", "b"], "also an input's name"),
        (["", "b"], "non-empty strings"),
        (["a"], "sequence of 2 names"),
        ("ab", "sequence of 2 names"),
    ],
)
def test_output_names_are_used_as_given_or_refused(names, match):
    x = pt.vector("x")
    with pytest.raises(ValueError, match=match):
        export_onnx(([x], [x + 1, x * 2]), output_names=names)
    model = export_onnx(([x], [x + 1, x * 2]), output_names=["a", "b"])
    assert [o.name for o in model.graph.output] == ["a", "b"]


def test_a_failed_run_names_the_node_the_pytensor_op_and_the_users_line():
    from pt_onnxscript import ExecutionError

    x = pt.matrix("x")

    @onnx_export(x=("float64", (None, None)))
    def flat3(x):
        return x.reshape((3, -1))  # the line the error names

    with pytest.raises(ExecutionError) as info:
        flat3(np.ones((2, 2)))
    message = str(info.value)
    assert "node '" in message and "(Reshape)" in message
    assert "PyTensor op: Reshape{2}" in message
    assert "test_export.py" in message and "the line the error names" in message
    assert "cannot be reshaped to the requested shape" in message
    assert "inputs: x float64 (2, 2)" in message
    assert "onnxruntime" in type(info.value.__cause__).__module__  # ONNX Runtime's, chained
    f = pytensor.function([x], x @ x, mode="ONNX")
    with pytest.raises(ExecutionError, match=r"\(MatMul\)(.|\n)*PyTensor op: Dot"):
        f(np.ones((2, 3)))


def test_shared_variables_baked_or_inputs():
    w = pytensor.shared(np.array([1.0, 2.0]), name="w")
    x = pt.vector("x")
    baked = export_onnx(([x], [x * w]))
    assert [i.name for i in baked.graph.input] == ["x"]
    assert "w" in [init.name for init in baked.graph.initializer]
    assert_same(run(baked, x=np.ones(2))[0], np.array([1.0, 2.0]))

    kept = export_onnx(([x], [x * w]), shared="input")
    assert [i.name for i in kept.graph.input] == ["x", "w"]
    assert_same(run(kept, x=np.ones(2), w=np.array([3.0, 4.0]))[0], np.array([3.0, 4.0]))

    with pytest.raises(ValueError, match="shared must be one of"):
        export_onnx(([x], [x * w]), shared="copy")


def test_compiled_function_with_updates_exports_new_values():
    w = pytensor.shared(np.array([1.0, -1.0]), name="w")
    x = pt.vector("x")
    loss = x * w * x * w
    f = pytensor.function([x], loss, updates={w: w - 0.5 * x})
    model = export_onnx(f, shared="input", output_names=["loss"])
    assert [o.name for o in model.graph.output] == ["loss", "w_updated"]
    xv, wv = np.array([2.0, 3.0]), np.array([1.0, -1.0])
    loss_v, new_w = run(model, x=xv, w=wv)
    assert_same(loss_v, f(xv))
    assert_same(new_w, wv - 0.5 * xv)
    assert_same(new_w, w.get_value())


def test_baking_leaves_shared_values_alone_under_in_place_updates():
    # A compiled function updates t, a counter and Adam's power of beta1 in place (t + 1,
    # ...): baked as constants, PyTensor's constant folding ran those in-place Ops on the
    # shared variables' own arrays, so exporting changed them, and the model's outputs read
    # the changed values while its updates read the old ones.
    t = pytensor.shared(np.zeros(3), name="t")
    count = pytensor.shared(np.int64(0), name="count")
    power = pytensor.shared(np.float64(0.9), name="power")
    x = pt.vector("x")
    f = pytensor.function(
        [x],
        [t * 2 + x, t.sum(), count + 0, power * 1],
        updates={t: t + 1, count: count + 1, power: power * 0.9},
    )
    before = [v.get_value() for v in (t, count, power)]
    model = export_onnx(f)
    assert [i.name for i in model.graph.input] == ["x"]
    for var, value in zip((t, count, power), before, strict=True):
        assert_same(var.get_value(), value, what=var.name)
    exported = run(model, x=np.ones(3))
    expected = f(np.ones(3))
    for got, want in zip(
        exported, [*expected, t.get_value(), count.get_value(), power.get_value()], strict=True
    ):
        assert_same(got, want)

    steps = pytensor.shared(np.int64(0), name="steps")
    export_onnx(pytensor.function([x], x * 2, updates={steps: steps + 1}))
    assert_same(steps.get_value(), np.array(0))


def _in_place_on_baked(case):
    """Outputs over a baked w whose compiled graph (PyTensor's default mode) has an in-place
    Op destroying a value that only w's computes (so it folds) and that another output reads."""
    w = pytensor.shared(np.arange(6.0).reshape(2, 3), name="w")
    x = pt.vector("x")
    gram = pt.dot(w, w.T) + pt.eye(2)
    if case == "cholesky":
        return x, [gram.sum() * x, pt.linalg.cholesky(gram)]
    if case == "solve":
        b = w.sum(1) * 2
        return x, [b.sum() * x, pt.linalg.solve(gram, b)]
    if case == "add":
        return x, [pt.dot(w, w.T).sum() * x, pt.dot(w, w.T) + 1]
    a = pt.exp(w).sum(0)
    return x, [a.sum() * x, pt.inc_subtensor(a[0], 5.0)]


@pytest.mark.parametrize("case", ["cholesky", "solve", "add", "inc_subtensor"])
def test_baked_values_fold_through_in_place_ops_on_copies(case):
    # PyTensor's constant folding ran the compiled graph's in-place Ops (a Cholesky
    # overwriting its matrix, a Solve its right-hand side, an in-place add or increment) on
    # the folded constants' own arrays, which the other outputs read: the model computed
    # them from the destroyed values.
    x, outputs = _in_place_on_baked(case)
    fn = pytensor.function([x], outputs)
    assert any(node.op.destroy_map for node in fn.maker.fgraph.apply_nodes)
    model = export_onnx(fn)
    value = np.array([1.0, 2.0, 3.0])
    for got, expected in zip(run(model, x=value), fn(value), strict=True):
        assert_same(got, expected)


@pytest.mark.parametrize(
    "reduce",
    [
        lambda w: pt.exp(w).sum(0),
        lambda w: (w**2).sum(),  # an L2 penalty
        lambda w: pt.exp(w).prod(0),
        lambda w: abs(w).mean(0),
    ],
    ids=["sum_exp", "sum_sqr", "prod_exp", "mean_abs"],
)
def test_a_reduction_fused_by_pytensor_238_folds_as_its_parts(reduce):
    # PyTensor 2.38's C backend fuses sum(exp(w)) into one CAReduce of
    # Composite{i0 + exp(i1)}, whose Python implementation (what constant folding runs)
    # starts from w[0], not exp(w[0]): a baked w gave sum(exp(w)) - exp(w[0]) + w[0].
    w = pytensor.shared(np.arange(6.0).reshape(2, 3) - 2, name="w")
    x = pt.vector("x")
    fn = pytensor.function([x], reduce(w) * x)
    fused = [
        node
        for node in fn.maker.fgraph.apply_nodes
        if isinstance(node.op, CAReduce) and isinstance(node.op.scalar_op, ps.Composite)
    ]
    if not fused:
        pytest.skip("PyTensor 3's default mode fuses no reduction with an Elemwise")
    value = np.array([1.0, 2.0, 3.0])
    for shared in ("bake", "input"):
        feeds = {"x": value} if shared == "bake" else {"x": value, "w": w.get_value()}
        assert_same(run(export_onnx(fn, shared=shared), **feeds)[0], fn(value))


def _scan_over_baked(case):
    """A Scan whose step reduces a function of a shared variable: baked, Scan's rewrites push
    the reduction out of the loop and fold it."""
    rng = np.random.default_rng(0)
    if case == "mit_sot":
        c = pytensor.shared(np.array([0.6, -0.2]), name="c")
        x = pt.vector("x")
        ys = user_scan(
            lambda xt, y2, y1: c[0] * y1 + c[1] * y2 + xt + pt.exp(c).prod(),
            sequences=[x],
            outputs_info=[{"initial": pt.zeros(2), "taps": [-2, -1]}],
        )
        return c, x, ys, rng.normal(size=8)
    w = pytensor.shared(rng.normal(size=(3, 3)) * 0.5, name="w")
    b = pytensor.shared(np.ones(3), name="b")
    x = pt.matrix("x")
    hs = user_scan(  # w and b read by the step, not passed: Scan makes them non-sequences
        lambda xt, h: pt.tanh(pt.dot(h, w) + xt + pt.exp(b).sum()),
        sequences=[x],
        outputs_info=[pt.zeros(3)],
    )
    return w, x, hs, rng.normal(size=(5, 3))


@pytest.mark.parametrize("mode", ["FAST_RUN", "FAST_COMPILE"])
@pytest.mark.parametrize("case", ["mit_sot", "implicit_non_sequences"])
def test_baked_values_a_scan_reduces_fold_as_their_parts(case, mode):
    # A Scan's inner graph compiled by the C linker holds fused reductions (CAReduce of
    # Composite{i0 + exp(i1)}), in PyTensor 3 too; baked, Scan's rewrites pushed the reduction
    # of the now constant input out of the loop and folded it with PyTensor's own folding
    # (constant_folding_for_scan2), whose Python implementation of a fused reduction is
    # wrong: the mit-sot recursion's outputs were off by 2x.
    shared, x, outputs, value = _scan_over_baked(case)
    fn = pytensor.function([x], outputs, mode=mode)
    before = shared.get_value().copy()
    model = export_onnx(fn)
    assert_same(shared.get_value(), before, what="the shared variable")
    assert_same(run(model, x=value)[0], fn(value))


def test_a_compiled_gradient_through_a_scan_exports_baked():
    # Rewritten again after baking, Scan's scan_push_out_add met an Add(Dot, Dot, carried)
    # of the compiled gradient's loop and stopped the export with an AssertionError (it
    # expects an Add of two inputs; PyTensor 3's default mode).
    w = pytensor.shared(np.random.default_rng(0).normal(size=(3, 3)), name="w")
    x = pt.matrix("x")

    def step(xt, h, w):
        chol = pt.linalg.cholesky(w @ w.T + pt.eye(3))
        return pt.tanh(pt.linalg.solve_triangular(chol, h + xt, lower=True))

    hs = user_scan(step, sequences=[x], outputs_info=[pt.zeros(3)], non_sequences=[w])
    fn = pytensor.function([x], [hs, pytensor.grad(hs.sum(), w), (w @ w.T).sum()])
    value = np.random.default_rng(1).normal(size=(4, 3))
    for got, expected in zip(run(export_onnx(fn), x=value), fn(value), strict=True):
        assert_same(got, expected)


def test_export_function_compiled_in_default_mode(tmp_path):
    x = pt.matrix("x", dtype="float32", shape=(None, 3))
    f = pytensor.function([x], [pt.exp(x) * 2 - x])
    xv = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    export_onnx(f, tmp_path / "f.onnx")
    assert_same(run(str(tmp_path / "f.onnx"), x=xv)[0], f(xv)[0])


class Custom(Op):
    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0]


class CustomScalar(ps.UnaryScalarOp):
    def impl(self, x):
        return x

    def c_code(self, node, name, inputs, outputs, sub):
        return f"{outputs[0]} = {inputs[0]};"


def test_every_unsupported_op_is_reported_at_once():
    x = pt.vector("x")
    custom_elemwise = Elemwise(CustomScalar(ps.upgrade_to_float, name="custom_scalar"))
    graph = Custom()(Custom()(x)) + custom_elemwise(x)
    with pytest.raises(UnsupportedOpError) as info:
        export_onnx(([x], [graph]))
    message = str(info.value)
    assert "Custom (2 nodes)" in message
    assert "Elemwise(CustomScalar) (1 node)" in message
    assert "pt_onnxscript.register" in message


def test_the_garbage_collector_waits_for_an_export_and_is_left_as_it_was():
    # An export makes millions of objects that live until it ends; the collector's passes
    # over them (a quarter of a large export's time) wait for its end, and then run once.
    x = pt.matrix("x", shape=(None, 4))
    h = x
    for _ in range(60):
        h = pt.tanh(h @ pt.constant(np.eye(4)) + 1)
    passes = []

    def count(phase, info):
        if phase == "start":
            passes.append(info["generation"])

    gc.callbacks.append(count)
    try:
        export_onnx(([x], [h]))
    finally:
        gc.callbacks.remove(count)
    assert len(passes) <= 1
    assert gc.isenabled()
    with pytest.raises(UnsupportedOpError):
        export_onnx(([x], [Custom()(x)]))
    assert gc.isenabled()
    gc.disable()
    try:
        export_onnx(([x], [h]))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_unsupported_composite_member_is_reported():
    x = pt.vector("x")
    custom = CustomScalar(ps.upgrade_to_float, name="custom_scalar")
    xs = ps.float64("xs")
    composite = Elemwise(ps.Composite([xs], [custom(xs) + 1]))
    with pytest.raises(UnsupportedOpError, match=r"Elemwise\(CustomScalar\)"):
        export_onnx(([x], [composite(x)]))


def test_unsupported_ops_say_which_inner_graph_holds_them_and_give_hints():
    """An unsupported op inside a Scan (named) inside an OpFromGraph is reported with where it
    is; common unsupported linear algebra comes with what to use instead."""
    from pytensor.compile.builders import OpFromGraph

    x = pt.vector("x")
    inner = pt.vector("inner")
    steps = pytensor.scan(
        lambda v: Custom()(v), outputs_info=[inner], n_steps=3, name="my_loop", return_updates=False
    )
    wrapped = OpFromGraph([inner], [steps[-1]])
    m = pt.matrix("m")
    with pytest.raises(UnsupportedOpError) as info:
        export_onnx(([x, m], [wrapped(x), pt.linalg.eig(m)[0].real]))
    message = str(info.value)
    assert "Custom, inside Scan 'my_loop', inside OpFromGraph (1 node)" in message
    assert "for a symmetric matrix use eigh" in message


def test_scipy_optimizers_are_refused_with_the_way_out():
    optimize = pytest.importorskip("pytensor.tensor.optimize")
    x = pt.scalar("x")
    y = x.type("y")
    solution, _ = optimize.minimize((y - x) ** 2, y)
    with pytest.raises(UnsupportedOpError, match="MinimizeOp.*feed the solution as an input"):
        export_onnx(([x, y], [solution]))


def test_python_functions_and_breakpoints_are_refused_with_the_way_out():
    from pytensor.breakpoint import PdbBreakpoint
    from pytensor.compile.ops import as_op

    @as_op(itypes=[pt.dvector], otypes=[pt.dvector])
    def doubled(v):
        return v * 2

    x = pt.dvector("x")
    stop = PdbBreakpoint("stop")(x.sum() > 1, x)[0]
    with pytest.raises(UnsupportedOpError) as info:
        export_onnx(([x], [doubled(x), stop, pt.hyp2f1(1.0, 2.0, 3.0, x)]))
    message = str(info.value)
    assert "FromFunctionOp (it runs a Python function (as_op)" in message
    assert "PdbBreakpoint (a Python debugger breakpoint" in message
    assert "Elemwise(Hyp2F1) (no ONNX translation yet" in message


def test_non_tensor_input_is_a_type_error_naming_it():
    z = pt.vector("z", dtype="complex128")
    with pytest.raises(TypeError, match="z.*complex128"):
        export_onnx(([z], [z + z]))


def test_bad_source_is_a_type_error():
    with pytest.raises(TypeError, match="compiled pytensor.function or an"):
        export_onnx(lambda x: x)


def test_decorator_with_named_and_fixed_dims(tmp_path):
    @onnx_export(x=("float32", ("batch", 3)), scale=pt.scalar(dtype="float32"))
    def affine(x, scale):
        return pt.exp(x) * scale, x + 1

    assert [i.name for i in affine.model.graph.input] == ["x", "scale"]
    assert dims_of(affine.model.graph.input[0]) == ["batch", 3]
    assert dims_of(affine.model.graph.output[0]) == ["batch", 3]
    onnx.checker.check_model(affine.model, full_check=True)
    xv = np.ones((4, 3), "float32")
    out, plus = affine(xv, np.float32(2))
    assert_same(out, np.exp(xv) * np.float32(2))
    assert_same(plus, xv + 1)
    affine.save(tmp_path / "affine.onnx")
    assert_same(run(str(tmp_path / "affine.onnx"), x=xv, scale=np.array(2, "float32"))[0], out)


def test_decorator_single_output_and_keyword_call():
    @onnx_export(x=pt.vector("ignored", dtype="float64"))
    def double(x):
        return x * 2

    assert [i.name for i in double.model.graph.input] == ["x"]
    assert_same(double(x=[1.0, 2.0]), np.array([2.0, 4.0]))


def test_decorated_calls_go_to_onnx_runtimes_binding(monkeypatch):
    """As mode "ONNX", a decorated function feeds its model's own inputs, so its calls skip
    InferenceSession.run's checks of the feeds' names (~3 us) and call the binding."""
    import onnxruntime as ort

    from pt_onnxscript import ExecutionError

    def wrapper(*args, **kwargs):
        raise AssertionError("InferenceSession.run was called")

    monkeypatch.setattr(ort.InferenceSession, "run", wrapper)

    @onnx_export(x=("float64", (None,)), k=pt.scalar(dtype="int64"))
    def scaled(x, k):
        return x.reshape((2, -1)) * k, x.sum()

    rows, total = scaled(np.arange(4.0), k=3)
    assert_same(rows, np.array([[0.0, 3.0], [6.0, 9.0]]))
    assert_same(total, np.array(6.0))
    with pytest.raises(ExecutionError, match=r"\(Reshape\)"):
        scaled(np.ones(3), 1)


def test_decorator_rejects_bad_specs_and_inputs():
    with pytest.raises(TypeError, match=r"missing: \['y'\]"):

        @onnx_export(x=("float32", (3,)))
        def f(x, y):
            return x + y

    with pytest.raises(TypeError, match="must be a PyTensor variable"):

        @onnx_export(x="float32")
        def g(x):
            return x

    @onnx_export(x=("float32", (None, 3)))
    def h(x):
        return x * 2

    with pytest.raises(TypeError, match=r"'x' is float32, got float64.*astype"):
        h(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"'x' has shape \(2, 4\)"):
        h(np.ones((2, 4), "float32"))

    # A dim named in two inputs is one size (ONNX Runtime broadcast a 1, or failed in a node).
    @onnx_export(x=("float64", ("n",)), y=("float64", ("n", 2)))
    def outer(x, y):
        return x[:, None] * y

    assert outer(np.ones(3), np.ones((3, 2))).shape == (3, 2)
    for x, y in [(np.ones(3), np.ones((1, 2))), (np.ones(1), np.ones((3, 2)))]:
        with pytest.raises(
            ValueError, match=r"'y' has shape .*: dim 'n' is \d there, \d in input 'x'"
        ):
            outer(x, y)


DETERMINISM_SCRIPT = """
import sys
import numpy as np, pytensor, pytensor.tensor as pt
from pytensor.ifelse import ifelse
from pt_onnxscript import export_onnx

def model_bytes():
    x = pt.vector("x")
    a = pt.matrix("a")
    ys = pytensor.scan(
        lambda v, acc: acc * 0.5 + v, sequences=[x], outputs_info=[pt.zeros(())], return_updates=False
    )
    out = [ys, ifelse(x.sum() > 0, x * 2, x - 1), pt.linalg.cholesky(a), pt.cumprod(x), pt.gammainc(x, x)]
    return export_onnx(([x, a], out)).SerializeToString()

if __name__ == "__main__":
    sys.stdout.buffer.write(model_bytes())
"""


@pytest.mark.slow  # fresh interpreters under several hash seeds
def test_exports_are_byte_identical_across_runs_and_hash_seeds():
    import os
    import subprocess
    import sys

    files = []
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        files.append(
            subprocess.run(
                [sys.executable, "-c", DETERMINISM_SCRIPT], env=env, capture_output=True, check=True
            ).stdout
        )
    assert files[0] and files[0] == files[1] == files[2]
    # Twice more in this process, after other graphs were built: the same bytes.
    scope = {}
    exec(DETERMINISM_SCRIPT, scope)  # noqa: S102  (the script the subprocesses run)
    first = scope["model_bytes"]()
    y = pt.vector("y")
    export_onnx(([y], [pt.gammaincc(y, 2 * y) + pt.gammainc(y, y)]))
    assert first == scope["model_bytes"]() == files[0]


@pytest.mark.parametrize("opset", [11, 13, 17, 10_000, "18", 18.0])
def test_unsupported_opsets_fail_at_once_naming_the_range(opset):
    x = pt.vector("x")
    match = rf"opset {opset!r} is not supported: pt_onnxscript writes opsets 18 to {newest_opset()}"
    with pytest.raises(ValueError, match=match):
        export_onnx(([x], [x * 2]), opset=opset)
    with pytest.raises(ValueError, match=match):
        onnx_export(x=("float64", (None,)), opset=opset)(lambda x: x * 2)
    from pt_onnxscript import onnx_mode

    with pytest.raises(ValueError, match=match):
        onnx_mode(opset)


def test_decorator_spec_shapes_are_checked_and_printed_as_written():
    with pytest.raises(
        TypeError, match=r"must be a tuple with one entry per dim, such as \('batch',\)"
    ):
        onnx_export(x=("float32", "batch"))(lambda x: x)
    with pytest.raises(ValueError, match=r"size >= 0.*-3"):
        onnx_export(x=("float32", ("batch", -3)))(lambda x: x)
    with pytest.raises(TypeError, match="must be a tuple"):
        v = pt.vector("x")
        export_onnx(([v], [v * 2]), dims={"x": "batch"})

    @onnx_export(x=("float32", ("batch", 4)))
    def f(x):
        return x + 1

    with pytest.raises(ValueError, match=r"expected \('batch', 4\)"):
        f(np.ones((2, 3), "float32"))


def test_dims_that_contradict_the_graph_are_a_clear_error():
    x = pt.vector("x")
    y = pt.vector("y")
    with pytest.raises(ValueError, match=r"dims given .* contradict the graph"):
        export_onnx(([x, y], [x + y]), dims={"x": (3,), "y": (4,)})


def test_decorator_refuses_lossy_conversions_of_python_values():
    @onnx_export(i=("int32", (None,)), u=("uint8", (None,)), f=("float32", (None,)))
    def g(i, u, f):
        return i * 2, u + 1, f * 2

    assert_same(g([1, 2], [3, 255], [0.5, 1e38])[0], np.array([2, 4], "int32"))
    with pytest.raises(ValueError, match=r"'i' is int32, and \[1.7, 2.2\] cannot be converted"):
        g([1.7, 2.2], [1], [1.0])
    with pytest.raises(ValueError, match=r"'u' is uint8, and \[300, -1\]"):
        g([1], [300, -1], [1.0])
    with pytest.raises(ValueError, match=r"'f' is float32, and \[1e\+300\]"):
        g([1], [1], [1e300])
    with pytest.raises(ValueError, match=r"'i' is int32"):
        g([2**40], [1], [1.0])


def test_decorator_with_shared_inputs_feeds_their_values():
    w = pytensor.shared(np.array([1.0, 2.0]), name="W")

    @onnx_export(x=("float64", (2,)), shared="input")
    def scale(x):
        return x * w

    assert scale.input_names == ["x", "W"]
    assert_same(scale(np.ones(2)), np.array([1.0, 2.0]))
    w.set_value(np.array([3.0, 4.0]))
    assert_same(scale(np.ones(2)), np.array([3.0, 4.0]))
    assert_same(scale(np.ones(2), W=np.array([5.0, 6.0])), np.array([5.0, 6.0]))


def test_a_decorated_function_refuses_a_baked_value_set_since_export():
    # Its model holds the value the shared variable had at export: after set_value, a call
    # silently computed with the old one.
    w = pytensor.shared(np.array([1.0, 2.0]), name="W")

    @onnx_export(x=("float64", (2,)))
    def scale(x):
        return x * w

    assert scale.input_names == ["x"]
    assert_same(scale(np.ones(2)), np.array([1.0, 2.0]))
    w.set_value(np.array([3.0, 4.0]))
    with pytest.raises(ValueError, match=r"'W' was set after scale was exported.*shared=.input"):
        scale(np.ones(2))


@pytest.mark.filterwarnings("ignore:Setting default_update is deprecated")
def test_a_decorated_function_refuses_to_bake_what_it_updates():
    # A shared variable with a default_update changes at every call of a PyTensor function;
    # baked, the decorated function computed with its first value at every call.
    count = pytensor.shared(np.float64(0.0), name="count")
    count.default_update = count + 1
    with pytest.raises(ValueError, match=r"updates shared variables \['count'\].*shared=.input"):

        @onnx_export(x=("float64", (2,)))
        def shift(x):
            return x + count

    @onnx_export(x=("float64", (2,)), shared="input")
    def shifted(x):
        return x + count

    assert_same(shifted(np.zeros(2)), np.zeros(2))
    assert_same(shifted(np.zeros(2)), np.ones(2))
    assert_same(count.get_value(), np.array(2.0))


def test_sparse_and_non_tensor_variables_are_type_errors_naming_them():
    import pytensor.sparse as ps_sparse

    s = ps_sparse.csr_matrix("s", dtype="float64")
    with pytest.raises(TypeError, match="s.*sparse"):
        export_onnx(([s], [ps_sparse.dense_from_sparse(s) * 2]))
    from pytensor.typed_list import TypedListType

    items = TypedListType(pt.dvector)("my_list")
    with pytest.raises(TypeError, match="my_list.*not a tensor"):
        export_onnx(([items], [items[0] * 2]))


def test_every_problem_is_listed_in_one_error_whatever_finds_it():
    """A sparse input, a typed-list output and an Op without a translation: one
    UnsupportedOpError (also a TypeError, for the variables) that lists all three, from
    export_onnx and mode "ONNX" alike (a typed-list output crashed mode "ONNX" with an
    AttributeError before it)."""
    import pytensor.sparse as ps_sparse
    from pytensor.typed_list import make_list

    s = ps_sparse.csr_matrix("s", dtype="float64")
    x = pt.dmatrix("x")
    outputs = [ps_sparse.dense_from_sparse(s).sum() + pt.linalg.eig(x)[0].real.sum()]
    for build in [
        lambda: export_onnx(([s, x], outputs)),
        lambda: pytensor.function([s, x], outputs, mode="ONNX"),
    ]:
        with pytest.raises(UnsupportedTypeError) as raised:
            build()
        message = str(raised.value)
        assert isinstance(raised.value, UnsupportedOpError | TypeError)
        assert "s" in message and "is sparse" in message
        assert "Eig (complex eigenvalues" in message and "DenseFromSparse" in message
    v = pt.dvector("v")
    for build in [
        lambda: export_onnx(([v], [make_list([v, v])])),
        lambda: pytensor.function([v], make_list([v, v]), mode="ONNX"),
    ]:
        with pytest.raises(UnsupportedTypeError, match=r"MakeList.0 .*not a tensor(.|\n)*MakeList"):
            build()


@pytest.mark.parametrize(
    "make",
    [
        lambda: (v := pt.vector("v", shape=(1,)), pt.var(v)),
        lambda: (v := pt.vector("v", shape=(1,)), pt.std(v)),
        lambda: (m := pt.lmatrix("m"), pt.mean(pt.isinf(m))),
        lambda: (x := pt.matrix("x"), pt.mean(pt.zeros_like(x))),
    ],
    ids=["var", "std", "mean_isinf", "mean_zeros_like"],
)
def test_outputs_pytensor_folds_to_a_named_constant_export(make):
    # PyTensor folds each to a constant named like the output ("var", "mean"): its
    # initializer and the output shared the name ("Initializer 'var' is already registered").
    x, out = make()
    value = np.ones((1,) * x.type.ndim, dtype=x.type.dtype)
    compare_onnx_and_py([x], out, [value])
    model = export_onnx(([x], [out]))
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == [out.name]


def test_small_model_forced_to_external_data(tmp_path):
    w = pytensor.shared(np.arange(1000.0), name="w")
    x = pt.vector("x")
    path = tmp_path / "m.onnx"
    model = export_onnx(([x], [x.sum() * w]), path, external_data=True)
    assert (tmp_path / "m.onnx.data").stat().st_size >= 8000
    assert path.stat().st_size < 8000
    (weights,) = [t for t in model.graph.initializer if t.name == "w"]
    assert weights.data_location == onnx.TensorProto.EXTERNAL
    onnx.checker.check_model(str(path), full_check=True)
    assert_same(run(str(path), x=np.ones(3))[0], 3 * np.arange(1000.0))
    loaded = onnx.load(str(path))
    (weights,) = [t for t in loaded.graph.initializer if t.name == "w"]
    assert_same(onnx.numpy_helper.to_array(weights)[:3], np.arange(3.0))
    with pytest.raises(ValueError, match="needs a path"):
        export_onnx(([x], [x.sum() * w]), external_data=True)


@pytest.mark.slow  # writes and reads 2 GB
def test_model_over_two_gigabytes_uses_external_data(tmp_path):
    n = 2**31 // 4 + 1024  # float32: just over 2 GB
    w = pytensor.shared(np.ones(n, "float32"), name="w", shape=(n,), borrow=True)
    x = pt.vector("x", dtype="float32")
    out = x * w[: x.shape[0]]  # not foldable at export: the weights stay in the model
    path = tmp_path / "big.onnx"
    model = export_onnx(([x], [out]), path)
    assert (tmp_path / "big.onnx.data").stat().st_size >= 2**31
    assert model.ByteSize() < 2**20
    assert_same(run(str(path), x=np.ones(3, "float32"))[0], np.ones(3, "float32"))
    with pytest.raises(ValueError, match="over 2 GB"):
        export_onnx(([x], [out]))
    fn = pytensor.function([x], out, mode="ONNX")
    assert_same(fn(np.full(3, 2, "float32")), np.full(3, 2, "float32"))


def test_a_model_failing_onnxs_checker_is_reported_as_our_bug(monkeypatch):
    from pt_onnxscript import TranslationError

    def failing_check(*args, **kwargs):
        raise onnx.checker.ValidationError("Field 'type' of 'value_info' is required")

    monkeypatch.setattr(onnx.checker, "check_model", failing_check)
    x = pt.vector("x")
    with pytest.raises(TranslationError, match="fails ONNX's full check.*report it") as info:
        export_onnx(([x], [x + 1]))
    assert isinstance(info.value.__cause__, onnx.checker.ValidationError)
    with pytest.raises(ValueError, match="dims given"):  # with dims, those are at fault
        export_onnx(([x], [x + 1]), dims={"x": ("n",)})


def test_outputs_that_are_inputs_or_repeated_stay_distinct_graph_outputs():
    """An input returned as is, and one value returned twice, are each their own graph output
    (an Identity each: ONNX names every output once), after the optimiser too."""
    x = pt.vector("x")
    y = x * 2
    model = export_onnx(([x], [x, y, y, x]))
    names = [value.name for value in model.graph.output]
    assert len(set(names)) == 4 and "x" not in names
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    value = np.array([1.0, -2.0])
    for got, expected in zip(session.run(None, {"x": value}), [value, 2 * value, 2 * value, value]):
        np.testing.assert_array_equal(got, expected)


def test_dims_given_as_a_list_say_what_they_should_be():
    x = pt.matrix("x")
    with pytest.raises(TypeError, match="dims must map input names to their dims.*not a list"):
        export_onnx(([x], [x * 2]), dims=[("n", "m")])
