"""What an exported model is and where it runs, in one report (Markdown or JSON).

``describe(model)`` reads an ONNX model: its opset and IR version, inputs and outputs with
their dims, node count by op type (Loop and If bodies included), its Loops and Ifs, its
initializers (count and bytes), the nodes whose op ONNX Runtime's CPU build (and
onnxruntime-web's WebAssembly build, the same kernels) has no kernel for in their dtype
(`runtime_gaps`), and the constructs a runtime of the portability matrix is known to fail
on (`KNOWN_FAILURES`). With ``runs=`` (``run_in``) it records what running the model in
each runtime of `pt_onnxscript.runtimes` gave against ONNX Runtime; with ``verification=``
(``verify``) the largest difference of each output from PyTensor's Python implementation.

``export_onnx(..., report=path, verify=True)`` writes the report of the model it exports
(``.json``: JSON, otherwise Markdown); ``python -m pt_onnxscript inspect model.onnx`` prints
the report of a model file (``--run`` runs it in the runtimes on generated inputs).
"""

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import onnx

from pt_onnxscript.runtime_gaps import has_kernel
from pt_onnxscript.runtimes import as_model_proto

# Constructs that a runtime of the portability matrix fails on, found by
# tests/test_portability.py: runtime -> (its version, the op types that carry the construct,
# the construct and whose limit it is).
KNOWN_FAILURES = {
    "openvino": (
        "openvino 2026.4.1",
        ("Gather",),
        (
            "a runtime check (a Gather from a (1, 0) constant, failing when the check does: "
            "OpenVINO cannot convert it, and its Gather would not fail; fix the dims at export "
            "to leave nothing to check), and float64 (its CPU plugin has none)"
        ),
    ),
    "onnx.reference": (
        "onnx 1.23.2",
        ("Loop",),
        (
            "a Loop's scan outputs: a 0-d value per iteration is stacked as (n, 1), and a "
            "Loop that runs no iteration fails (np.vstack in its Loop); the evaluator's bug"
        ),
    ),
}


def _dtype(elem_type: int) -> str:
    """The NumPy name of ONNX element type `elem_type` (its ONNX name where NumPy has none)."""
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name
    except (KeyError, ValueError):
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _spec(value: onnx.ValueInfoProto) -> dict:
    tensor = value.type.tensor_type
    dims = None
    if tensor.HasField("shape"):
        dims = [
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tensor.shape.dim
        ]
    return {"name": value.name, "dtype": _dtype(tensor.elem_type), "dims": dims}


def _graphs(graph: onnx.GraphProto):
    """`graph` and its subgraphs (Loop and If bodies), depth first."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _value_dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """The dtype of every value ONNX's shape inference knows, by name."""
    inferred = onnx.shape_inference.infer_shapes(model)
    dtypes = {}
    for graph in _graphs(inferred.graph):
        for value in [*graph.input, *graph.value_info, *graph.output]:
            if value.type.HasField("tensor_type"):
                dtypes[value.name] = _dtype(value.type.tensor_type.elem_type)
        for tensor in graph.initializer:
            dtypes[tensor.name] = _dtype(tensor.data_type)
    return dtypes


def _checks(nodes) -> list[str]:
    """The messages of the runtime checks among `nodes` (ops.common.failure_guard: a Gather
    named "<scope>/check: <message>")."""
    return sorted(
        {
            node.name.split("check: ", 1)[1].removesuffix("_1")
            for node in nodes
            if node.op_type == "Gather" and "check: " in node.name
        }
    )


# The runtimes of the portability matrix (tests/test_portability.py) and the dtypes it runs
# them on: where a model meets no known failure of one, it is expected to run there.
MATRIX_DTYPES = {
    "onnxruntime": None,
    "onnxruntime-web": None,
    "onnx.reference": None,
    "openvino": {"float32", "float16", "bool", "int8", "int32", "int64", "uint8"},
    "tract": {"float32", "bool", "int8", "int32", "int64", "uint8"},
}


