"""A cache of ONNX's type and shape inference of single nodes, for onnxscript's GraphBuilder
and constant folder, which run it on every node they make or visit.

Each run serialises the node and its inputs' types to protobuf and calls ONNX's C++
inference (~150 us a node); a graph repeats the same few operators on the same types and
shapes many times. The key holds everything the run reads (operator, opset, attributes,
inputs' types, shapes and the small constant values it is given, and the outputs' types
and shapes it merges into); the cached result is the outputs' types and shapes the first
such run left, so a graph is the same with the cache as without it.
"""

import onnx_ir as ir

# The largest constant input onnxscript passes to ONNX's inference.
CONSTANT_SIZE_LIMIT = 20

# ONNX operators whose type and shape inference reads only their inputs' types and shapes
# (elementwise and broadcasting operators, MatMul): their constant inputs' values are left
# out of the key.
_DATA_BLIND = frozenset(
    [
        "Abs",
        "Acos",
        "Acosh",
        "Add",
        "And",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "BitwiseAnd",
        "BitwiseNot",
        "BitwiseOr",
        "BitwiseXor",
        "Ceil",
        "Cos",
        "Cosh",
        "Div",
        "Equal",
        "Erf",
        "Exp",
        "Floor",
        "Greater",
        "GreaterOrEqual",
        "Identity",
        "IsInf",
        "IsNaN",
        "Less",
        "LessOrEqual",
        "Log",
        "MatMul",
        "Max",
        "Min",
        "Mod",
        "Mul",
        "Neg",
        "Not",
        "Or",
        "Pow",
        "Reciprocal",
        "Relu",
        "Round",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "Softplus",
        "Sqrt",
        "Sub",
        "Sum",
        "Tan",
        "Tanh",
        "Where",
        "Xor",
    ]
)


def shape_dims(shape: ir.Shape | None) -> tuple | None:
    """`shape` as a hashable tuple: ints and symbolic dims (equal, and hashed, by their names;
    None for an unknown one)."""
    return None if shape is None else shape.dims


def type_key(type_: ir.TypeProtocol | None):
    """`type_`, hashable and compared as it is: a tensor type by its dtype (TensorType hashes
    its repr, ~1 us)."""
    return type_.dtype if type(type_) is ir.TensorType else type_


def key(node: ir.Node, version: int | None) -> tuple | None:
    """What inferring `node`'s outputs at opset `version` reads, or None where it is not to be
    cached (graph or tensor attributes: control flow, Constant)."""
    attributes = []
    for attr in node.attributes.values():
        value = attr.value
        values = tuple(value) if isinstance(value, list | tuple) else (value,)
        if not all(isinstance(v, int | float | str) for v in values):
            return None
        attributes.append((attr.name, attr.type, values))
    blind = node.op_type in _DATA_BLIND and not node.domain
    inputs = []
    for value in node.inputs:
        if value is None:
            inputs.append(None)
            continue
        const = value.const_value
        if blind or const is None or const.size > CONSTANT_SIZE_LIMIT:
            const = None
        else:
            const = (const.dtype, tuple(const.shape), const.numpy().tobytes())
        inputs.append((type_key(value.type), shape_dims(value.shape), const))
    outputs = tuple((type_key(value.type), shape_dims(value.shape)) for value in node.outputs)
    return (node.domain, node.op_type, version, tuple(attributes), tuple(inputs), outputs)


class InferenceCache:
    """The outputs' types and shapes that inference left, by key."""

    def __init__(self):
        self._results: dict[tuple, list[tuple]] = {}

    def replay(self, node: ir.Node, key: tuple) -> bool:
        """Give `node`'s outputs what the cached run gave; False if there is none."""
        results = self._results.get(key)
        if results is None:
            return False
        for output, (type_, shape) in zip(node.outputs, results, strict=True):
            output.type = type_
            output.shape = None if shape is None else shape.copy()
        return True

    def record(self, node: ir.Node, key: tuple) -> None:
        """Remember what inference left on `node`'s outputs."""
        self._results[key] = [
            (output.type, None if output.shape is None else output.shape.copy())
            for output in node.outputs
        ]
