"""The comparison helper used by the test suite: mode "ONNX" and exported files vs PyTensor."""

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytensor
from pytensor.compile.mode import Mode

from pt_onnxscript.export import export_onnx
from pt_onnxscript.linker import onnx_mode
from pt_onnxscript.translate import DEFAULT_OPSET

PY_MODE = Mode(linker="py", optimizer=None)


def py_reference(fn, *args):
    """Call `fn` (compiled in `PY_MODE`) with PyTensor's default mode set to `PY_MODE`, so
    that the inner graphs of its OpFromGraphs (PyTensor 3's softmax, AllocDiag, ...), which
    compile in the default mode when first run, run in the Python linker too."""
    with pytensor.config.change_flags(mode=PY_MODE):
        return fn(*args)


TOLERANCES = {"float16": (1e-3, 1e-3), "float32": (1e-6, 1e-6), "float64": (1e-12, 1e-14)}


def assert_same(actual, expected, *, rtol=None, atol=None, what="output", signed_zeros=True):
    """Exact dtype and shape; values equal (floats within per-dtype tolerance, NaNs equal,
    zeros of the same sign unless `signed_zeros` is False)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind == "f":
        default_rtol, default_atol = TOLERANCES[expected.dtype.name]
        np.testing.assert_allclose(
            actual,
            expected,
            rtol=default_rtol if rtol is None else rtol,
            atol=default_atol if atol is None else atol,
            equal_nan=True,
            err_msg=what,
        )
        if signed_zeros:
            zeros = (actual == 0) & (expected == 0)
            np.testing.assert_array_equal(
                np.signbit(actual[zeros]), np.signbit(expected[zeros]), err_msg=f"{what}: -0.0"
            )
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


def executed_nodes(model: onnx.ModelProto, feeds: dict, directory) -> list[tuple[str, list]]:
    """(op type, input shapes) of each node ONNX Runtime ran for `feeds`, Loop and If bodies
    included, from its profile (written under `directory`): the shapes a translation's nodes
    really meet, for tests of how the work is laid out (the profile's times are not usable:
    profiling adds several us per node)."""
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(Path(directory) / "profile")
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    session.run(None, feeds)
    with open(session.end_profiling()) as file:
        events = json.load(file)
    return [
        (
            event["args"]["op_name"],
            [next(iter(shape.values())) for shape in event["args"]["input_type_shape"]],
        )
        for event in events
        if event.get("cat") == "Node" and "op_name" in event["args"]
    ]


def relative_error(got, expected):
    """Elementwise |got - expected| / |expected| (below the smallest normal float64, the absolute
    error over it); 0 where both are equal, infinities and NaNs included."""
    got, expected = np.asarray(got, dtype="float64"), np.asarray(expected, dtype="float64")
    same = (got == expected) | (np.isnan(got) & np.isnan(expected))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - expected) / np.maximum(np.abs(expected), np.finfo(float).tiny)
    return np.where(same, 0.0, err)


def compare_onnx_and_py(
    graph_inputs: Sequence,
    graph_outputs,
    test_inputs: Sequence,
    *,
    more_inputs: Sequence[Sequence] = (),
    opset: int = DEFAULT_OPSET,
    rtol: float | None = None,
    atol: float | None = None,
    expected_ops: Sequence[str] | None = None,
    forbidden_ops: Sequence[str] = (),
    signed_zeros: bool = True,
):
    """Compare mode "ONNX" and its model, written to a file and read back by a new ONNX
    Runtime session, with PyTensor's Python linker.

    Both must give PyTensor's dtypes and shapes exactly and its values (floats within
    per-dtype tolerances). The exported model must pass the full ONNX check.
    `expected_ops` lists op types that must all appear in the model, `forbidden_ops` op
    types that must not. Zeros must have PyTensor's signs unless `signed_zeros` is False
    (where the reference's are its implementation's choice: which of equal zeros NumPy's sort
    puts first, LAPACK's). `more_inputs` are further sets of test inputs, checked with the
    same compiled functions and exported file (with symbolic shapes, one compilation covers
    many sizes). Returns the ONNX-mode function and its results for `test_inputs`.
    """
    single = not isinstance(graph_outputs, list | tuple)
    outputs = [graph_outputs] if single else list(graph_outputs)
    py_fn = pytensor.function(graph_inputs, outputs, mode=PY_MODE, on_unused_input="ignore")
    onnx_fn = pytensor.function(
        graph_inputs, outputs, mode=onnx_mode(opset), on_unused_input="ignore"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        # The model mode "ONNX" runs is what export_onnx writes for a graph of these inputs
        # (the same rewrites and translation): written and read back, it is not translated
        # twice. A graph with shared variables or random states (inputs of the compiled
        # graph beyond `graph_inputs`, which mode "ONNX" may bake) gets its own export.
        if len(onnx_fn.maker.fgraph.inputs) == len(graph_inputs):
            ir.save(onnx_fn.vm.jit_fn.model, path)
        else:
            export_onnx((graph_inputs, outputs), path, opset=opset)
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path))
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    results_names = [o.name for o in model.graph.output[: len(outputs)]]
    read = {name for node in _all_nodes(model.graph) for name in node.input}
    read |= {output.name for output in model.graph.output}
    unused = [i.name for i in model.graph.initializer if i.name not in read]
    assert not unused, f"the exported model has initializers no node reads: {unused}"

    first = None
    for case, inputs in enumerate([test_inputs, *more_inputs]):
        where = f" (input set {case})" if more_inputs else ""
        expected = py_reference(py_fn, *[np.copy(x) for x in inputs])
        results = onnx_fn(*[np.copy(x) for x in inputs])
        for i, (res, exp) in enumerate(zip(results, expected, strict=True)):
            what = f"mode ONNX output {i}{where}"
            assert_same(res, exp, rtol=rtol, atol=atol, what=what, signed_zeros=signed_zeros)
        # Mode "ONNX"'s model outputs the values its Prints print after the graph's outputs.
        # A scalar (pytensor.scalar) input is a 0-d tensor of the file.
        feeds = [np.asarray(x) for x in inputs]
        file_results = session.run(results_names, dict(zip(names, feeds, strict=True)))
        for i, (res, exp) in enumerate(zip(file_results, expected, strict=True)):
            what = f"exported file output {i}{where}"
            assert_same(res, exp, rtol=rtol, atol=atol, what=what, signed_zeros=signed_zeros)
        first = results if first is None else first

    op_types = {node.op_type for node in _all_nodes(model.graph)}
    for name in expected_ops or ():
        assert name in op_types, f"{name} not in the exported model's ops {sorted(op_types)}"
    for name in forbidden_ops:
        assert name not in op_types, f"{name} in the exported model's ops {sorted(op_types)}"
    return onnx_fn, first[0] if single else first


def compare_errors_onnx_and_py(graph_inputs: Sequence, graph_outputs, test_inputs: Sequence):
    """Run the graph on `test_inputs` in mode "ONNX" and with PyTensor's Python linker:
    both must raise, ours an instance of the exception class PyTensor's is (a subclass of
    it may say more). Returns (ours, PyTensor's) for their messages to be checked."""
    outputs = graph_outputs if isinstance(graph_outputs, list | tuple) else [graph_outputs]
    functions = [
        pytensor.function(graph_inputs, outputs, mode=mode, on_unused_input="ignore")
        for mode in (onnx_mode(), PY_MODE)
    ]
    raised = []
    for fn, call in zip(functions, [lambda f, *a: f(*a), py_reference], strict=True):
        try:
            call(fn, *[np.copy(x) for x in test_inputs])
        except Exception as err:  # noqa: BLE001  (what is compared)
            raised.append(err)
        else:
            raise AssertionError(f"{fn.maker.mode} did not raise for {test_inputs}")
    ours, theirs = raised
    assert isinstance(ours, type(theirs)), (
        f'mode "ONNX" raised {type(ours).__name__}({ours}), PyTensor '
        f"{type(theirs).__name__}({theirs})"
    )
    return ours, theirs


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            for g in attr.graphs:
                yield from _all_nodes(g)
