"""Small helpers shared by translations."""

import numpy as np
import onnx_ir as ir
from pytensor.tensor import constant as tensor_constant

from pt_onnxscript.translate import constant_value
from pt_onnxscript.types import onnx_dtype


def out_dtype(node, i: int = 0):
    """The ONNX dtype of output `i` of `node`."""
    return onnx_dtype(node.outputs[i].type.dtype)


def cast_inputs_to_output(op, node, inputs):
    """Cast the inputs whose dtype differs from the output's (PyTensor's upcast) to it."""
    target = node.outputs[0].type.dtype
    return [
        x if var.type.dtype == target else op.Cast(x, to=onnx_dtype(target))
        for var, x in zip(node.inputs, inputs, strict=True)
    ]


def constant(op, value, dtype: str):
    """A constant of PyTensor dtype `dtype`, shared with the graph's other constants."""
    return constant_value(op, tensor_constant(np.asarray(value, dtype=dtype)))


# ONNX Runtime's Where has no bool/int16/uint16/uint64 kernel; these dtypes hold the same values.
WHERE_DTYPE = {"bool": "uint8", "int16": "int32", "uint16": "uint32", "uint64": "int64"}


def where(op, cond, a, b, dtype: str):
    """Where(cond, a, b) for values of PyTensor dtype `dtype`.

    ONNX Runtime's Where turns a -0.0 taken from `a` (not from `b`) into +0.0. A constant
    without -0.0 goes first, as is, or the condition is negated to put it there; otherwise
    the zeros taken from a -0.0 in `a` get their sign back by a multiplication by -1.
    """
    via = WHERE_DTYPE.get(dtype)
    if np.dtype(dtype).kind == "f":
        if _no_negative_zero(a):
            return op.Where(cond, a, b)
        if _no_negative_zero(b):
            return op.Where(op.Not(cond), b, a)
        zero = constant(op, 0, dtype)
        negative_zero = op.And(op.Equal(a, zero), op.Less(op.Div(constant(op, 1, dtype), a), zero))
        sign = op.Where(op.And(cond, negative_zero), constant(op, -1, dtype), constant(op, 1, dtype))
        return op.Mul(op.Where(cond, a, b), sign)
    if via is None:
        return op.Where(cond, a, b)
    to, back = onnx_dtype(via), onnx_dtype(dtype)
    return op.Cast(op.Where(cond, op.Cast(a, to=to), op.Cast(b, to=to)), to=back)


def _no_negative_zero(value) -> bool:
    """Whether `value` is a constant known to hold no -0.0."""
    tensor = value.const_value
    if tensor is None:
        return False
    array = tensor.numpy()
    return not np.any((array == 0) & np.signbit(array))


CHECK = "pt_onnxscript.check"


def failure_guard(op, failed, exc_type: type[Exception], message: str):
    """A value that makes ONNX Runtime fail when any of `failed` (a bool tensor, or a list of
    them) is true: an empty shape vector to Expand values by (``op.Expand(value, guard)``
    leaves them unchanged, -0.0 and NaN included), gathered from one empty row at index 1
    when the check fails.

    ONNX has no operator that raises; ONNX Runtime refuses the out-of-range Gather, and its
    error repeats the Gather's name, which holds `message`. Mode "ONNX" raises
    ``exc_type(message)``.
    """
    flags = []
    for value in failed if isinstance(failed, list | tuple) else [failed]:
        if value.shape is None or len(value.shape) != 0:
            value = op.ReduceMax(op.Cast(value, to=ir.DataType.UINT8), keepdims=0)
        flags.append(op.Cast(value, to=ir.DataType.INT64))
    index = flags[0] if len(flags) == 1 else op.Max(*flags)
    rows = constant(op, np.zeros((1, 0)), "int64")
    name = f"{op.builder._qualify_node_name('check')}: {message}"
    guard = op.Gather(rows, index, axis=0, _name=name)
    guard.producer().meta[CHECK] = (exc_type, message)
    return guard


def raise_if(op, failed, value, exc_type: type[Exception], message: str):
    """`value`, made to raise ``exc_type(message)`` when any of `failed` is true."""
    return op.Expand(value, failure_guard(op, failed, exc_type, message))


RUNTIME_BROADCAST = (
    "Runtime broadcasting not allowed: an input has length 1 in a dimension it was not "
    "declared broadcastable in. If broadcasting was intended, use `specify_broadcastable` "
    "on the relevant input."
)


def _known_size(var, value, d: int) -> int | None:
    """Dim `d` of `var`, if PyTensor's type or the ONNX value's inferred shape (a baked weight's,
    say) knows it."""
    if var.type.shape[d] is not None:
        return var.type.shape[d]
    shape = value.shape
    if shape is not None and len(shape) == var.type.ndim and isinstance(shape[d], int):
        return shape[d]
    return None


