import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.link.vm import VMLinker

from pt_onnxscript.testing import compare_onnx_and_py

MODES = [
    ("constant", {"constant_values": 2.5}),
    ("edge", {}),
    ("linear_ramp", {"end_values": -1.0}),
    ("maximum", {}),
    ("minimum", {}),
    ("mean", {}),
    ("wrap", {}),
    ("reflect", {}),  # built from Scan
    ("symmetric", {}),
]


@pytest.mark.parametrize("mode, kwargs", MODES, ids=[m for m, _ in MODES])
def test_pad_modes(mode, kwargs, rng):
    x = pt.matrix("x")
    # Scan's inner function compiles in the default mode (Numba on PyTensor 3, slow to compile).
    with pytensor.config.change_flags(
        mode=Mode(linker=VMLinker(use_cloop=False, c_thunks=False), optimizer=None)
    ):
        outs = [pt.pad(x, ((1, 2), (0, 3)), mode=mode, **kwargs), pt.pad(x, 1, mode=mode, **kwargs)]
        compare_onnx_and_py([x], outs, [rng.normal(size=(3, 4))])
