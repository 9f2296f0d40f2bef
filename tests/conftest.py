import numpy as np
import pytest

from pt_onnxscript import DEFAULT_OPSET, newest_opset

OPSETS = sorted({DEFAULT_OPSET, newest_opset()})


@pytest.fixture(params=OPSETS, ids=lambda o: f"opset{o}")
def opset(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)
