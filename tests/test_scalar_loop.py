import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
import pytest
from pytensor.scalar.loop import ScalarLoop
from pytensor.tensor.elemwise import Elemwise

from pt_onnxscript.testing import compare_onnx_and_py


def doubling_loop(until: bool):
    """x <- x * c, i <- i + 1; optionally until x exceeds 100."""
    x, c = ps.float64("x"), ps.float64("c")
    i = ps.int32("i")
    new_x, new_i = x * c, i + np.int32(1)
    return Elemwise(
        ScalarLoop(
            init=[x, i],
            update=[new_x, new_i],
            constant=[c],
            until=(new_x > 100.0) if until else None,
        )
    )


def test_while_loop_stops_each_element_at_its_own_step():
    n_steps, x, i, c = pt.ivector("n"), pt.dvector("x"), pt.ivector("i"), pt.dvector("c")
    outs = doubling_loop(until=True)(n_steps, x, i, c)
    values = [
        np.array([10, 10, 3, 0, -2, 50, 1], dtype="int32"),
        np.array([1.0, 50.0, 1.0, 1.0, 1.0, 200.0, np.nan]),
        np.zeros(7, dtype="int32"),
        np.array([2.0, 3.0, 2.0, 2.0, 2.0, 1.0, 2.0]),
    ]
    _, results = compare_onnx_and_py([n_steps, x, i, c], outs, values, expected_ops=["Loop"])
    # Ran out of steps, or had none: the condition did not end the loop.
    assert results[2].tolist() == [True, True, False, False, False, True, False]


@pytest.mark.parametrize("shape", [(2, 3), (0, 3), (1, 1)])
def test_for_loop_broadcasts_its_inputs(shape):
    n_steps, x, i, c = pt.iscalar("n"), pt.dmatrix("x"), pt.iscalar("i"), pt.drow("c")
    outs = doubling_loop(until=False)(n_steps, x, i, c)
    x_value = np.arange(np.prod(shape), dtype="float64").reshape(shape)
    values = [
        np.array(4, dtype="int32"),
        x_value,
        np.array(7, dtype="int32"),
        np.array([[1.5, -2.0, 0.5]])[:, : shape[1]],
    ]
    compare_onnx_and_py([n_steps, x, i, c], outs, values)
