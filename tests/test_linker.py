import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode, get_mode
from pytensor.graph.traversal import ancestors

from pt_onnxscript import ExecutionError, ONNXLinker
from pt_onnxscript.testing import PY_MODE, assert_same, compare_onnx_and_py


def test_mode_onnx_is_registered():
    mode = get_mode("ONNX")
    assert isinstance(mode.linker, ONNXLinker)
    x = pt.vector("x")
    f = pytensor.function([x], pt.exp(x), mode="ONNX")
    assert_same(f(np.array([0.0, 1.0])), np.exp([0.0, 1.0]))


def test_mode_rebuilt_from_linker_and_optimizer_keeps_onnx_rewrites():
    """PyMC rebuilds modes as Mode(linker, optimizer): the ONNX rewrite choices must survive."""
    onnx = get_mode("ONNX")
    rebuilt = Mode(linker=onnx.linker, optimizer=onnx.provided_optimizer)
    x = pt.vector("x")
    f = pytensor.function([x], [x + 1, pt.exp(x + 1)], mode=rebuilt)
    assert not any(node.op.destroy_map for node in f.maker.fgraph.apply_nodes)
    assert_same(f(np.ones(2))[1], np.exp(np.full(2, 2.0)))


def test_sgd_steps_match_default_mode():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3

    def train(mode):
        w = pytensor.shared(np.zeros(3), name="w")
        b = pytensor.shared(np.array(0.0), name="b")
        xs, ys = pt.matrix("xs"), pt.vector("ys")
        loss = ((xs @ w + b - ys) ** 2).mean()
        gw, gb = pytensor.grad(loss, [w, b])
        step = pytensor.function(
            [xs, ys], loss, updates={w: w - 0.1 * gw, b: b - 0.1 * gb}, mode=mode
        )
        losses = [step(X, y) for _ in range(10)]
        return losses, w.get_value(), b.get_value()

    onnx_losses, onnx_w, onnx_b = train("ONNX")
    ref_losses, ref_w, ref_b = train(None)
    assert onnx_losses[-1] < onnx_losses[0]
    for got, expected in zip(onnx_losses + [onnx_w, onnx_b], ref_losses + [ref_w, ref_b]):
        assert_same(np.asarray(got), np.asarray(expected))


def test_multiple_outputs_0d_inputs_and_constants():
    x = pt.vector("x", dtype="float32")
    s = pt.scalar("s", dtype="int64")
    outputs = [x, pt.constant(np.array([1, 2], dtype="int8")), s, x * 2, x * 2, s * 3]
    compare_onnx_and_py([x, s], outputs, [np.array([1.5, 2.5], "float32"), np.array(4)])


def test_exact_output_dtypes():
    x = pt.vector("x", dtype="int8")
    y = pt.vector("y", dtype="int16")
    outputs = [x + x, pt.cast(x, "bool"), x / y, pt.cast(x, "float16"), x * y]
    f = pytensor.function([x, y], outputs, mode="ONNX")
    results = f(np.array([1, 2], "int8"), np.array([3, 4], "int16"))
    assert [r.dtype for r in results] == [o.dtype for o in outputs]


def test_shared_inputs_change_between_calls():
    w = pytensor.shared(np.array([1.0, 2.0]), name="w")
    x = pt.vector("x")
    f = pytensor.function([x], x * w, mode="ONNX")
    assert_same(f(np.ones(2)), np.array([1.0, 2.0]))
    w.set_value(np.array([5.0, 6.0]))
    assert_same(f(np.ones(2)), np.array([5.0, 6.0]))


def test_shared_shapes_are_specialised_and_a_new_shape_runs_the_general_model():
    w = pytensor.shared(np.ones((3, 2)), name="w")  # dims unknown to PyTensor
    b = pytensor.shared(np.full(2, 0.5), name="b")
    x = pt.matrix("x")
    f = pytensor.function([x], pt.maximum(x @ w + b, 0), mode="ONNX")
    model = f.vm.jit_fn.model
    # Specialised on the shapes w and b have now: no shape checks left, only the math.
    ops = sorted(node.op_type for node in model.graph)
    assert ops == ["Add", "MatMul", "Relu"]
    assert_same(f(np.ones((1, 3))), np.full((1, 2), 3.5))
    w.get_value(borrow=True)[0, 0] = 2.0  # an in-place change is seen: values are fed
    assert_same(f(np.ones((1, 3))), np.array([[4.5, 3.5]]))
    w.set_value(np.ones((4, 5)))
    b.set_value(np.arange(5.0))
    assert_same(f(np.ones((2, 4))), np.tile(np.arange(5.0) + 4, (2, 1)))
    w.set_value(np.ones((3, 2)))  # back to the specialised shapes
    b.set_value(np.zeros(2))
    assert_same(f(np.ones((1, 3))), np.full((1, 2), 3.0))
    b.set_value(np.zeros(3))  # shapes that do not broadcast fail, never broadcast wrongly
    with pytest.raises(Exception, match="broadcast|[Ss]hape|mismatch"):
        f(np.ones((1, 3)))


