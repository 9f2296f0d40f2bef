"""Serving an exported model on existing inference servers.

Triton Inference Server
-----------------------

``export_model_repository(source, directory, name)`` writes the model repository layout that
Triton Inference Server (and KServe's Triton runtime) reads::

    <directory>/<name>/config.pbtxt
    <directory>/<name>/1/model.onnx

The configuration (Triton's ModelConfig, protobuf text format) names the ONNX Runtime
backend (``platform: "onnxruntime_onnx"``), every input and output with its exact dtype
(TYPE_FP64 where PyTensor has float64) and its dims, -1 for a dim the model leaves
symbolic; a 0-d tensor is sent as one element (``dims: [ 1 ]``) and reshaped to the model's
0-d (``reshape: { shape: [ ] }``), as Triton's documentation says to. Instances run on the
CPU (ONNX Runtime's CUDA build lacks float64 kernels for much of what a PyTensor graph
computes). With ``batching=True``, every input and output must have the same leading
symbolic dim (a batch of points, rows, images): Triton then batches requests itself
(``max_batch_size``, ``dynamic_batching``) and the dims exclude that dim.

MLServer
--------
``export_mlserver_model(source, directory, name)`` writes ``<directory>/<name>/model.onnx``
and the ``model-settings.json`` that makes MLServer (``pip install pt_onnxscript[serving]``)
serve it with `pt_onnxscript.mlserver_runtime` over the Open Inference Protocol (KServe
V2, REST and gRPC), batching concurrent requests along their first dim where asked
(``max_batch_size``, ``max_batch_time``). ``mlserver start <directory>`` serves every model
under it; a ``settings.json`` there sets the host and ports (`write_mlserver_settings`).
"""

import json
import os
import re
from pathlib import Path

import onnx

from pt_onnxscript.runtimes import as_model_proto

# ONNX element type -> Triton's DataType (model_config.proto).
TRITON_DTYPES = {
    onnx.TensorProto.BOOL: "TYPE_BOOL",
    onnx.TensorProto.UINT8: "TYPE_UINT8",
    onnx.TensorProto.UINT16: "TYPE_UINT16",
    onnx.TensorProto.UINT32: "TYPE_UINT32",
    onnx.TensorProto.UINT64: "TYPE_UINT64",
    onnx.TensorProto.INT8: "TYPE_INT8",
    onnx.TensorProto.INT16: "TYPE_INT16",
    onnx.TensorProto.INT32: "TYPE_INT32",
    onnx.TensorProto.INT64: "TYPE_INT64",
    onnx.TensorProto.FLOAT16: "TYPE_FP16",
    onnx.TensorProto.FLOAT: "TYPE_FP32",
    onnx.TensorProto.DOUBLE: "TYPE_FP64",
    onnx.TensorProto.BFLOAT16: "TYPE_BF16",
}

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _check_name(name) -> None:
    """Refuse a model name that cannot name a directory and the model in requests."""
    if not (isinstance(name, str) and _NAME.match(name)):
        raise ValueError(
            f"The model name must be letters, digits, '_', '.' or '-' (it names a "
            f"directory and the model in requests), not {name!r}"
        )


def _dims(value: onnx.ValueInfoProto) -> list[int | str]:
    tensor = value.type.tensor_type
    if not tensor.HasField("shape"):
        raise ValueError(
            f"{value.name!r} has no shape in the model: Triton needs every dim (-1 for any size)"
        )
    return [
        d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in tensor.shape.dim
    ]


def _tensor_config(value: onnx.ValueInfoProto, batched: bool) -> str:
    elem_type = value.type.tensor_type.elem_type
    if elem_type not in TRITON_DTYPES:
        raise ValueError(
            f"{value.name!r} has dtype {onnx.TensorProto.DataType.Name(elem_type)}, which "
            "Triton's ONNX Runtime backend has no type for"
        )
    dims = _dims(value)[1 if batched else 0 :]
    lines = [
        "  {",
        f'    name: "{value.name}"',
        f"    data_type: {TRITON_DTYPES[elem_type]}",
    ]
    if dims:
        lines.append(
            f"    dims: [ {', '.join(str(d if isinstance(d, int) else -1) for d in dims)} ]"
        )
    else:
        lines += ["    dims: [ 1 ]", "    reshape: { shape: [ ] }"]
    lines.append("  }")
    return "\n".join(lines)


