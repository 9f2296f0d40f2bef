"""The export report (pt_onnxscript.report): export_onnx(..., report=, verify=) and
``python -m pt_onnxscript inspect``."""

import json

import numpy as np
import onnx
import pytensor
import pytensor.tensor as pt
import pytest
from onnx import TensorProto, helper

from pt_onnxscript import export_onnx, report
from pt_onnxscript.__main__ import main


def scan_graph():
    x = pt.dmatrix("x")
    w = pytensor.shared(np.arange(12.0).reshape(3, 4) / 10, name="w")
    steps = pytensor.scan(
        lambda row, acc: acc + pt.tanh(row @ w),
        sequences=[x],
        outputs_info=[pt.zeros(4)],
        return_updates=False,
    )
    return [x], [steps[-1], pt.special.gammaln(x + 3).sum()]


def test_export_writes_the_report_with_verification(tmp_path):
    path = tmp_path / "model.json"
    proto = export_onnx(scan_graph(), report=path, verify=True)
    got = json.loads(path.read_text())
    assert got["opset"] == {"ai.onnx": 18} and got["ir_version"] == proto.ir_version
    assert got["inputs"] == [{"name": "x", "dtype": "float64", "dims": ["x_dim0", "x_dim1"]}]
    assert [o["dtype"] for o in got["outputs"]] == ["float64", "float64"]
    nodes = [n for g in report._graphs(proto.graph) for n in g.node]
    assert got["nodes"] == len(nodes) == sum(got["op_types"].values())
    assert got["loops"] == sum(n.op_type == "Loop" for n in nodes) >= 1
    weights = [t for g in report._graphs(proto.graph) for t in g.initializer]
    assert got["initializers"]["bytes"] == sum(
        onnx.numpy_helper.to_array(t).nbytes for t in weights
    )
    assert got["without_kernel"] == []
    assert "onnx.reference" in got["known_failures"]  # it has a Loop
    assert [e["output"] for e in got["verification"]] == [o.name for o in proto.graph.output]
    for entry in got["verification"]:
        assert entry["dtype"] == "float64" and entry["max_rel_error"] <= 1e-12


def test_markdown_report_on_given_values(tmp_path):
    path = tmp_path / "model.md"
    values = [np.linspace(-1, 1, 10).reshape(5, 2) @ np.ones((2, 3))]
    export_onnx(scan_graph(), report=path, verify=values)
    text = path.read_text()
    assert text.startswith("# ONNX model report")
    assert "| input | x | float64 | (x_dim0, x_dim1) |" in text
    assert "## Against PyTensor" in text and "| (3,) |" not in text
    assert "| (4,) |" in text  # the Scan's last row, on the 5 x 3 values given


def test_ops_without_kernels_are_named():
    """A model (not ours) with a float64 Tan and a float64 Erf: ONNX Runtime's CPU build has no
    kernel for either."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3])
    graph = helper.make_graph(
        [helper.make_node("Tan", ["x"], ["t"]), helper.make_node("Erf", ["t"], ["y"])],
        "g",
        [x],
        [y],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    got = report.describe(model)
    assert [(e["op_type"], e["dtype"]) for e in got["without_kernel"]] == [
        ("Erf", "float64"),
        ("Tan", "float64"),
    ]
    assert "Tan in float64 (1 nodes): no kernel" in report.to_markdown(got)


def test_inspect_command(tmp_path, capsys):
    """The report of a file, with runs in ONNX Runtime and the reference evaluator on
    generated inputs; a missing file is an error that names it."""
    path = tmp_path / "model.onnx"
    export_onnx(scan_graph(), path)
    assert main(["inspect", str(path), "--json", "--run", "onnxruntime", "onnx.reference"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["runs"]["onnxruntime"]["status"] == "ran"
    # The generated x has 3 rows: the Scan's Loop unrolled by 16 runs no iteration, which the
    # reference evaluator fails, as the report's known failures say.
    assert got["runs"]["onnx.reference"] == {
        "status": "failed",
        "message": "onnx.reference: ValueError: need at least one array to concatenate",
    }
    assert "onnx.reference" in got["known_failures"]
    assert main(["inspect", str(path)]) == 0
    assert capsys.readouterr().out.startswith("# ONNX model report")
    assert main(["inspect", str(tmp_path / "missing.onnx")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_verify_needs_a_report_and_refuses_random_graphs(tmp_path):
    x = pt.dvector("x")
    with pytest.raises(ValueError, match="pass report=path"):
        export_onnx(([x], [x + 1]), verify=True)
    rng = pytensor.shared(np.random.default_rng(0), name="rng")
    draws = pt.random.normal(x, 1.0, rng=rng)
    fn = pytensor.function([x], draws, updates={rng: draws.owner.outputs[0]})
    with pytest.raises(ValueError, match="random numbers"):
        export_onnx(fn, report=tmp_path / "r.md", verify=True)


def test_the_report_lists_runtime_checks():
    """What a model checks at run time (OpenVINO cannot run checks: the report says why and
    that fixing the dims removes them)."""
    x, y = pt.vector("x", dtype="float32"), pt.vector("y", dtype="float32")
    checked = report.describe(export_onnx(([x, y], [pt.exp(x) + y])))
    assert [m.split(":")[0] for m in checked["checks"]] == ["Runtime broadcasting not allowed"]
    assert "fix the dims" in checked["known_failures"]["openvino"]["construct"]
    assert "openvino" not in checked["known_to_run"] and "tract" in checked["known_to_run"]
    fixed = report.describe(export_onnx(([x, y], [pt.exp(x) + y]), dims={"x": (4,), "y": (4,)}))
    assert fixed["checks"] == [] and "openvino" not in fixed["known_failures"]
    assert fixed["known_to_run"] == [
        "onnxruntime",
        "onnxruntime-web",
        "onnx.reference",
        "openvino",
        "tract",
    ]
    # float64 and a Loop: ONNX Runtime's builds; not OpenVINO, tract (float32 only) or the
    # reference evaluator (its Loop).
    assert report.describe(export_onnx(scan_graph()))["known_to_run"] == [
        "onnxruntime",
        "onnxruntime-web",
    ]
