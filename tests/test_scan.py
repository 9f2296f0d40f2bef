import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytensor.compile.mode import Mode
from pytensor.link.vm import VMLinker

from pt_onnxscript.testing import compare_onnx_and_py

# The reference evaluates the inner function in this mode: PyTensor 3's default (Numba) compiles
# slowly, and PyTensor 2.38's Python Scan misreads inner outputs computed inplace.
INNER = Mode(linker=VMLinker(use_cloop=False, c_thunks=False), optimizer=None)


def scan(*args, **kwargs):
    return (
        pytensor.scan(*args, mode=INNER, return_updates=False, **kwargs)
        if _has_return_updates()
        else pytensor.scan(*args, mode=INNER, **kwargs)[0]
    )


def user_scan(*args, **kwargs):
    """pytensor.scan as a user calls it: its step compiled the default way (a compiled
    function's backend rewrites its inner graph in place, fusing, making Ops in-place)."""
    return (
        pytensor.scan(*args, return_updates=False, **kwargs)
        if _has_return_updates()
        else pytensor.scan(*args, **kwargs)[0]
    )


def _has_return_updates():
    import inspect

    return "return_updates" in inspect.signature(pytensor.scan).parameters


@pytest.mark.parametrize("n", [0, 1, 5])
def test_cumulative_sum_and_map(n, rng, opset):
    x = pt.matrix("x")
    acc = scan(lambda row, total: total + row, sequences=[x], outputs_info=[pt.zeros(x.shape[1])])
    squares = scan(lambda row: (row**2).sum(), sequences=[x])
    # The state is carried, its rows stacked by the Loop: no buffer rewritten every step.
    compare_onnx_and_py(
        [x],
        [acc, squares],
        [rng.normal(size=(n, 3))],
        opset=opset,
        expected_ops=["Loop"],
        forbidden_ops=["ScatterND"],
    )


def test_taps_nonsequences_and_symbolic_steps(rng, opset):
    x = pt.vector("x")
    w = pt.scalar("w")
    k = pt.lscalar("k")
    fib = scan(
        lambda x0, x2, a, b, w: (a + b) * w + x0 - x2,
        sequences=[{"input": x, "taps": [0, 2]}],
        outputs_info=[{"initial": pt.ones(3), "taps": [-1, -3]}],
        non_sequences=[w],
    )
    powers = scan(lambda p, w: p * w, outputs_info=[pt.ones(())], non_sequences=[w], n_steps=k)
    values = [rng.normal(size=7), np.array(0.5), np.array(4)]
    compare_onnx_and_py([x, w, k], [fib, powers, fib[-1], powers[-2:]], values, opset=opset)
    values[2] = np.array(0)
    compare_onnx_and_py([x, w, k], [fib, powers], values, opset=opset)


def test_a_negative_number_of_steps_raises_as_in_pytensor():
    """PyTensor's Scan refuses a negative n_steps (IndexError); the Loop failed at a Gather
    of its empty buffer, an ExecutionError that said the translation might be wrong."""
    k = pt.lscalar("k")
    powers = scan(lambda p: p * 2, outputs_info=[pt.ones(())], n_steps=k)
    fn = pytensor.function([k], powers, mode="ONNX")
    np.testing.assert_array_equal(fn(3), [2.0, 4.0, 8.0])
    assert fn(0).shape == (0,)
    with pytest.raises(IndexError, match="Scan was asked to run a negative number of steps"):
        fn(-1)


def test_while_loop_stops_early(rng):
    from pytensor.scan.utils import until

    x = pt.scalar("x")
    limit = pt.scalar("limit")

    def step(v, limit):
        nxt = v * 2
        return nxt, until(nxt > limit)

    doubled = scan(step, outputs_info=[x], non_sequences=[limit], n_steps=10)
    for lim in [0.5, 40.0, 1e9]:
        compare_onnx_and_py([x, limit], [doubled, doubled[-1]], [np.array(1.5), np.array(lim)])


def test_several_outputs_nested_and_special_functions(rng):
    x = pt.matrix("x")

    def outer(row, carry):
        inner = scan(
            lambda v, c: c * v + pt.gammaln(pt.abs(v) + 1),
            sequences=[row],
            outputs_info=[pt.zeros(())],
        )
        return carry + inner[-1], pt.sort(row)[::-1], row.max()

    res = scan(outer, sequences=[x], outputs_info=[pt.zeros(()), None, None])
    compare_onnx_and_py([x], list(res), [rng.normal(size=(4, 3))])


