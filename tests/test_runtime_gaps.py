"""The facts of pt_onnxscript.runtime_gaps, probed again on the installed ONNX Runtime: an
upgrade that adds or drops a kernel, or fixes a quirk, fails here and names the entry."""

import functools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from pt_onnxscript.runtime_gaps import DTYPES, KERNELS, QUIRKS, has_kernel, kernel_dtype


def _run(op_type, feeds, initializers=(), outputs=1, **attributes):
    """Run one `op_type` node on `feeds` in a fresh CPU session; its first output."""
    inputs = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in feeds.items()
    ]
    names = [*feeds, *(name for name, _ in initializers)]
    node = helper.make_node(op_type, names, [f"y{k}" for k in range(outputs)], **attributes)
    graph = helper.make_graph(
        [node],
        "probe",
        inputs,
        [onnx.ValueInfoProto(name=f"y{k}") for k in range(outputs)],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in initializers],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)[0]


def _ones(dtype, shape=(2, 3)):
    return np.ones(shape, dtype=dtype)


def _axes():
    return [("axes", np.array([1], dtype=np.int64))]


# How to run each op type of KERNELS on operands of one dtype.
PROBES = {
    "Where": lambda d: _run(
        "Where", {"c": np.array([True, False]), "a": _ones(d, (2,)), "b": _ones(d, (2,))}
    ),
    "MatMul": lambda d: _run("MatMul", {"x": _ones(d, (2, 2)), "y": _ones(d, (2, 2))}),
    "CumSum": lambda d: _run("CumSum", {"x": _ones(d)}, [("axis", np.array(0))]),
    "TopK": lambda d: _run("TopK", {"x": _ones(d)}, [("k", np.array([2]))], outputs=2),
    "Unique": lambda d: _run("Unique", {"x": _ones(d)}, outputs=4, sorted=1),
    "Conv": lambda d: _run("Conv", {"x": _ones(d, (1, 1, 3, 3)), "w": _ones(d, (1, 1, 2, 2))}),
    "Det": lambda d: _run("Det", {"x": _ones(d, (2, 2))}),
}


def _binary(op_type, dtype):
    return _run(op_type, {"x": _ones(dtype), "y": _ones(dtype)})


def _reduction(op_type, dtype):
    return _run(op_type, {"x": _ones(dtype)}, _axes())


def _unary(op_type, dtype):
    return _run(op_type, {"x": _ones(dtype)})


for _name in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Max", "Min"):
    PROBES[_name] = functools.partial(_binary, _name)
for _name in ("ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin"):
    PROBES[_name] = functools.partial(_reduction, _name)
for _name in ("ArgMax", "ArgMin", "IsInf", "NonZero", "Erf", "Tan", "Asin", "Acos", "Atan"):
    PROBES[_name] = functools.partial(_unary, _name)
for _name in ("Sinh", "Cosh", "Asinh", "Acosh", "Atanh"):
    PROBES[_name] = functools.partial(_unary, _name)


def test_every_kernel_fact_has_a_probe():
    assert set(KERNELS) == set(PROBES)


@pytest.mark.parametrize("op_type", sorted(KERNELS))
def test_kernels_are_as_recorded(op_type):
    found = []
    for dtype in DTYPES:
        try:
            PROBES[op_type](dtype)
            ran = True
        except Exception:  # noqa: BLE001  (ONNX Runtime's errors share no base class)
            ran = False
        if ran != has_kernel(op_type, dtype):
            found.append(f"{dtype}: {'now runs' if ran else 'no longer runs'}")
    assert not found, (
        f"ONNX Runtime {ort.__version__}'s {op_type} differs from "
        f"pt_onnxscript/runtime_gaps.py (update KERNELS[{op_type!r}]): {found}"
    )


