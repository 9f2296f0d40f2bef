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


def _printed(fn, *values):
    """What calling `fn` prints and returns (PyTensor's Print writes to stdout)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as out:
        results = fn(*values)
    return out.getvalue(), results


def test_print_prints_in_mode_onnx_as_in_pytensor_and_passes_through_an_export(rng):
    from pytensor.printing import Print

    x = pt.vector("x")
    y = Print("y")(x * 2 + 1) * 2  # exact, so printed alike to the last digit
    z = Print("z", attrs=("shape", "max"))(y + x)
    outputs = [y, z.sum(), Print("x itself")(x)]
    value = rng.normal(size=3)
    expected = _printed(pytensor.function([x], outputs, mode="FAST_COMPILE"), value)
    printed, got = _printed(pytensor.function([x], outputs, mode="ONNX"), value)
    assert printed == expected[0] and printed.count("\n") == 4
    for a, b in zip(got, expected[1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-15)

    # An exported model cannot print: the value passes through, and the user is told.
    with pytest.warns(UserWarning, match=r"Print\('y'\) does not print in an ONNX model"):
        model = export_onnx(([x], [y]))
    assert [output.name for output in model.graph.output] == ["output_0"]

    # Nor can a Scan's step (a Loop body) in mode "ONNX": its value passes through.
    h = pytensor.scan(
        lambda xt, h: Print("h")(h + xt),
        sequences=x,
        outputs_info=pt.zeros(()),
        return_updates=False,
    )
    with pytest.warns(UserWarning, match=r"Print\('h'\) does not print in a Scan's step"):
        fn = pytensor.function([x], h, mode="ONNX")
    np.testing.assert_allclose(_printed(fn, value)[1], np.cumsum(value), rtol=1e-15)


def test_compare_onnx_and_py_takes_a_graph_with_a_print(rng, capsys):
    from pytensor.printing import Print

    x = pt.vector("x")
    compare_onnx_and_py([x], Print("x")(x) * 2, [rng.normal(size=3)])
    assert capsys.readouterr().out.count("x __str__") == 2  # the reference's, mode "ONNX"'s