def test_gradient_through_scan(rng):
    x = pt.vector("x")
    w = pt.scalar("w")
    h = scan(
        lambda v, hp, w: pt.tanh(hp * w + v),
        sequences=[x],
        outputs_info=[pt.zeros(())],
        non_sequences=[w],
    )
    loss = (h**2).sum()
    grads = pytensor.grad(loss, [x, w])
    compare_onnx_and_py([x, w], [loss, *grads], [rng.normal(size=6), np.array(0.7)])


@pytest.mark.filterwarnings("ignore:Scan return signature will change")  # updates wanted
def test_shared_variable_updated_inside_a_scan(rng):
    counter = pytensor.shared(np.array(0.0), name="counter")
    x = pt.vector("x")
    if _has_return_updates():
        out, updates = pytensor.scan(
            lambda v: (v * 2, {counter: counter + v}),
            sequences=[x],
            mode=INNER,
            return_updates=True,
        )
    else:
        out, updates = pytensor.scan(
            lambda v: (v * 2, {counter: counter + v}), sequences=[x], mode=INNER
        )
    fn = pytensor.function([x], out, updates=updates, mode="ONNX")
    np.testing.assert_allclose(fn(np.arange(4.0)), np.arange(4.0) * 2)
    assert counter.get_value() == 6.0


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(0, 40),
    taps=st.sampled_from([[-1], [-2], [-1, -3], [-2, -1]]),
    keep=st.integers(1, 3),
)
def test_random_lengths_and_taps(n, taps, keep):
    x = pt.vector("x")
    depth = -min(taps)
    out = scan(
        lambda v, *prev: sum(prev) * 0.5 + v,
        sequences=[x],
        outputs_info=[{"initial": pt.arange(depth, dtype="float64"), "taps": taps}],
    )
    compare_onnx_and_py([x], [out, out[-keep:]], [np.linspace(-1, 1, n)])


def test_loops_nested_in_loops(rng):
    """Subgraph value names stay unique when control flow nests (Scan, IfElse, cumprod)."""
    from pytensor.ifelse import ifelse

    x = pt.matrix("x")

    def step(row, carry):
        inner = scan(lambda v, c: c + v, sequences=[pt.cumprod(row)], outputs_info=[pt.zeros(())])
        return ifelse(carry > 0, carry - inner[-1], carry + pt.cumprod(row).sum())

    out = scan(step, sequences=[x], outputs_info=[pt.ones(())])
    compare_onnx_and_py([x], out, [rng.normal(size=(4, 3))])


def test_inner_graphs_get_the_outer_rewrites():
    v = pt.vector("v", dtype="float32")
    ys = pytensor.scan(lambda x: pt.log(1 + x), sequences=[v], return_updates=False)
    fn = pytensor.function([v], ys, mode="ONNX")
    np.testing.assert_allclose(
        fn(np.array([1e-8, 1e-3], "float32")), np.log1p([1e-8, 1e-3]).astype("float32"), rtol=1e-6
    )


def test_no_runtime_warning_when_a_loop_runs_no_step(capfd, rng):
    # The optimiser splits a small Scan body's Loop into a remainder and an unrolled Loop,
    # one of which runs no step for some lengths (both for 0). A session with ONNX Runtime's
    # default logging (mode "ONNX" turns it off) printed "Loop had zero iterations and the
    # shape of subgraph output ... was not found" at every such call until Loop bodies
    # declared their carried values' ranks.
    import onnxruntime as ort

    from pt_onnxscript import export_onnx

    x = pt.matrix("x")
    acc = scan(lambda row, total: 0.9 * total + row, sequences=[x], outputs_info=[pt.zeros(3)])
    model = export_onnx(([x], [acc]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    capfd.readouterr()
    for n in (0, 8, 16, 40):
        value = rng.normal(size=(n, 3))
        expected = np.zeros((n, 3))
        for t in range(n):
            expected[t] = 0.9 * (expected[t - 1] if t else 0) + value[t]
        np.testing.assert_allclose(session.run(None, {"x": value})[0], expected, rtol=1e-12)
    assert "zero iterations" not in capfd.readouterr().err
