"""Mapping of PyTensor types to ONNX types and shapes."""

import sys
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir
from pytensor.graph.basic import Variable
from pytensor.scalar.basic import ScalarType
from pytensor.tensor.type import TensorType

from pt_onnxscript.rng import STATE_DTYPE, STATE_SHAPE, is_random_state

DTYPES = {
    "bool": ir.DataType.BOOL,
    "int8": ir.DataType.INT8,
    "int16": ir.DataType.INT16,
    "int32": ir.DataType.INT32,
    "int64": ir.DataType.INT64,
    "uint8": ir.DataType.UINT8,
    "uint16": ir.DataType.UINT16,
    "uint32": ir.DataType.UINT32,
    "uint64": ir.DataType.UINT64,
    "float16": ir.DataType.FLOAT16,
    "float32": ir.DataType.FLOAT,
    "float64": ir.DataType.DOUBLE,
}

Dim = int | str | None


def onnx_dtype(dtype: str) -> ir.DataType:
    """The ONNX element type of a PyTensor dtype."""
    try:
        return DTYPES[str(dtype)]
    except KeyError:
        raise TypeError(
            f"dtype {dtype!r} has no ONNX counterpart in pt_onnxscript "
            f"(supported: {', '.join(DTYPES)})"
        ) from None


def sparse_problem(var: Variable) -> str | None:
    """Why `var` cannot be translated if it is sparse (a subclass of the dense tensor type),
    else None."""
    if not is_sparse(var):
        return None
    return (
        f"Variable {var} of type {var.type} is sparse: ONNX has no sparse tensors. A "
        "sparse matrix known at export (a SciPy matrix in the graph, as PyMC's CAR takes "
        "its W, or a shared one) translates where a product makes it dense; others must "
        "be made dense (pytensor.sparse.dense_from_sparse, .toarray())."
    )


def is_xtensor(var: Variable) -> bool:
    """Whether `var` is an xtensor (pytensor.xtensor): a tensor with named dims, which
    PyTensor's rewrites lower to tensor Ops between casts from and to tensors."""
    # Without pytensor.xtensor imported, no xtensor exists (and importing it warns on 2.38).
    xtensor = sys.modules.get("pytensor.xtensor.type")
    return xtensor is not None and isinstance(var.type, xtensor.XTensorType)


def is_sparse(var: Variable) -> bool:
    """Whether `var` is a pytensor.sparse matrix (its Ops in ops/sparse.py)."""
    # Without pytensor.sparse imported, no sparse variable exists (and none is imported here).
    sparse = sys.modules.get("pytensor.sparse.type")
    return sparse is not None and isinstance(var.type, sparse.SparseTensorType)


def io_type(var: Variable) -> tuple[str, tuple[int | None, ...]]:
    """The dtype and static shape of graph input or output `var` in ONNX: a random generator
    is its ``uint64[2]`` state (pt_onnxscript.rng), a scalar (`pytensor.scalar`) a 0-d
    tensor."""
    if is_random_state(var):
        return STATE_DTYPE, STATE_SHAPE
    if isinstance(var.type, ScalarType):
        return var.type.dtype, ()
    return var.type.dtype, var.type.shape


def variable_problem(var: Variable) -> str | None:
    """Why graph input or output `var` cannot be translated, naming it, or None when it is a
    dense tensor of a supported dtype or a random generator."""
    if is_random_state(var):
        return None
    sparse = sparse_problem(var)
    if sparse:
        return sparse
    if not isinstance(var.type, TensorType | ScalarType) and not is_xtensor(var):
        return (
            f"Variable {var} of type {var.type} is not a tensor: ONNX export supports "
            "tensor, scalar and xtensor variables and random generators only (slices, sparse "
            "and typed-list variables have no ONNX counterpart)."
        )
    if var.type.dtype not in DTYPES:
        return (
            f"Variable {var} has dtype {var.type.dtype}, which ONNX export does not "
            f"support (supported: {', '.join(DTYPES)})."
        )
    return None


def value_shape(var: Variable, dims: Sequence[Dim] | None, name: str) -> list[Dim]:
    """The ONNX shape of graph input or output `var`.

    Static PyTensor dims stay fixed; unknown dims get the user's int or name from
    `dims`, or a symbolic name derived from `name`.
    """
    static = io_type(var)[1]
    if dims is None:
        dims = [None] * len(static)
    if isinstance(dims, str) or not isinstance(dims, Sequence):
        raise TypeError(
            f"the dims of {name!r} must be a tuple with one entry per dim, such as "
            f"('batch', 4), not {dims!r}"
        )
    if len(dims) != len(static):
        raise ValueError(
            f"dims for {name!r} has {len(dims)} entries, but {name!r} has "
            f"{len(static)} dimensions (static shape {static})."
        )
    shape: list[Dim] = []
    for i, (known, given) in enumerate(zip(static, dims, strict=True)):
        if isinstance(given, int) and not isinstance(given, bool) and given < 0:
            raise ValueError(f"dim {i} of {name!r} is {given} in {tuple(dims)!r}: sizes are >= 0")
        if known is not None:
            if given is not None and given != known:
                raise ValueError(
                    f"dim {i} of {name!r} is {known} in the PyTensor graph; it cannot "
                    f"be exported as {given!r} (dims given: {tuple(dims)!r})."
                )
            shape.append(known)
        elif given is None:
            shape.append(f"{name}_dim{i}")
        elif isinstance(given, bool) or not isinstance(given, int | str):
            raise TypeError(f"dim {i} of {name!r} must be an int, a name or None, not {given!r}")
        else:
            shape.append(given)
    return shape


def as_ir_tensor(value, dtype: str, name: str | None = None) -> ir.Tensor:
    """An ONNX tensor holding `value` in PyTensor dtype `dtype`."""
    array = np.array(value, dtype=dtype, order="C")
    return ir.Tensor(array, dtype=onnx_dtype(dtype), name=name)
