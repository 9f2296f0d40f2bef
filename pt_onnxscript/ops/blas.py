"""BLAS ops of PyTensor's C graphs: Gemv, Gemm, Ger, Dot22, Dot22Scalar, BatchedDot."""

import numpy as np
from pytensor.graph.basic import Constant
from pytensor.tensor.blas import BatchedDot, Dot22, Dot22Scalar, Gemm, Gemv, Ger

from pt_onnxscript.ops.common import cast_inputs_to_output, raise_if
from pt_onnxscript.ops.math import matmul
from pt_onnxscript.registry import register


def is_zero(var):
    return isinstance(var, Constant) and np.all(var.data == 0)


@register(Gemv)
def gemv(op, node, *inputs):
    """Gemv -> beta * y + alpha * (A @ x); y is not read when beta is 0."""
    y, alpha, A, x, beta = cast_inputs_to_output(op, node, inputs)
    product = op.Mul(alpha, op.MatMul(A, x))
    return product if is_zero(node.inputs[4]) else op.Add(op.Mul(beta, y), product)


@register(Gemm)
def gemm(op, node, *inputs):
    """Gemm -> b * z + a * (x @ y); z is not read when b is 0."""
    z, a, x, y, b = cast_inputs_to_output(op, node, inputs)
    product = op.Mul(a, op.MatMul(x, y))
    return product if is_zero(node.inputs[4]) else op.Add(op.Mul(b, z), product)


@register(Ger)
def ger(op, node, *inputs):
    """Ger -> A + alpha * outer(x, y)."""
    A, alpha, x, y = cast_inputs_to_output(op, node, inputs)
    outer = op.Mul(op.Unsqueeze(x, op.Constant(value_ints=[1])), op.Unsqueeze(y, op.Constant(value_ints=[0])))
    return op.Add(A, op.Mul(alpha, outer))


@register(Dot22)
def dot22(op, node, x, y):
    """Dot22 -> MatMul."""
    return matmul(op, node, x, y)


@register(BatchedDot)
def batched_dot(op, node, x, y):
    """BatchedDot -> MatMul, raising PyTensor's error where the batch sizes differ (MatMul
    would broadcast a batch of one)."""
    sizes = [var.type.shape[0] for var in node.inputs]
    if None not in sizes:
        return matmul(op, node, x, y)
    differ = op.Not(op.Equal(op.Shape(x, start=0, end=1), op.Shape(y, start=0, end=1)))
    message = f"{node.op}: the inputs' batch sizes (first dims) differ"
    return raise_if(op, differ, matmul(op, node, x, y), ValueError, message)


@register(Dot22Scalar)
def dot22_scalar(op, node, x, y, a):
    """Dot22Scalar -> a * (x @ y)."""
    return op.Mul(cast_inputs_to_output(op, node, [x, y, a])[2], matmul(op, node, x, y))