def test_weights_the_function_does_not_update_are_baked_and_every_change_is_seen():
    from pt_onnxscript.linker import BAKED_ELEMENTS, RESPECIALISATIONS

    w = pytensor.shared(np.array([1.0, 2.0]), name="w")
    big = pytensor.shared(np.ones(BAKED_ELEMENTS + 1, "float32"), name="big")
    count = pytensor.shared(np.array(0.0), name="count")
    x = pt.vector("x")
    f = pytensor.function([x], [x * w, big.sum(), count], updates={count: count + 1}, mode="ONNX")
    inputs = [value.name for value in f.vm.jit_fn.model.graph.inputs]
    assert inputs == ["x", "big", "count"]  # w is an initializer; big is too big to compare
    assert f(np.ones(2))[0].tolist() == [1.0, 2.0]
    changes = [
        lambda: w.set_value(np.array([3.0, 4.0])),
        lambda: w.get_value(borrow=True).__setitem__(0, -0.0),  # in place, sign bit only
        lambda: w.set_value(np.array([np.nan, 1.0])),
        lambda: w.set_value(np.array([5.0, 6.0, 7.0])),  # another shape
        lambda: w.set_value(np.array([8.0, 9.0])),  # past RESPECIALISATIONS: the general model
    ]
    assert len(changes) > RESPECIALISATIONS
    for change in changes:
        change()
        for _ in range(2):
            got = f(np.ones_like(w.get_value()))[0]
            np.testing.assert_array_equal(got, w.get_value())
            assert np.signbit(got).tolist() == np.signbit(w.get_value()).tolist()
    assert f(np.ones(2))[2] == 2 * len(changes) + 1  # the updated variable is fed, as ever
    # The function's model is the one its calls run: now the general one, w an input.
    inputs = [value.name for value in f.vm.jit_fn.model.graph.inputs]
    assert inputs == ["x", "w", "big", "count"]
    big.get_value(borrow=True)[0] = 3.0
    assert f(np.ones(2))[1] == BAKED_ELEMENTS + 3


def test_mode_onnx_runs_the_model_export_writes():
    """A function whose shared values mode "ONNX" bakes (those it does not update, up to
    BAKED_ELEMENTS each) runs the model export_onnx writes of it, node for node: the same
    rewrites of the graph with the weights as constants (the digits CNN's Conv and MaxPool,
    a bias of zeros' `+ 0.0` kept as export keeps it)."""
    from pt_onnxscript import export_onnx
    from pt_onnxscript.demos import digits

    def nodes(graph):
        return [
            (n.op_type, [i.name if i is not None else "" for i in n.inputs], n.attributes)
            for n in graph
        ]

    params = digits.init_params()
    w = pytensor.shared(np.linspace(-1, 1, 6).reshape(3, 2), name="w")
    x = pt.matrix("x", shape=(None, 3))
    for fn in [
        digits.predictor(params, mode="ONNX"),
        pytensor.function([x], pt.tanh(x @ w).sum(axis=1), mode="ONNX"),
    ]:
        ran = fn.vm.jit_fn.model
        exported = ir.serde.deserialize_model(export_onnx(fn))
        assert nodes(ran.graph) == nodes(exported.graph)
        initializers = {
            name: value.const_value.numpy().tobytes()
            for name, value in ran.graph.initializers.items()
        }
        assert initializers == {
            name: value.const_value.numpy().tobytes()
            for name, value in exported.graph.initializers.items()
        }
    assert [n.op_type for n in ran.graph][:2] == ["MatMul", "Tanh"]


def test_sessions_by_default_use_every_core_without_spinning():
    """Mode "ONNX"'s and `sample`'s default sessions: ONNX Runtime's pool of a thread per
    core, its threads sleeping between nodes; a number of threads given is that number."""
    from pt_onnxscript.linker import inference_session, session_options

    x = pt.vector("x")
    fn = pytensor.function([x], pt.exp(x), mode="ONNX")
    config = inference_session(fn.vm.jit_fn.model).get_session_options()
    assert config.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    # ONNX Runtime's default, one per core (this suite's sessions take one: conftest.py).
    assert session_options().intra_op_num_threads == 0
    assert session_options(3).intra_op_num_threads == 3


def test_trusted_inputs_are_converted_to_the_models_dtypes():
    """With trust_input, PyTensor passes the arguments as given: the mode converts them as
    its checks would have (a list, integers for a float input, a 0-d value)."""
    x = pt.vector("x")
    k = pt.scalar("k", dtype="int32")
    f = pytensor.function([x, k], x * k, mode="ONNX")
    f.trust_input = True
    assert_same(f([1, 2, 3], 2), np.array([2.0, 4.0, 6.0]))
    assert_same(f(np.arange(3), np.int64(3)), np.array([0.0, 3.0, 6.0]))