@pytest.mark.parametrize(
    ("op_type", "dtype", "keep", "expected"),
    [
        ("Where", "bool", "bits", "uint8"),
        ("Where", "int16", "bits", "int32"),
        ("Where", "uint16", "bits", "uint32"),
        ("Where", "uint64", "bits", "int64"),
        ("Where", "float64", "values", "float64"),
        ("Max", "uint16", "values", "uint32"),
        ("ReduceMax", "uint16", "values", "int32"),
        ("ReduceMax", "uint32", "values", "int64"),
        ("MatMul", "int8", "bits", "int32"),
        ("TopK", "float16", "values", "float16"),
        ("IsInf", "float16", "values", "float32"),
    ],
)
def test_kernel_dtype_holds_the_values(op_type, dtype, keep, expected):
    assert kernel_dtype(op_type, dtype, keep) == expected


def test_kernel_dtype_names_what_is_missing():
    with pytest.raises(ValueError, match="no ReduceMax kernel for uint64"):
        kernel_dtype("ReduceMax", "uint64")
    with pytest.raises(ValueError, match='keep must be "values" or "bits"'):
        kernel_dtype("Where", "bool", keep="order")


# Each quirk, shown on the installed ONNX Runtime (True while it is still there).
QUIRK_PROBES = {
    "where_negative_zero": lambda: (
        not np.signbit(
            _run("Where", {"c": np.array([True]), "a": np.array([-0.0]), "b": np.array([1.0])})[0]
        )
    ),
    "integer_reduce_saturates": lambda: (
        _run("ReduceSum", {"x": np.array([2**62, 2**62])}, [("axes", np.array([0]))], keepdims=0)
        == np.iinfo(np.int64).max
    ),
    "unique_nan": lambda: (
        not np.array_equal(
            _run("Unique", {"x": np.array([1.0, np.nan, np.nan])}, sorted=1),
            np.unique(np.array([1.0, np.nan, np.nan])),
            equal_nan=True,
        )
    ),
    "float16_sign_nan": lambda: _run("Sign", {"x": np.array([np.nan], np.float16)})[0] == 0,
    "not_where_fusion": lambda: not np.signbit(_where_of_not([True], [1.0], [-0.0])[0]),
    "float64_sin_cos": lambda: _relative_error_of_sin_near_zeros() > 1e-6,
    "noop_elimination_float32_unit": lambda: _after_abs("Mul", np.array(1 + 4e-8))[1] == -3.0,
    "div_mul_fusion": lambda: not np.array_equal(*_reciprocal_times()),
    "reduce_max_skips_nan": lambda: (
        _run("ReduceMax", {"x": np.array([[4.0, np.nan]])}, _axes(), keepdims=0)[0] == 4.0
    ),
    "max_pool_skips_nan": lambda: (
        not np.isnan(
            _run("MaxPool", {"x": np.array([[[[4.0, np.nan], [1.0, 2.0]]]])}, kernel_shape=[2, 2])
        ).any()
    ),
    "log_softmax_non_finite": lambda: np.isfinite(
        _run("LogSoftmax", {"x": np.array([1.0, 2.0, np.nan])})[:2]
    ).all(),
    "concat_skips_empty": lambda: _concat_of_empty().shape == (2, 3),
    "matmul_transpose_vector": lambda: not np.allclose(*_transposed_times_vector()),
}