def _known_to_run(report: dict, dtypes: dict) -> list[str]:
    """The runtimes of the matrix whose tested dtypes hold the model's and whose known
    failures do not apply, and where every node has a kernel (ONNX Runtime's builds)."""
    used = set(dtypes.values())
    runs = []
    for runtime, tested in MATRIX_DTYPES.items():
        if runtime in report["known_failures"]:
            continue
        if tested is not None and not used <= tested:
            continue
        if runtime.startswith("onnxruntime") and report["without_kernel"]:
            continue
        runs.append(runtime)
    return runs


def describe(
    model, *, runs: Mapping[str, dict] | None = None, verification: list[dict] | None = None
) -> dict:
    """The report of `model` (a ModelProto or a path) as a dict of plain values."""
    proto = as_model_proto(model)
    graphs = list(_graphs(proto.graph))
    nodes = [node for graph in graphs for node in graph.node]
    dtypes = _value_dtypes(proto)
    missing = Counter()
    for node in nodes:
        # The dtype of its operands: Where's values (not its condition), others' first input.
        operand = node.input[1] if node.op_type == "Where" else (node.input or [""])[0]
        dtype = dtypes.get(operand)
        if dtype is not None and not has_kernel(node.op_type, dtype):
            missing[(node.op_type, dtype)] += 1
    initializers = [t for graph in graphs for t in graph.initializer]
    initializer_bytes = sum(
        int(np.prod(t.dims, dtype=np.int64))
        * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        for t in initializers
    )
    counts = Counter(node.op_type for node in nodes)
    checks = _checks(nodes)
    report = {
        "ir_version": proto.ir_version,
        "opset": {imp.domain or "ai.onnx": imp.version for imp in proto.opset_import},
        "producer": f"{proto.producer_name} {proto.producer_version}".strip(),
        "inputs": [_spec(v) for v in proto.graph.input],
        "outputs": [_spec(v) for v in proto.graph.output],
        "nodes": len(nodes),
        "op_types": dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
        "loops": counts.get("Loop", 0) + counts.get("Scan", 0),
        "ifs": counts.get("If", 0),
        "initializers": {"count": len(initializers), "bytes": initializer_bytes},
        "checks": checks,
        "without_kernel": [
            {
                "op_type": op,
                "dtype": dtype,
                "nodes": n,
                "runtimes": ["onnxruntime (CPU)", "onnxruntime-web (wasm)"],
            }
            for (op, dtype), n in sorted(missing.items())
        ],
        "known_failures": {
            runtime: {"version": version, "construct": construct}
            for runtime, (version, op_types, construct) in KNOWN_FAILURES.items()
            if any(counts.get(op_type) for op_type in op_types)
            and (runtime != "openvino" or checks or "float64" in dtypes.values())
        },
        "metadata": {p.key: p.value for p in proto.metadata_props},
    }
    report["known_to_run"] = _known_to_run(report, dtypes)
    if runs is not None:
        report["runs"] = dict(runs)
    if verification is not None:
        report["verification"] = verification
    return report


def sample_feeds(model, seed: int = 0, size: int = 3) -> dict[str, np.ndarray]:
    """Inputs for `model` from its input specs: floats standard normal, integers in [0, 3),
    booleans at random, a ``uint64[2]`` random state (pt_onnxscript.rng) as [seed, 0];
    each symbolic dim `size`."""
    proto = as_model_proto(model)
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in proto.graph.input:
        spec = _spec(value)
        if spec["dims"] is None:
            raise ValueError(
                f"Input {spec['name']!r} has no shape in the model: pass the inputs yourself"
            )
        shape = tuple(d if isinstance(d, int) else size for d in spec["dims"])
        dtype = np.dtype(spec["dtype"])
        if dtype == np.uint64 and shape == (2,):
            feeds[spec["name"]] = np.array([seed, 0], dtype=np.uint64)
        elif dtype.kind == "f":
            feeds[spec["name"]] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[spec["name"]] = rng.random(shape) < 0.5
        elif dtype.kind in "iu":
            feeds[spec["name"]] = rng.integers(0, 3, shape).astype(dtype)
        else:
            raise ValueError(f"Input {spec['name']!r} has dtype {dtype}: pass the inputs yourself")
    return feeds


