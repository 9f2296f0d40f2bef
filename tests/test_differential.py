"""Differential property tests: random graphs on edge values (NaN, +-inf, -0.0, integer
extremes, size-0 and size-1 dims), mode "ONNX" and the exported file against PyTensor's Python
linker on the same rewritten graph (results, dtypes, shapes, and raising where it raises)."""

import numpy as np
import onnxruntime as ort
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from hypothesis import HealthCheck, given, note, reject, settings
from hypothesis import strategies as st
from pytensor.compile.mode import Mode
from pytensor.tensor.elemwise import Elemwise

from pt_onnxscript import export_onnx
from pt_onnxscript.linker import onnx_rewrites
from pt_onnxscript.testing import assert_same

REFERENCE = Mode(linker="py", optimizer=onnx_rewrites().excluding("fusion"))

EDGES = {
    "f": [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, np.nan, np.inf, -np.inf, 1e-300, -5e-324, 1e300],
    "i": [0, 1, -1, 2, 7, "min", "max"],
    "u": [0, 1, 2, 7, "max"],
    "b": [False, True],
}
DTYPES = ["float64", "float32", "int64", "int32", "int8", "uint8", "uint64", "bool"]

UNARY = {
    "f": [pt.neg, pt.abs, pt.exp, pt.log1p, pt.sqrt, pt.floor, pt.sign, pt.tanh, lambda x: 1 / x],
    "i": [pt.neg, pt.abs, pt.sign, lambda x: x * 3, lambda x: x // 2, lambda x: x % 3],
    "u": [lambda x: x + 1, lambda x: x // 2, lambda x: x % 3],
    "b": [pt.invert],
}
BINARY = [pt.add, pt.mul, pt.maximum, pt.minimum, pt.sub, lambda a, b: pt.switch(a > b, a, b)]
REDUCTIONS = [pt.sum, pt.prod, pt.max, pt.min, pt.any, pt.all, pt.argmax, pt.argmin]


def _values(draw, dtype, shape):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    pool = [
        {"min": info.min, "max": info.max}.get(v, v) if info is not None else v
        for v in EDGES[np.dtype(dtype).kind]
    ]
    size = int(np.prod(shape))
    flat = draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
    with np.errstate(all="ignore"):
        return np.array(flat, dtype=dtype).reshape(shape)


@st.composite
def graphs(draw):
    dtype = draw(st.sampled_from(DTYPES))
    kind = np.dtype(dtype).kind
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=ndim, max_size=ndim)))
    x = pt.tensor("x", dtype=dtype, shape=(None,) * ndim)
    y = pt.tensor("y", dtype=dtype, shape=(None,) * ndim)
    out = x
    try:
        for _ in range(draw(st.integers(1, 3))):
            if draw(st.booleans()):
                out = draw(st.sampled_from(UNARY[kind]))(out)
            else:
                out = draw(st.sampled_from(BINARY))(out, y)
        if draw(st.booleans()):
            axis = draw(st.sampled_from([None, 0, ndim - 1]))
            out = draw(st.sampled_from(REDUCTIONS))(out, axis=axis)
    except TypeError:  # an op PyTensor refuses for this dtype (e.g. bool - bool)
        reject()
    values = [_values(draw, dtype, shape), _values(draw, dtype, shape)]
    return [x, y], out, values


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_random_graphs_match_pytensor(graph):
    """The rewritten graph (as mode "ONNX" rewrites it, without fusing elementwise ops into
    Composites, whose Python implementation computes on Python scalars: ~~True is False there)
    on PyTensor's Python linker against mode "ONNX" and the exported file. PyTensor's own
    rewrites may change results (its canonicalizer merges (x + y) + 1 on uint8 into one int16
    sum); the translation must not."""
    inputs, out, values = graph
    note(pytensor.dprint(out, file="str"))
    reference = pytensor.function(inputs, [out], mode=REFERENCE, on_unused_input="ignore")
    try:
        with np.errstate(all="ignore"):
            (expected,) = reference(*[np.copy(v) for v in values])
    except (OverflowError, AttributeError, TypeError, ZeroDivisionError):
        reject()  # PyTensor's Python implementation cannot compute it (uint64 and Python ints)
    except ValueError:  # NumPy's errors, such as the maximum of nothing
        fn = pytensor.function(inputs, out, mode="ONNX", on_unused_input="ignore")
        with pytest.raises(ValueError):
            fn(*values)
        return
    fn = pytensor.function(inputs, out, mode="ONNX", on_unused_input="ignore")
    # The Python implementation of an Add of three or more inputs is Python's sum, from +0:
    # -0.0 + -0.0 + -0.0 is +0.0 there (-0.0 in C and Numba), so zeros' signs are not compared.
    signed_zeros = not any(
        isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Add)
        for node in reference.maker.fgraph.apply_nodes
        if len(node.inputs) > 2
    )
    assert_same(fn(*values), expected, what="mode ONNX", signed_zeros=signed_zeros)
    model = export_onnx((inputs, [out]))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    feeds = dict(
        zip(names, [values[[v.name for v in inputs].index(n)] for n in names], strict=True)
    )
    file_result = session.run(None, feeds)[0]
    assert_same(file_result, expected, what="exported file", signed_zeros=signed_zeros)
