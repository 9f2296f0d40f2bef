import numpy as np
import onnxruntime as ort
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


_session_init = ort.InferenceSession.__init__


def _one_thread_session(self, path_or_bytes, sess_options=None, *args, **kwargs):
    """ONNX Runtime's session on one intra-op thread unless the caller chose a number: the
    tests run one pytest-xdist worker per core, and a default pool per session (a thread per
    core, spinning while it waits) in every worker oversubscribes the cores (~12% more CPU
    for the suite). The tests check values, not speed."""
    if sess_options is None:
        sess_options = ort.SessionOptions()
    if sess_options.intra_op_num_threads == 0:
        sess_options.intra_op_num_threads = 1
    _session_init(self, path_or_bytes, sess_options, *args, **kwargs)


ort.InferenceSession.__init__ = _one_thread_session