def _difference(got: np.ndarray, want: np.ndarray) -> dict:
    got, want = np.asarray(got), np.asarray(want)
    entry = {"dtype": str(got.dtype), "shape": list(got.shape)}
    if got.shape != want.shape or got.dtype != want.dtype:
        entry["mismatch"] = f"{want.dtype}{list(want.shape)} expected"
        return entry
    from pt_onnxscript.debug import _max_differences  # (imports PyTensor: not at start-up)

    largest, relative = _max_differences([got], [want])  # None, None: not numbers
    if largest is not None:
        entry["max_abs_error"], entry["max_rel_error"] = float(largest), float(relative)
    return entry


def run_in(model, runtimes: Sequence[str], feeds: Mapping[str, np.ndarray]) -> dict[str, dict]:
    """Run `model` on `feeds` in each of `runtimes` (pt_onnxscript.runtimes.RUNTIMES): for
    each, "ran" with each output's largest difference from ONNX Runtime's, "failed" with
    the runtime's message, or "unavailable" with what to install."""
    from pt_onnxscript import runtimes as rt

    reference = rt.run_onnxruntime(model, feeds)
    results = {}
    for runtime in runtimes:
        try:
            got = reference if runtime == "onnxruntime" else rt.run(runtime, model, feeds)
        except rt.RuntimeUnavailable as err:
            results[runtime] = {"status": "unavailable", "message": str(err)}
            continue
        except rt.RuntimeFailed as err:
            results[runtime] = {"status": "failed", "message": str(err)}
            continue
        results[runtime] = {
            "status": "ran",
            "outputs": {name: _difference(got[name], want) for name, want in reference.items()},
        }
    return results


def verify(fn, model, values: Sequence | None = None, seed: int = 0) -> list[dict]:
    """Each output of `model` (exported from compiled function `fn`, shared variables baked
    or fed) run by ONNX Runtime, against PyTensor's Python implementation of `fn`'s graph,
    on `values` (one per explicit input; by default generated from the model's input specs
    as `sample_feeds` does): one entry per output with its largest absolute and relative
    error."""
    from pt_onnxscript import runtimes as rt
    from pt_onnxscript.debug import _evaluate_graph
    from pt_onnxscript.rng import is_random_state

    fgraph, specs = fn.maker.fgraph, fn.maker.inputs
    if any(spec.shared and is_random_state(var) for var, spec in zip(fgraph.inputs, specs)):
        raise ValueError(
            "verify compares with PyTensor's results, and a graph that draws random numbers "
            "draws them with pt_onnxscript.rng in ONNX, not with NumPy's generator: leave "
            "verify off for it (tests/test_random.py checks draws by their distribution)"
        )
    names = [
        spec.name or var.name or f"input_{i}"
        for i, (var, spec) in enumerate(zip(fgraph.inputs, specs))
    ]
    explicit = [i for i, spec in enumerate(specs) if not spec.shared]
    if values is None:
        generated = sample_feeds(model, seed)
        missing = [names[i] for i in explicit if names[i] not in generated]
        if missing:
            raise ValueError(f"Cannot generate values for inputs {missing}: pass values=")
        values = [generated[names[i]] for i in explicit]
    if len(values) != len(explicit):
        raise ValueError(f"Got {len(values)} values for {len(explicit)} inputs")
    given = dict(zip(explicit, values, strict=True))
    inputs = [
        specs[i].variable.get_value() if specs[i].shared else var.type.filter(given[i])
        for i, var in enumerate(fgraph.inputs)
    ]
    expected = _evaluate_graph(fgraph, inputs)
    proto = model
    model_inputs = {v.name for v in proto.graph.input}
    feeds = {name: np.asarray(value) for name, value in zip(names, inputs) if name in model_inputs}
    got = rt.run_onnxruntime(proto, feeds)
    return [
        {"output": name} | _difference(value, np.asarray(want))
        for (name, value), want in zip(got.items(), expected, strict=False)
    ]


