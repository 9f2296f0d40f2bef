"""The opsets pt_onnxscript supports: declared once, checked at every entry point.

Translations are written against opset 18 (``op18`` forms: ReduceSum with axes as an input,
Split with sizes as an input, ...); operators whose later versions keep those forms run
unchanged under newer imports. A translation that uses a newer form where the model's opset
allows it says so with ``at_least(g, version)``, the one place such choices are made. The
ceiling is the newest opset that onnxscript, onnx and the installed ONNX Runtime all accept.
"""

from functools import cache

MIN_OPSET = 18
DEFAULT_OPSET = 18


def min_ir_version(opset: int) -> int:
    import onnx

    return onnx.helper.find_min_ir_version_for([onnx.helper.make_opsetid("", opset)])


@cache
def newest_opset() -> int:
    """The newest opset that onnxscript, onnx and the installed ONNX Runtime all support."""
    import onnx
    import onnx_ir as ir
    import onnxruntime as ort
    from onnxscript.onnx_opset import all_opsets

    scripted = max(version for domain, version in all_opsets if domain == "")
    newest = DEFAULT_OPSET
    for opset in range(DEFAULT_OPSET + 1, min(scripted, onnx.defs.onnx_opset_version()) + 1):
        graph = ir.Graph(
            inputs=[ir.val("x", ir.DataType.FLOAT, [1])],
            outputs=[],
            nodes=[],
            opset_imports={"": opset},
        )
        node = ir.node("Identity", [graph.inputs[0]], num_outputs=1)
        graph.append(node)
        node.outputs[0].name, node.outputs[0].type = "y", ir.TensorType(ir.DataType.FLOAT)
        node.outputs[0].shape = ir.Shape([1])
        graph.outputs.append(node.outputs[0])
        proto = ir.serde.serialize_model(ir.Model(graph, ir_version=min_ir_version(opset)))
        try:
            ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001  (ONNX Runtime's errors share no base class)
            break
        newest = opset
    return newest


def at_least(g, version: int) -> bool:
    """Whether the model builder `g` is building imports opset `version` or newer."""
    return g.builder.root.graph.opset_imports[""] >= version


def check_opset(opset) -> int:
    """`opset`, if pt_onnxscript supports it; a ValueError naming the supported range if not."""
    is_int = isinstance(opset, int) and not isinstance(opset, bool)
    if is_int and MIN_OPSET <= opset <= DEFAULT_OPSET:
        return opset  # without asking ONNX Runtime (importing it takes a while)
    newest = newest_opset()
    if not is_int or not MIN_OPSET <= opset <= newest:
        raise ValueError(
            f"opset {opset!r} is not supported: pt_onnxscript writes opsets {MIN_OPSET} to "
            f"{newest} (the newest that onnx, onnxscript and the installed ONNX Runtime "
            f"support); the default is {DEFAULT_OPSET}."
        )
    return opset
