import numpy as np
import pytest

from pt_onnxscript.opsets import DEFAULT_OPSET, MIN_OPSET, newest_opset

# The floor, the default and the newest opset; the newest (translations are written against
# the floor, so it repeats the same checks under newer imports) only with -m slow.
OPSETS = [
    o if o in (MIN_OPSET, DEFAULT_OPSET) else pytest.param(o, marks=pytest.mark.slow)
    for o in sorted({MIN_OPSET, DEFAULT_OPSET, newest_opset()})
]


@pytest.fixture(params=OPSETS, ids=lambda o: f"opset{o}")
def opset(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
