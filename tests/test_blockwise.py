import numpy as np
import pytensor.tensor as pt
import pytest
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.math import Dot

from pt_onnxscript.testing import compare_onnx_and_py


@pytest.mark.parametrize("batch", [(2,), (0,), (3, 1)])
def test_core_op_looped_over_broadcast_batch(batch, rng):
    """A core op without a batch-aware translation runs once per batch element."""
    x = pt.tensor("x", shape=(*batch, None, 4))
    y = pt.tensor("y", shape=(None, 4, 2))
    out = Blockwise(Dot(), signature="(m,k),(k,n)->(m,n)")(x, y)
    values = [rng.normal(size=(*batch, 3, 4)), rng.normal(size=(5 if batch[-1] == 1 else batch[-1], 4, 2))]
    fn, _ = compare_onnx_and_py([x, y], out, values, expected_ops=["Loop"])
    assert any(isinstance(n.op, Blockwise) for n in fn.maker.fgraph.toposort())
