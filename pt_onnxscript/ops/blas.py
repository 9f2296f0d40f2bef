"""BLAS ops of PyTensor's C graphs: Gemv, Gemm, Ger, Dot22, Dot22Scalar, BatchedDot."""

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.tensor.blas import BatchedDot, Dot22, Dot22Scalar, Gemm, Gemv, Ger

from pt_onnxscript.errors import BatchSizeError
from pt_onnxscript.ops.common import cast_inputs_to_output, raise_if
from pt_onnxscript.ops.math import matmul
from pt_onnxscript.registry import register


def is_zero(var):
    return isinstance(var, Constant) and np.all(var.data == 0)


@register(Gemv)
def gemv(g, node, *inputs):
    """Gemv -> beta * y + alpha * (A @ x); y is not read when beta is 0."""
    y, alpha, A, x, beta = cast_inputs_to_output(g, node, inputs)
    product = g.Mul(alpha, g.MatMul(A, x))
    return product if is_zero(node.inputs[4]) else g.Add(g.Mul(beta, y), product)


@register(Gemm)
def gemm(g, node, *inputs):
    """Gemm -> b * z + a * (x @ y); z is not read when b is 0."""
    z, a, x, y, b = cast_inputs_to_output(g, node, inputs)
    product = g.Mul(a, g.MatMul(x, y))
    return product if is_zero(node.inputs[4]) else g.Add(g.Mul(b, z), product)


@register(Ger)
def ger(g, node, *inputs):
    """Ger -> A + alpha * outer(x, y)."""
    A, alpha, x, y = cast_inputs_to_output(g, node, inputs)
    outer = g.Mul(
        g.Unsqueeze(x, g.Constant(value_ints=[1])), g.Unsqueeze(y, g.Constant(value_ints=[0]))
    )
    return g.Add(A, g.Mul(alpha, outer))


@register(Dot22)
def dot22(g, node, x, y):
    """Dot22 -> MatMul."""
    return matmul(g, node, x, y)


@register(BatchedDot)
def batched_dot(g, node, x, y):
    """BatchedDot -> MatMul, raising where the batch sizes differ (MatMul would broadcast a
    batch of one) a BatchSizeError: PyTensor's TypeError, and the ValueError of the Blockwise
    Dot it may have been."""
    sizes = [var.type.shape[0] for var in node.inputs]
    if None not in sizes:
        return matmul(g, node, x, y)
    differ = g.Not(g.Equal(g.Shape(x, start=0, end=1), g.Shape(y, start=0, end=1)))
    message = f"{node.op}: the inputs must have the same size in axis 0"
    return raise_if(g, differ, matmul(g, node, x, y), BatchSizeError, message)


@register(Dot22Scalar)
def dot22_scalar(g, node, x, y, a):
    """Dot22Scalar -> a * (x @ y)."""
    return g.Mul(cast_inputs_to_output(g, node, [x, y, a])[2], matmul(g, node, x, y))