def triton_config(
    model: onnx.ModelProto,
    name: str,
    *,
    batching: bool = False,
    max_batch_size: int = 64,
    instances: int = 1,
) -> str:
    """Triton's config.pbtxt for `model` served as `name` (see the module's docstring)."""
    if batching:
        leading = {
            value.name: (_dims(value) or [None])[0]
            for value in [*model.graph.input, *model.graph.output]
        }
        first = next(iter(leading.values()))
        if not isinstance(first, str) or any(d != first for d in leading.values()):
            raise ValueError(
                "batching=True needs every input and output to have the same leading symbolic "
                f"dim (the batch); their leading dims are {leading}. Export with a named batch "
                "dim (dims={'x': ('batch', ...)}), or serve without batching"
            )
        if not (isinstance(max_batch_size, int) and max_batch_size >= 1):
            raise ValueError(f"max_batch_size must be an int >= 1, not {max_batch_size!r}")
    if not (isinstance(instances, int) and instances >= 1):
        raise ValueError(f"instances must be an int >= 1, not {instances!r}")
    parts = [
        f'name: "{name}"',
        'platform: "onnxruntime_onnx"',
        f"max_batch_size: {max_batch_size if batching else 0}",
        "input [",
        ",\n".join(_tensor_config(v, batching) for v in model.graph.input),
        "]",
        "output [",
        ",\n".join(_tensor_config(v, batching) for v in model.graph.output),
        "]",
        f"instance_group [ {{ kind: KIND_CPU, count: {instances} }} ]",
    ]
    if batching:
        parts.append("dynamic_batching { }")
    return "\n".join(parts) + "\n"


def export_model_repository(
    source,
    directory,
    name: str,
    *,
    version: int = 1,
    batching: bool = False,
    max_batch_size: int = 64,
    instances: int = 1,
    **export_options,
) -> Path:
    """Write `source` (a compiled function or an (inputs, outputs) pair, exported with
    `export_options` as by export_onnx; or an onnx.ModelProto or .onnx file) into a Triton
    model repository at `directory` as model `name`, version `version`; returns the model's
    directory (``<directory>/<name>``). An existing version is replaced, other versions are
    left as they are."""
    _check_name(name)
    if isinstance(version, bool) or not (isinstance(version, int) and version >= 1):
        raise ValueError(
            f"version must be an int >= 1 (Triton's version directories), not {version!r}"
        )
    root = Path(directory) / name
    target = root / str(version) / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written by export_onnx for a PyTensor source: tensors past 2 GB go beside it.
    model = _write_model(source, target, export_options)
    try:
        config = triton_config(
            model, name, batching=batching, max_batch_size=max_batch_size, instances=instances
        )
    except ValueError:
        for written in (target, target.with_name("model.onnx.data")):
            written.unlink(missing_ok=True)
        raise
    (root / "config.pbtxt").write_text(config)
    return root


def _write_model(source, target: Path, export_options) -> onnx.ModelProto:
    """`source` (PyTensor, or an ONNX model or file) written to `target`."""
    if isinstance(source, onnx.ModelProto | str | os.PathLike):
        if export_options:
            raise TypeError(
                f"export options {sorted(export_options)} need a PyTensor source, not a model"
            )
        model = as_model_proto(source)
        onnx.save_model(model, target)
        return model
    from pt_onnxscript.export import export_onnx

    return export_onnx(source, target, **export_options)


def export_mlserver_model(
    source,
    directory,
    name: str,
    *,
    max_batch_size: int = 0,
    max_batch_time: float = 0.0,
    threads: int | None = None,
    **export_options,
) -> Path:
    """Write `source` (as `export_model_repository` takes it) and its MLServer settings to
    ``<directory>/<name>``; returns that directory. `max_batch_size` > 0 lets MLServer join
    up to that many concurrent requests along their first dim, waiting at most
    `max_batch_time` seconds for them (every input and output must then have a leading
    batch dim); `threads` are ONNX Runtime's per session (None: its default pool)."""
    _check_name(name)
    if isinstance(max_batch_size, bool) or not (
        isinstance(max_batch_size, int) and max_batch_size >= 0
    ):
        raise ValueError(f"max_batch_size must be an int >= 0, not {max_batch_size!r}")
    root = Path(directory) / name
    root.mkdir(parents=True, exist_ok=True)
    _write_model(source, root / "model.onnx", export_options)
    settings = {
        "name": name,
        "implementation": "pt_onnxscript.mlserver_runtime.OnnxRuntimeModel",
        "parameters": {"uri": "./model.onnx", "extra": {"threads": threads}},
        "max_batch_size": max_batch_size,
        "max_batch_time": max_batch_time,
    }
    (root / "model-settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return root


def write_mlserver_settings(
    directory,
    *,
    host: str = "127.0.0.1",
    http_port: int = 8080,
    grpc_port: int = 8081,
    metrics_port: int = 8082,
) -> Path:
    """MLServer's ``settings.json`` in `directory`: where it listens (by default this machine
    only), its models loaded in the server's own process (``parallel_workers: 0``)."""
    settings = {
        "host": host,
        "http_port": http_port,
        "grpc_port": grpc_port,
        "metrics_port": metrics_port,
        "parallel_workers": 0,
    }
    path = Path(directory) / "settings.json"
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path
