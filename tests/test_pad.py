import numpy as np
import pytensor.tensor as pt
import pytest

from pt_onnxscript.testing import compare_onnx_and_py

# reflect and symmetric are built from Scan in PyTensor: see tests/test_scan.py once it lands.
MODES = [
    ("constant", {"constant_values": 2.5}),
    ("edge", {}),
    ("linear_ramp", {"end_values": -1.0}),
    ("maximum", {}),
    ("minimum", {}),
    ("mean", {}),
    ("wrap", {}),
]


@pytest.mark.parametrize("mode, kwargs", MODES, ids=[m for m, _ in MODES])
def test_pad_modes(mode, kwargs, rng):
    x = pt.matrix("x")
    outs = [pt.pad(x, ((1, 2), (0, 3)), mode=mode, **kwargs), pt.pad(x, 1, mode=mode, **kwargs)]
    compare_onnx_and_py([x], outs, [rng.normal(size=(3, 4))])
