"""A sparse constant with a dense tensor: pytensor.sparse's Dot and StructuredDot of a SciPy
sparse matrix known at export (a CAR model's adjacency matrix, a sparse design matrix) and a
dense tensor, and its AddSD (the sparse matrix plus a dense one), whose results are dense.

The matrix's stored entries (row r_k, column c_k, value d_k, in SciPy's storage order) are
three constants; a product gathers the dense operand at the entries' columns (rows),
multiplies by d and adds each term into its output row (column) by ScatterElements, in the
storage order: SciPy's csr/csc matvec adds the same products in that order from 0, so the
results are SciPy's to the bit; a sum adds each d_k into the dense matrix at (r_k, c_k) in
that order, as SciPy's csr_todense does. A Scan's or OpFromGraph's inner graph reads the
sparse constants its inputs stand for (translate.bind_sparse_constants). Sparse values computed
in the graph (or fed to it) have no ONNX form: they are refused (`types.sparse_problem`,
`_constant_operands`).

Loaded when the first pytensor.sparse Op is met (registry._library_translations).
"""

import numpy as np
from pytensor.sparse.math import AddSD, Dot, StructuredDot

from pt_onnxscript.errors import UnsupportedOpError
from pt_onnxscript.ops.common import constant, ints, raise_if
from pt_onnxscript.registry import register
from pt_onnxscript.translate import sparse_constant
from pt_onnxscript.types import is_sparse, onnx_dtype


def _constant_operands(g, node):
    """`node`'s sparse operand as a SciPy matrix (its constant's, or the one the inner
    graph's input stands for) and the position of the dense one; UnsupportedOpError when
    the sparse value is not known at export, or both operands are sparse."""
    sparse = [i for i, var in enumerate(node.inputs) if is_sparse(var)]
    if len(sparse) > 1:
        raise UnsupportedOpError(
            f"{node}: both operands are sparse; make one dense (pytensor.sparse.dense_from_sparse)"
        )
    (i,) = sparse
    constant_var = sparse_constant(g, node.inputs[i])
    if constant_var is None:
        raise UnsupportedOpError(
            f"{node}: its sparse operand {node.inputs[i]} is not known at export: only sparse "
            "matrices known at export translate (their entries become constants); make it "
            "one, or use a dense matrix (pytensor.sparse.dense_from_sparse)"
        )
    return constant_var.data, 1 - i


def _entries(g, matrix, dtype: str):
    """The stored entries of SciPy sparse `matrix` in storage order: rows, columns (int64)
    and values (as `dtype`) constants, and its shape."""
    # tocoo of a csr (csc) matrix keeps its storage order: row by row (column by column).
    # Other formats (StructuredDot takes bsr) go through csr, so their sums may round
    # differently from SciPy's.
    coo = (matrix if matrix.format in ("csr", "csc") else matrix.tocsr()).tocoo(copy=False)
    return (
        ints(g, coo.row.astype(np.int64)),
        ints(g, coo.col.astype(np.int64)),
        constant(g, coo.data.astype(dtype), dtype),
        matrix.shape,
    )


def _checked(g, dense, axis: int, size: int, shapes: str):
    """`dense`, made to raise SciPy's ValueError unless its `axis` (0 or -1) has length
    `size`."""
    length = g.Shape(dense, start=0, end=1) if axis == 0 else g.Shape(dense, start=-1)
    wrong = g.Not(g.Equal(length, ints(g, [size])))
    return raise_if(g, wrong, dense, ValueError, f"dimension mismatch ({shapes})")


def _products(g, dense, ndim: int, axis: int, gather_at, add_at, data, size: int, dtype: str):
    """out[..., add_at[k], ...] += dense[..., gather_at[k], ...] d_k along `axis` of `dense`
    (a vector or a matrix, of `ndim` dims), the k in storage order; out has `size` entries
    along `axis`."""
    others = ints(g, [d for d in range(ndim) if d != axis])
    terms = g.Gather(dense, gather_at, axis=axis)  # nnz along `axis`
    products = g.Mul(terms, g.Unsqueeze(data, others) if ndim > 1 else data)
    index = g.Expand(g.Unsqueeze(add_at, others), g.Shape(products)) if ndim > 1 else add_at
    shape = g.Concat(
        g.Shape(dense, end=axis), ints(g, [size]), g.Shape(dense, start=axis + 1), axis=0
    )
    zeros = g.Expand(constant(g, 0, dtype), shape)
    return g.ScatterElements(zeros, index, products, axis=axis, reduction="add")


def _sparse_times_dense(g, matrix, dense, ndim: int, dtype: str):
    """S @ y for the sparse constant S (m, n) and y (n,) or (n, p): out[r_k] += d_k y[c_k]."""
    rows, cols, data, (m, n) = _entries(g, matrix, dtype)
    dense = _checked(g, dense, 0, n, f"a sparse ({m}, {n}) times a dense operand")
    return _products(g, dense, ndim, 0, cols, rows, data, m, dtype)


def _dense_times_sparse(g, dense, matrix, ndim: int, dtype: str):
    """x @ S for x (m,) or (q, m) and the sparse constant S (m, n): out[..., c_k] += x[..., r_k]
    d_k (SciPy computes it as (S^T x^T)^T, S^T's matvec over the same stored entries)."""
    rows, cols, data, (m, n) = _entries(g, matrix, dtype)
    dense = _checked(g, dense, -1, m, f"a dense operand times a sparse ({m}, {n})")
    return _products(g, dense, ndim, ndim - 1, rows, cols, data, n, dtype)


def _dense_operand(g, node, values, i: int):
    """Operand `i` of `node` (its ONNX value among `values`) in the output's dtype."""
    dtype = node.outputs[0].type.dtype
    value = values[i]
    return value if node.inputs[i].type.dtype == dtype else g.Cast(value, to=onnx_dtype(dtype))


@register(Dot, StructuredDot)
def sparse_dot(g, node, *values):
    """Dot / StructuredDot of a sparse matrix known at export and a dense tensor, in either
    order."""
    matrix, i = _constant_operands(g, node)
    dtype, ndim = node.outputs[0].type.dtype, node.inputs[i].type.ndim
    dense = _dense_operand(g, node, values, i)
    if i == 1:
        return _sparse_times_dense(g, matrix, dense, ndim, dtype)
    return _dense_times_sparse(g, dense, matrix, ndim, dtype)


@register(AddSD)
def sparse_plus_dense(g, node, *values):
    """The sparse matrix S known at export plus the dense matrix y of its shape:
    y[r_k, c_k] += d_k."""
    matrix, i = _constant_operands(g, node)
    dtype = node.outputs[0].type.dtype
    rows, cols, data, shape = _entries(g, matrix, dtype)
    dense = _dense_operand(g, node, values, i)
    wrong = g.Not(g.Equal(g.Shape(dense), ints(g, list(shape))))
    message = f"Incompatible shapes (a sparse {shape} plus a dense matrix of another shape)"
    dense = raise_if(g, wrong, dense, ValueError, message)
    at = g.Concat(g.Unsqueeze(rows, ints(g, [1])), g.Unsqueeze(cols, ints(g, [1])), axis=1)
    return g.ScatterND(dense, at, data, reduction="add")