def check_runtime_broadcast(op, variables, values, ndim: int):
    """`values`, guarded to raise PyTensor's runtime-broadcasting error where, in one of the
    first `ndim` dims, an input not declared broadcastable there has length 1 at run time
    while another has not (ONNX would broadcast it; Elemwise and Blockwise refuse)."""
    sizes = [[_known_size(var, value, d) for d in range(ndim)] for var, value in zip(variables, values, strict=True)]
    checked = []
    for d in range(ndim):
        candidates = [known[d] for var, known in zip(variables, sizes, strict=True) if not var.type.broadcastable[d]]
        if len(candidates) > 1 and (None in candidates or (1 in candidates and len(set(candidates)) > 1)):
            checked.append(d)
    if not checked:
        return list(values)
    positions = constant(op, checked, "int64")
    unsqueeze = constant(op, [0], "int64")
    lengths = op.Concat(
        *[op.Unsqueeze(op.Gather(op.Shape(v), positions, axis=0), unsqueeze) for v in values], axis=0
    )
    declared = np.array([[not var.type.broadcastable[d] for d in checked] for var in variables])
    one = op.Equal(lengths, constant(op, 1, "int64"))
    undeclared_one = op.Cast(op.And(one, constant(op, declared, "bool")), to=ir.DataType.UINT8)
    other = op.Cast(op.Not(one), to=ir.DataType.UINT8)
    axis = constant(op, [0], "int64")
    failed = op.And(
        op.Cast(op.ReduceMax(undeclared_one, axis, keepdims=0), to=ir.DataType.BOOL),
        op.Cast(op.ReduceMax(other, axis, keepdims=0), to=ir.DataType.BOOL),
    )
    guard = failure_guard(op, failed, ValueError, RUNTIME_BROADCAST)
    return [op.Expand(v, guard) for v in values]


def inline(op, function, *args):
    """Inline scripted `function`; the scripted functions it calls are inlined with the model."""
    _register_callees(op.builder.functions, function)
    return op.call_inline(function, *args)


def inline_in_float64(op, node, function, *inputs, variables=None):
    """Inline scripted float64 `function` on `inputs` (the ONNX values of `variables`, by
    default the node's inputs) cast to float64, its result rounded once to the node's output
    dtype."""
    variables = node.inputs if variables is None else variables
    args = [
        x if var.type.dtype == "float64" else op.Cast(x, to=onnx_dtype("float64"))
        for var, x in zip(variables, inputs, strict=True)
    ]
    result = inline(op, function, *args)
    out = node.outputs[0].type.dtype
    return result if out == "float64" else op.Cast(result, to=onnx_dtype(out))


def _register_callees(functions, function):
    for node in ir.traversal.RecursiveGraphIterator(function.graph()):
        callee = function.function.__globals__.get(node.op_type)
        if node.domain == function.function_ir.domain and callee is not None:
            # A copy: inlining rewrites the model's functions in place.
            functions[callee.function_ir.identifier()] = ir.serde.deserialize_function(
                ir.serde.serialize_function(callee.function_ir)
            )
            _register_callees(functions, callee)


def loop(op, count, state, step, kind: str, *, condition=None):
    """The final `state` of an ONNX Loop running ``state = step(op, k, *state)`` for k in
    range(`count`) (None: no bound).

    With a `condition` (a 0-d bool: whether to run the first step), the Loop runs while it
    holds and `step` returns ``(go_on, *state)``. Value names in the body start with a tag
    numbered per model (deterministic files).
    """
    tag = subgraph_tag(op, kind)

    def body(op, k, go, *values):
        op.builder.push_module(tag)  # keeps value names apart from the outer graph's
        results = step(op, k, *values)
        return [op.Identity(go), *results] if condition is None else list(results)

    graph = op.builder.subgraph(
        body,
        inputs=[
            ir.val(f"{tag}_k", ir.DataType.INT64, []),
            ir.val(f"{tag}_go", ir.DataType.BOOL, []),
            *[ir.val(f"{tag}_in{i}", v.dtype) for i, v in enumerate(state)],
        ],
        outputs=[
            ir.val(f"{tag}_go_out", ir.DataType.BOOL, []),
            *[ir.val(f"{tag}_out{i}", v.dtype) for i, v in enumerate(state)],
        ],
        name=tag,
    )
    result = op.Loop(count, condition, *state, body=graph, _outputs=len(state))
    return list(result) if len(state) > 1 else [result]


def subgraph_tag(op, kind: str) -> str:
    """A prefix for a subgraph's value names: ONNX wants names unique across nested graphs.

    Numbered per model, so exporting the same graph twice gives the same file."""
    root = op.builder.root
    root.subgraph_count = getattr(root, "subgraph_count", 0) + 1
    return f"{kind}{root.subgraph_count}"