def to_markdown(report: Mapping) -> str:
    """`report` as Markdown."""

    def dims(spec):
        return "?" if spec["dims"] is None else "(" + ", ".join(str(d) for d in spec["dims"]) + ")"

    opsets = ", ".join(f"{domain} {version}" for domain, version in report["opset"].items())
    lines = [
        "# ONNX model report",
        "",
        f"- opset: {opsets}; IR version {report['ir_version']}; producer {report['producer']}",
        (
            f"- nodes: {report['nodes']} (Loop bodies and If branches included); "
            f"Loops: {report['loops']}, Ifs: {report['ifs']}"
        ),
        (
            f"- initializers: {report['initializers']['count']}, "
            f"{report['initializers']['bytes']:,} bytes"
        ),
        "",
        "| | name | dtype | dims |",
        "|---|---|---|---|",
    ]
    for kind in ("inputs", "outputs"):
        for spec in report[kind]:
            lines.append(f"| {kind[:-1]} | {spec['name']} | {spec['dtype']} | {dims(spec)} |")
    lines += [
        "",
        "Nodes by op type: " + ", ".join(f"{op} {n}" for op, n in report["op_types"].items()),
    ]
    if report["checks"]:
        lines += ["", "Runtime checks (the model fails when one does):"]
        lines += [f"- {message}" for message in report["checks"]]
    lines += ["", "## Runtimes", ""]
    lines.append(
        "- expected to run in: "
        + (", ".join(report["known_to_run"]) or "none of the matrix")
        + " (tests/test_portability.py; the rest below)"
    )
    if report["without_kernel"]:
        for entry in report["without_kernel"]:
            lines.append(
                f"- {entry['op_type']} in {entry['dtype']} ({entry['nodes']} nodes): no kernel "
                f"in {' or '.join(entry['runtimes'])}"
            )
    else:
        lines.append(
            "- every node has a kernel in ONNX Runtime's CPU build and onnxruntime-web's "
            "WebAssembly build for its dtype"
        )
    for runtime, entry in report["known_failures"].items():
        lines.append(f"- {runtime} ({entry['version']}) is known to fail on {entry['construct']}")
    if "runs" in report:
        lines += [
            "",
            "| runtime | result | largest difference from ONNX Runtime |",
            "|---|---|---|",
        ]
        for runtime, run in report["runs"].items():
            if run["status"] != "ran":
                message = " ".join(run["message"].split()).replace("|", "\\|")
                lines.append(f"| {runtime} | {run['status']} | {message} |")
                continue
            worst = max((o.get("max_abs_error", 0.0) for o in run["outputs"].values()), default=0.0)
            lines.append(f"| {runtime} | ran | {worst:.3g} |")
    if "verification" in report:
        lines += [
            "",
            "## Against PyTensor (its Python implementation)",
            "",
            "| output | dtype | shape | max abs error | max rel error |",
            "|---|---|---|---|---|",
        ]
        for entry in report["verification"]:
            lines.append(
                f"| {entry['output']} | {entry['dtype']} | {tuple(entry['shape'])} | "
                f"{entry.get('max_abs_error', entry.get('mismatch', '-'))} | "
                f"{entry.get('max_rel_error', '-')} |"
            )
    return "\n".join(lines) + "\n"


def write(report: Mapping, path) -> None:
    """Write `report` to `path`: JSON if it ends in .json, Markdown otherwise."""
    path = os.fspath(path)
    with open(path, "w") as f:
        if path.endswith(".json"):
            json.dump(report, f, indent=2)
            f.write("\n")
        else:
            f.write(to_markdown(report))
