import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.ifelse import ifelse

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("take", [True, False])
def test_ifelse_several_outputs(take, rng, opset):
    c = pt.scalar("c", dtype="int8")
    x = pt.vector("x")
    y = pt.matrix("y")
    then = [pt.exp(x).sum() * y, x[::-1]]
    other = [y.T @ y, pt.cumsum(x)]
    outs = ifelse(c, then, other)
    values = [np.array(1 if take else 0, "int8"), rng.normal(size=3), rng.normal(size=(3, 3))]
    _, _ = compare_onnx_and_py(
        [c, x, y], outs + [pt.switch(c, x, -x)], values, opset=opset, expected_ops=["If"]
    )


def test_only_the_taken_branch_runs():
    """The untaken branch would raise (an out-of-range index) if it ran."""
    c = pt.scalar("c", dtype="bool")
    i = pt.lscalar("i")
    x = pt.vector("x")
    fn = pytensor.function([c, i, x], ifelse(c, x[i] * 2, x.sum()), mode="ONNX")
    np.testing.assert_array_equal(fn(False, 10, np.ones(3)), 3.0)
    np.testing.assert_array_equal(fn(True, -1, np.arange(3.0)), 4.0)
    with pytest.raises(Exception, match="out of data bounds"):
        fn(True, 10, np.ones(3))


def test_nested_and_shared_computations(rng):
    a, b = pt.scalars("a", "b")
    x = pt.vector("x")
    shared = pt.log(x**2 + 1)  # used by both branches and outside: computed once, outside
    inner = ifelse(b > 0, shared * 2, pt.exp(x))
    out = ifelse(a > 0, inner + 1, shared - 1)
    for av, bv in [(1, 1), (1, -1), (-1, 1)]:
        compare_onnx_and_py(
            [a, b, x],
            [out, shared.sum()],
            [np.array(av, "float64"), np.array(bv, "float64"), rng.normal(size=4)],
        )


def test_what_both_branches_of_an_inner_ifelse_need_runs_in_the_outer_branch(rng):
    """A value both branches of an IfElse read, that IfElse itself in one branch of another:
    computed in that branch (not before the outer If, where the other branch would pay it)."""
    from pt_onnxscript import export_onnx

    a, b = pt.dscalars("a", "b")
    c1, c2 = pt.scalar("c1", dtype="bool"), pt.scalar("c2", dtype="bool")
    shared = pt.exp(a) * 3
    out = ifelse(c1, ifelse(c2, shared + 1, shared - 1), b)
    for flags in [(True, True), (True, False), (False, True)]:
        fn, _ = compare_onnx_and_py(
            [a, b, c1, c2], out, [np.array(0.5), np.array(2.0), *map(np.array, flags)]
        )
    model = export_onnx(fn)
    assert [node.op_type for node in model.graph.node] == ["If"]


def test_branches_with_different_shapes():
    c = pt.scalar("c", dtype="bool")
    x = pt.vector("x")
    out = ifelse(c, x[:2], pt.concatenate([x, x]))
    for take in [True, False]:
        compare_onnx_and_py([c, x], out, [np.array(take), np.arange(3.0)])
