import numpy as np
import pytest

from pt_onnxscript.opsets import DEFAULT_OPSET, MIN_OPSET, newest_opset

# The floor, the default and the newest opset.
OPSETS = sorted({MIN_OPSET, DEFAULT_OPSET, newest_opset()})


@pytest.fixture(params=OPSETS, ids=lambda o: f"opset{o}")
def opset(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