def _transposed_times_vector():
    """MatMul(Transpose(x), v) of a 5 x 4 x and a vector v in ONNX Runtime, and x.T @ v."""
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("MatMul", ["t", "v"], ["y"]),
        ],
        "probe",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [5, 4]),
            helper.make_tensor_value_info("v", onnx.TensorProto.DOUBLE, [5]),
        ],
        [onnx.ValueInfoProto(name="y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x, v = np.arange(20.0).reshape(5, 4), np.linspace(-1, 2, 5)
    return session.run(None, {"x": x, "v": v})[0], x.T @ v


def _concat_of_empty():
    """Concat along axis 0 of a (2, 3) and a (0, 2) matrix, both of symbolic shape."""
    graph = helper.make_graph(
        [helper.make_node("Concat", ["x", "y"], ["z"], axis=0)],
        "probe",
        [
            helper.make_tensor_value_info(name, onnx.TensorProto.DOUBLE, [f"{name}0", f"{name}1"])
            for name in ("x", "y")
        ],
        [onnx.ValueInfoProto(name="z")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.ones((2, 3)), "y": np.ones((0, 2))})[0]


def _after_abs(op_type, constant):
    """-op(Abs(x), constant) on x = [0, 3], ONNX Runtime's optimizer on (it removes no node
    that reads a graph input or gives a graph output)."""
    graph = helper.make_graph(
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node(op_type, ["a", "c"], ["t"]),
            helper.make_node("Neg", ["t"], ["y"]),
        ],
        "probe",
        [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, ["n"])],
        [onnx.ValueInfoProto(name="y")],
        initializer=[onnx.numpy_helper.from_array(constant, "c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.array([0.0, 3.0])})[0]


def _reciprocal_times():
    """Mul(Div(1, Abs(x)), y) from ONNX Runtime, and (1 / |x|) * y from NumPy."""
    graph = helper.make_graph(
        [
            helper.make_node("Abs", ["x"], ["a"]),
            helper.make_node("Div", ["one", "a"], ["r"]),
            helper.make_node("Mul", ["r", "y"], ["z"]),
        ],
        "probe",
        [
            helper.make_tensor_value_info(name, onnx.TensorProto.DOUBLE, ["n"])
            for name in ("x", "y")
        ],
        [onnx.ValueInfoProto(name="z")],
        initializer=[onnx.numpy_helper.from_array(np.array(1.0), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    x, y = np.linspace(1.0, 10.0, 1000), np.linspace(3.0, 7.0, 1000)
    return session.run(None, {"x": x, "y": y})[0], (1 / x) * y


def _where_of_not(c, a, b):
    """Where(Not(c), a, b) as a two-node model (ONNX Runtime may fuse the Not away)."""
    feeds = {"c": np.array(c), "a": np.array(a), "b": np.array(b)}
    graph = helper.make_graph(
        [
            helper.make_node("Not", ["c"], ["n"]),
            helper.make_node("Where", ["n", "a", "b"], ["y"]),
        ],
        "probe",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in feeds.items()
        ],
        [onnx.ValueInfoProto(name="y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _pad_between_transposes():
    """Transpose, Pad along axis -1 (by `axes`), Transpose, with ONNX Runtime's optimizer."""
    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
            helper.make_node("Pad", ["t", "pads", "", "axes"], ["p"]),
            helper.make_node("Transpose", ["p"], ["y"], perm=[1, 0]),
        ],
        "probe",
        [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [3, 5])],
        [onnx.ValueInfoProto(name="y")],
        initializer=[
            onnx.numpy_helper.from_array(np.array([0, 1]), "pads"),
            onnx.numpy_helper.from_array(np.array([-1]), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.zeros((3, 5))})[0]


def _relative_error_of_sin_near_zeros():
    x = np.pi * np.arange(1.0, 200.0)
    return np.max(np.abs(_run("Sin", {"x": x}) - np.sin(x)) / np.abs(np.sin(x)))


def _fails(probe):
    def run():
        try:
            probe()
        except Exception:  # noqa: BLE001  (ONNX Runtime's errors share no base class)
            return True
        return False

    return run


QUIRK_PROBES["unsigned_matmul_empty"] = _fails(
    lambda: _run("MatMul", {"x": np.ones((2, 0), np.uint32), "y": np.ones((0, 2), np.uint32)})
)
QUIRK_PROBES["pad_axes_transpose"] = lambda: (
    _fails(_pad_between_transposes)() or _pad_between_transposes().shape != (4, 5)
)
QUIRK_PROBES["float16_scatter_add"] = _fails(
    lambda: _run(
        "ScatterElements",
        {"x": _ones("float16"), "i": np.zeros((2, 3), np.int64), "u": _ones("float16")},
        reduction="add",
    )
)


@pytest.mark.parametrize("name", sorted(QUIRKS))
def test_quirks_are_still_there(name):
    quirk = QUIRKS[name]
    if quirk.shown_by != "tests/test_runtime_gaps.py":
        assert name not in QUIRK_PROBES
        pytest.skip(f"shown by {quirk.shown_by}")
    assert QUIRK_PROBES[name](), (
        f"ONNX Runtime {ort.__version__} no longer {quirk.what}: remove QUIRKS[{name!r}] "
        f"and its workaround ({quirk.workaround})"
    )
