import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.builders import OpFromGraph
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pt_onnxscript import UnsupportedOpError, export_onnx
from pt_onnxscript.testing import compare_onnx_and_py


def test_output_that_is_an_input_and_view(rng):
    x = pt.vector("x")
    f_inputs = [x]
    compare_onnx_and_py(f_inputs, [x, pytensor.compile.ops.view_op(x) * 1], [rng.normal(size=3)])


@pytest.mark.parametrize("inline", [False, True])
def test_op_from_graph(inline, rng, opset):
    a, b = pt.matrix("a"), pt.matrix("b")
    ofg = OpFromGraph([a, b], [pt.exp(a) + b, a * 2], inline=inline)
    x, y = pt.matrix("x"), pt.matrix("y")
    out1, out2 = ofg(x, y)
    compare_onnx_and_py(
        [x, y],
        [out1, out2 + ofg(y, x)[0]],
        [rng.normal(size=(2, 3)), rng.normal(size=(2, 3))],
        opset=opset,
    )


class Opaque(Op):
    def make_node(self, x):
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0]


def test_unsupported_op_inside_op_from_graph_is_reported():
    a = pt.vector("a")
    ofg = OpFromGraph([a], [Opaque()(a) + 1])
    x = pt.vector("x")
    with pytest.raises(UnsupportedOpError, match=r"Opaque, inside OpFromGraph \(1 node\)"):
        export_onnx(([x], [ofg(x)]))


def test_op_from_graph_inner_graph_gets_the_outer_rewrites():
    import pytensor
    from pytensor.compile.builders import OpFromGraph

    v = pt.vector("v", dtype="float32")
    inner = pt.vector("inner", dtype="float32")
    log1p_ofg = OpFromGraph([inner], [pt.log(1 + inner)])
    fn = pytensor.function([v], log1p_ofg(v), mode="ONNX")
    np.testing.assert_allclose(
        fn(np.array([1e-8, 1e-3], "float32")), np.log1p([1e-8, 1e-3]).astype("float32"), rtol=1e-6
    )
