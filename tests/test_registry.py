"""Adding translations the way the docs say (docs/extending.md): register, inline scripted functions (scripts
calling scripts included), return one output or a list."""

import re
import runpy
from pathlib import Path

import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from onnxscript import DOUBLE, script
from onnxscript import opset18 as op18
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from pt_onnxscript import export_onnx, register
from pt_onnxscript.testing import compare_onnx_and_py

EXTENDING = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def _readme_example() -> str:
    (code,) = re.findall(r"```python\n(.*?)```", EXTENDING.read_text(), flags=re.DOTALL)
    return code


def test_the_readmes_translation_example_runs_as_written(capsys, tmp_path):
    # A file, as a user's module: onnxscript reads a scripted function's source.
    path = tmp_path / "readme_example.py"
    path.write_text(_readme_example())
    namespace = runpy.run_path(str(path))
    printed = capsys.readouterr().out
    expected = np.log(np.cosh(np.array([-800.0, 0.0, 2.0]), dtype=np.longdouble)).astype(float)
    assert np.allclose(np.array(printed.strip(" []\n").split(), dtype=float), expected)
    x = pt.vector("x", dtype="float64")
    values = np.array([-800.0, -3.0, -1e-9, 0.0, 0.5, 2.0, 30.0, 710.0])
    out = namespace["LogCosh"]()(x)
    compare_onnx_and_py([x], out, [values], rtol=1e-13)
    model = export_onnx(([x], out), None)
    domains = {node.domain for node in model.graph.node}
    assert domains <= {""}, "the nested scripted function is inlined"


@script()
def _inner(x: DOUBLE[...]) -> DOUBLE[...]:
    return op18.Mul(x, x)


@script()
def _outer(x: DOUBLE[...]) -> DOUBLE[...]:
    return op18.Add(_inner(x), x)


class _Square(Op):
    __props__ = ()

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0] ** 2 + inputs[0]


class _SquareAsList(_Square):
    pass


@register(_Square)
def _square_through_call_inline(g, node, x):
    return g.call_inline(_outer, x)  # onnxscript's own: leaves the nested call behind


@register(_SquareAsList)
def _square_as_a_list(g, node, x):
    from pt_onnxscript import inline

    return [inline(g, _outer, x)]  # one output, returned as a list


def test_a_nested_call_left_behind_is_an_error_that_names_the_way_out():
    x = pt.vector("x", dtype="float64")
    with pytest.raises(ValueError, match=r"pt_onnxscript\.inline\(g, fn, \*args\)"):
        export_onnx(([x], _Square()(x)), None)


def test_a_single_output_may_be_returned_in_a_list():
    x = pt.vector("x", dtype="float64")
    compare_onnx_and_py([x], _SquareAsList()(x), [np.array([-2.0, 0.0, 3.0])])
    fn = pytensor.function([x], _SquareAsList()(x), mode="ONNX")
    assert fn(np.array([2.0])).tolist() == [6.0]


class _Cube(_Square):
    pass


def test_a_second_registration_is_an_error_unless_it_replaces():
    @register(_Cube)
    def wrong(g, node, x):
        return g.Mul(x, x)  # the bug being fixed

    with pytest.raises(ValueError, match="already has a translation.*replace=True"):

        @register(_Cube)
        def again(g, node, x):
            return g.Mul(x, x)

    @register(_Cube, replace=True)
    def fixed(g, node, x):
        return g.Add(g.Mul(x, x), x)

    x = pt.vector("x", dtype="float64")
    compare_onnx_and_py([x], _Cube()(x), [np.array([-2.0, 0.0, 3.0])])


class _WrongRank(_Square):
    """A translation with a bug: its result has one dim more than PyTensor's."""


class _WrongRankUnknown(_Square):
    """The same bug where ONNX's inference cannot see it (the result's shape unknown)."""


@register(_WrongRank)
def _wrong_rank(g, node, x):
    return g.Unsqueeze(x, g.Constant(value_ints=[0]))


@register(_WrongRankUnknown)
def _wrong_rank_unknown(g, node, x):
    zero = g.Sub(g.Size(x), g.Size(x))  # [0] at run time, unknown to inference
    return g.Unsqueeze(x, g.Reshape(zero, g.Constant(value_ints=[1])))


def test_a_translation_giving_the_wrong_rank_is_an_error_never_a_wrong_shape():
    """An output whose inferred shape contradicts PyTensor's fails the export (and mode
    "ONNX"'s compilation); one that ONNX's inference cannot see (Unsqueeze's axes computed)
    fails mode "ONNX"'s call, naming the output, instead of returning an array of the wrong
    rank."""
    from pt_onnxscript import ExecutionError, TranslationError

    x = pt.vector("x", dtype="float64")
    with pytest.raises(TranslationError, match=r"shape \(1, x_dim0\).*PyTensor's is \(\?\)"):
        export_onnx(([x], _WrongRank()(x)), None)
    with pytest.raises(TranslationError, match="a bug in a translation"):
        pytensor.function([x], _WrongRank()(x), mode="ONNX")
    fn = pytensor.function([x], _WrongRankUnknown()(x), mode="ONNX")
    with pytest.raises(ExecutionError, match=r"rank 2 \(1, 3\), PyTensor's rank 1"):
        fn(np.ones(3))


class _InconsistentInside(_Square):
    """A translation with a bug ONNX Runtime does not see: a vector typed as a scalar."""


@register(_InconsistentInside)
def _inconsistent_inside(g, node, x):
    import onnx_ir as ir

    y = g.Neg(x)
    y.shape = ir.Shape([])
    return g.Add(g.Neg(y), x)


def test_mode_onnx_runs_the_full_check_as_export_does():
    """Values whose shapes contradict each other inside the model fail mode "ONNX"'s
    compilation, as they fail export_onnx, instead of running on whatever ONNX Runtime does."""
    from pt_onnxscript import TranslationError, onnx_mode

    x = pt.vector("x", dtype="float64")
    with pytest.raises(TranslationError, match="full check"):
        export_onnx(([x], _InconsistentInside()(x)), None, optimize=False)
    with pytest.raises(TranslationError, match='mode "ONNX" fails ONNX\'s full check'):
        pytensor.function([x], _InconsistentInside()(x), mode=onnx_mode(optimize=False))
