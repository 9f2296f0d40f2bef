import numpy as np
import pytensor.tensor as pt
from pytensor.raise_op import Assert

from pt_onnxscript import export_onnx
from pt_onnxscript.testing import compare_onnx_and_py


def test_assert_is_dropped_with_its_message_kept():
    x = pt.vector("x")
    out = Assert("x must be positive")(x, pt.all(x > 0)) * 2
    compare_onnx_and_py([x], out, [np.array([1.0, 2.0])])
    model = export_onnx(([x], [out]))
    assert any("x must be positive" in node.doc_string for node in model.graph.node)