def test_an_update_that_grows_a_shared_variable():
    buffer = pytensor.shared(np.zeros(1), name="buffer")
    x = pt.scalar("x")
    f = pytensor.function(
        [x], buffer.sum(), updates={buffer: pt.concatenate([buffer, x[None]])}, mode="ONNX"
    )
    assert [float(f(v)) for v in (1.0, 2.0, 3.0)] == [0.0, 1.0, 3.0]
    assert buffer.get_value().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_input_with_wrong_shape_raises_instead_of_guessing():
    x = pt.vector("x", shape=(3,))
    f = pytensor.function([x], x + 1, mode="ONNX")
    with pytest.raises(TypeError, match="not compatible"):
        f(np.ones(4))


def test_a_mode_keeps_its_settings_for_every_function_it_compiles():
    from pt_onnxscript import newest_opset, onnx_mode

    mode = onnx_mode(newest_opset(), optimize=False, threads=1)
    x = pt.vector("x")
    for k in (2.0, 3.0):
        fn = pytensor.function([x], x * k + 1, mode=mode)
        linker = fn.maker.linker
        assert (linker.opset, linker.optimize, linker.threads) == (newest_opset(), False, 1)
        assert fn(np.ones(2)).tolist() == [k + 1] * 2


def test_the_optimizer_folds_what_is_known_and_can_be_turned_off():
    from pt_onnxscript import export_onnx

    x = pt.vector("x")
    w = pytensor.shared(np.arange(6.0).reshape(2, 3), name="w")
    out = x * w.sum(axis=0)  # the sum of a baked weight is known at export
    optimized = export_onnx(([x], [out]))
    plain = export_onnx(([x], [out]), optimize=False)
    assert "ReduceSum" not in {node.op_type for node in optimized.graph.node}
    assert len(optimized.graph.node) < len(plain.graph.node)
    for model in (optimized, plain):
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        np.testing.assert_array_equal(session.run(None, {"x": np.ones(3)})[0], [3.0, 5.0, 7.0])


def test_a_call_goes_to_onnx_runtimes_binding_without_the_python_wrapper(monkeypatch):
    """InferenceSession.run re-checks the feeds' names on every call (~3 us); the mode feeds
    its own model's names, so it calls ONNX Runtime's binding, with failures explained."""

    def wrapper(*args, **kwargs):
        raise AssertionError("InferenceSession.run was called")

    monkeypatch.setattr(ort.InferenceSession, "run", wrapper)
    x = pt.vector("x")
    f = pytensor.function([x], [pt.exp(x), x.reshape((2, 2)).sum(0)], mode="ONNX")
    exp, total = f(np.arange(4.0))
    assert_same(exp, np.exp(np.arange(4.0)))
    assert_same(total, np.array([2.0, 4.0]))
    with pytest.raises(ExecutionError, match=r"\(Reshape\)(.|\n)*PyTensor op: Reshape"):
        f(np.ones(3))


@pytest.mark.parametrize(
    "build, values",
    [
        (lambda x, m, k: x + x[1:], [np.ones(3)]),
        (lambda x, m, k: m @ m, [np.ones((2, 3))]),
        (lambda x, m, k: x.reshape((k, -1)), [np.ones(5), np.array(2)]),
        (lambda x, m, k: pt.zeros((k,)), [np.array(-1)]),
        (lambda x, m, k: pt.repeat(x, k), [np.ones(2), np.array(-1)]),
        (lambda x, m, k: pt.broadcast_to(x, (2, 4)), [np.ones(3)]),
    ],
    ids=["broadcast", "matmul", "reshape", "alloc", "repeat", "broadcast_to"],
)
def test_inputs_that_do_not_fit_raise_a_value_error_as_in_pytensor(build, values):
    """PyTensor's modes raise ValueError for these; so does mode "ONNX": its own check's
    ValueError (broadcast_to: Alloc's), or an ExecutionError, which is one."""
    x, m, k = pt.dvector("x"), pt.dmatrix("m"), pt.lscalar("k")
    out = build(x, m, k)
    ins = [v for v in (x, m, k) if v in ancestors([out])]
    with pytest.raises(ValueError):
        pytensor.function(ins, out, mode=PY_MODE)(*values)
    with pytest.raises(ValueError):
        pytensor.function(ins, out, mode="ONNX")(*values)
    assert issubclass(ExecutionError, ValueError)


def test_an_onnx_export_function_is_safe_to_call_from_many_threads():
    """The server's path (docs: thread safety): an @onnx_export function keeps no state
    between calls and ONNX Runtime's run is thread-safe, so 8 threads calling one at once
    each get their own results."""
    import threading

    from pt_onnxscript import onnx_export

    @onnx_export(x=("float64", ("n",)))
    def total(x):
        return pt.exp(x).sum() * 2

    wrong, errors = [], []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(200):
            values = rng.normal(size=int(rng.integers(1, 50)))
            try:
                got = total(values)
            except Exception as err:  # noqa: BLE001  (collected, reported below)
                errors.append(err)
                continue
            if not np.isclose(got, np.exp(values).sum() * 2, rtol=1e-13, atol=0):
                wrong.append((values, got))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and not wrong
