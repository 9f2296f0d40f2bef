import numpy as np
import pytensor.tensor as pt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize(
    "dtype", ["float64", "float32", "int8", "uint16", "uint32", "uint64", "int64", "bool"]
)
def test_sort_and_argsort(dtype, rng, opset):
    x = pt.matrix("x", dtype=dtype)
    outs = [
        pt.sort(x),
        pt.sort(x, axis=0),
        pt.sort(x, axis=None),
        pt.argsort(x, kind="stable"),
        pt.argsort(x, axis=0, kind="stable"),
        pt.argsort(x, axis=None, kind="stable"),
    ]
    value = np.round(rng.normal(size=(4, 5)) * 2).astype(dtype)
    if dtype == "uint64":  # values on both sides of 2**63 (ONNX Runtime's TopK has no uint64)
        value.flat[:5] = [2**64 - 1, 2**63, 2**63 - 1, 0, 2**63]
    # Which of equal zeros (0.0, -0.0) comes first is NumPy's sort's choice (its SIMD sort
    # returns neither order): zeros' signs are not compared.
    compare_onnx_and_py([x], outs, [value], opset=opset, signed_zeros=False)
    compare_onnx_and_py([x], outs, [np.zeros((0, 5), dtype)], opset=opset)


floats = st.sampled_from([np.nan, -np.inf, np.inf, 0.0, -0.0, 1.0, -1.0, 1e300, 5e-324])


@settings(max_examples=40, deadline=None)
@given(values=hnp.arrays("float64", st.integers(0, 12), elements=floats))
def test_ties_nan_and_signed_zeros_like_numpy_stable(values):
    x = pt.vector("x")
    outs = [pt.sort(x), pt.argsort(x, kind="stable")]
    compare_onnx_and_py([x], outs, [values], signed_zeros=False)  # (as above)
