"""The cache of ONNX's node inference (the builder's and the constant folder's) makes exports
faster and changes nothing in them."""

import numpy as np
import pytensor.tensor as pt
import pytest
from test_scan import scan

from pt_onnxscript import export_onnx
from pt_onnxscript.inference import InferenceCache


def dense_network():
    """Repeated layers on a symbolic batch, and reshapes whose shapes are computed (ONNX's
    inference of Reshape reads its shape input's value)."""
    rng = np.random.default_rng(0)
    x = pt.matrix("x", shape=(None, 6))
    h = x
    for i in range(6):
        h = pt.tanh(h @ pt.constant(rng.normal(size=(6, 6))) + pt.constant(rng.normal(size=6)))
        h = h.reshape((h.shape[0], 2, 3)).reshape((-1, 6)) if i % 2 else pt.maximum(h, 0)
    return [x], [h.sum(axis=1), h.T, x.reshape((-1, 2, 3)) * 2, x.reshape((-1, 3, 2)) * 2]


def scan_network():
    """Loop bodies: built by sub-builders sharing the main graph's cache."""
    x = pt.dvector("x")
    ys = scan(lambda xt, y: 0.9 * y + xt, sequences=[x], outputs_info=[pt.zeros(())])
    zs = scan(lambda xt, z: pt.exp(-z) + xt, sequences=[ys], outputs_info=[x[0]])
    return [x], [zs]


def float32_mix():
    """The same operators on several dtypes and shapes: keys must tell them apart."""
    a, c = (
        pt.tensor("a", dtype="float32", shape=(2, 3)),
        pt.tensor("c", dtype="float32", shape=(2, 3)),
    )
    b, i = pt.dvector("b"), pt.lvector("i")
    outputs = [a + 1, c + 1, b + 1, i + 1, (a * 2).sum() + (b * 2).sum(), a.reshape((-1,)) + 1]
    return [a, b, c, i], outputs


@pytest.mark.parametrize("graph", [dense_network, scan_network, float32_mix])
@pytest.mark.parametrize("optimize", [True, False])
def test_an_export_is_the_same_with_the_cache_as_without(graph, optimize, monkeypatch):
    hits = []
    replay = InferenceCache.replay

    def counting(self, node, key):
        hit = replay(self, node, key)
        hits.append(hit)
        return hit

    monkeypatch.setattr(InferenceCache, "replay", counting)
    cached = export_onnx(graph(), optimize=optimize).SerializeToString()
    assert any(hits), "the cache was never used"
    monkeypatch.setattr(InferenceCache, "replay", lambda self, node, key: False)
    plain = export_onnx(graph(), optimize=optimize).SerializeToString()
    assert cached == plain
