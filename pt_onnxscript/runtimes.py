"""Running an exported model in other ONNX runtimes than ONNX Runtime's CPU build, with the
same feeds and outputs (dicts of NumPy arrays by name):

- ``"onnxruntime"``: ONNX Runtime (one thread), what mode "ONNX" runs;
- ``"onnx.reference"``: ONNX's reference evaluator (``onnx.reference.ReferenceEvaluator``),
  the operators' definitions in NumPy: slow, but a second reading of the standard;
- ``"onnxruntime-web"``: onnxruntime-web's WebAssembly backend (what a browser tab runs),
  under Node, no browser needed: the demo's npm package (``npm ci`` in
  ``pt_onnxscript/demos/web``) and ``node`` on the PATH;
- ``"openvino"``: OpenVINO's CPU plugin (``pip install openvino``), asked for float32
  arithmetic (``INFERENCE_PRECISION_HINT=f32``: by default it may compute a float32 model
  in bfloat16 or float16 where the CPU has them, 4e-3 off on an MLP here); it has no
  float64;
- ``"tract"``: Sonos' tract (``pip install tract``), its ONNX front end and optimiser.

``run(runtime, model, feeds)`` runs one model; ``run_onnxruntime_web(jobs)`` runs many in one
Node process (each start costs ~1.5 s). A runtime that is not installed raises
`RuntimeUnavailable` naming what to install; a model the runtime refuses or fails to run
raises `RuntimeFailed` with the runtime's message. `tests/test_portability.py` runs the
matrix of exported models in each; `report` lists the runtimes a model is known to run in.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence

import numpy as np
import onnx

RUNTIMES = ("onnxruntime", "onnx.reference", "onnxruntime-web", "openvino", "tract")

WEB_DIR = os.path.join(os.path.dirname(__file__), "demos", "web")
NODE_RUNNER = os.path.join(WEB_DIR, "run-model.mjs")


class RuntimeUnavailable(RuntimeError):
    """The runtime is not installed here; the message says what to install."""


class RuntimeFailed(RuntimeError):
    """The runtime refused the model or failed to run it; the message is the runtime's."""


def as_model_proto(model) -> onnx.ModelProto:
    """`model`, an onnx.ModelProto or the path of a .onnx file, as a ModelProto."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, str | os.PathLike):
        return onnx.load(os.fspath(model))
    raise TypeError(
        f"model must be an onnx.ModelProto or the path of a .onnx file, not {type(model).__name__}"
    )


def run(runtime: str, model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of `model` (a ModelProto or a path) for `feeds` in `runtime` (RUNTIMES)."""
    if runtime == "onnxruntime":
        return run_onnxruntime(model, feeds)
    if runtime == "onnx.reference":
        return run_reference(model, feeds)
    if runtime == "onnxruntime-web":
        return run_onnxruntime_web([(model, feeds)])[0]
    if runtime == "openvino":
        return run_openvino(model, feeds)
    if runtime == "tract":
        return run_tract(model, feeds)
    raise ValueError(f"Unknown runtime {runtime!r}: one of {', '.join(RUNTIMES)}")


def run_onnxruntime(model, feeds) -> dict[str, np.ndarray]:
    """`model` run by ONNX Runtime's CPU build on one thread."""
    import onnxruntime as ort

    from pt_onnxscript.linker import session_options

    proto = as_model_proto(model)
    options = session_options(1)
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(proto.SerializeToString(), sess_options=options)
        results = session.run(None, dict(feeds))
    except Exception as err:  # onnxruntime's errors share no base class
        raise RuntimeFailed(f"onnxruntime: {err}") from err
    return dict(zip([o.name for o in session.get_outputs()], results, strict=True))


def run_reference(model, feeds) -> dict[str, np.ndarray]:
    """`model` run by ONNX's reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    proto = as_model_proto(model)
    try:
        results = ReferenceEvaluator(proto).run(None, dict(feeds))
    except Exception as err:  # the evaluator raises whatever its NumPy code raises
        raise RuntimeFailed(f"onnx.reference: {type(err).__name__}: {err}") from err
    names = [o.name for o in proto.graph.output]
    return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}


def run_openvino(model, feeds) -> dict[str, np.ndarray]:
    """`model` run by OpenVINO's CPU plugin in float32 arithmetic."""
    try:
        import openvino
    except ImportError as err:
        raise RuntimeUnavailable("openvino is not installed: pip install openvino") from err
    proto = as_model_proto(model)
    try:
        core = openvino.Core()
        compiled = core.compile_model(
            core.read_model(proto.SerializeToString(), b""),
            "CPU",
            {"INFERENCE_PRECISION_HINT": "f32"},
        )
        results = compiled(dict(feeds))
    except Exception as err:  # OpenVINO raises RuntimeError and its own types
        raise RuntimeFailed(f"openvino: {err}") from err
    outputs = {output.get_any_name(): np.asarray(results[output]) for output in compiled.outputs}
    return {value.name: outputs[value.name] for value in proto.graph.output}


def run_tract(model, feeds) -> dict[str, np.ndarray]:
    """`model` run by tract (its ONNX front end, typed and decluttered by `into_model`)."""
    try:
        import tract
    except ImportError as err:
        raise RuntimeUnavailable("tract is not installed: pip install tract") from err
    proto = as_model_proto(model)
    names = [value.name for value in proto.graph.input]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        onnx.save_model(proto, path)
        try:
            runnable = tract.onnx().load(path).into_model().into_runnable()
            results = runnable.run([np.asarray(feeds[name]) for name in names])
        except Exception as err:  # tract raises its own errors
            message = str(err).split("\nStack backtrace:", 1)[0]
            raise RuntimeFailed(f"tract: {message}") from err
    return {
        value.name: result.to_numpy()
        for value, result in zip(proto.graph.output, results, strict=True)
    }


def _web_missing() -> str | None:
    """Why onnxruntime-web cannot run under Node here, or None."""
    if shutil.which("node") is None:
        return "node is not on the PATH (install Node.js 18 or newer)"
    if not os.path.isdir(os.path.join(WEB_DIR, "node_modules", "onnxruntime-web")):
        return f"onnxruntime-web is not installed: run `npm ci` in {WEB_DIR}"
    return None


def web_available() -> bool:
    return _web_missing() is None


def _encoded(array: np.ndarray) -> dict:
    """`array` for run-model.mjs: its dtype, dims (a 0-d array's none: np.ascontiguousarray
    would make it 1-d) and little-endian bytes in C order."""
    array = np.asarray(array)
    dtype = "bool" if array.dtype == bool else array.dtype.name
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    return {
        "dtype": dtype,
        "dims": list(array.shape),
        "data": base64.b64encode(little.tobytes(order="C")).decode(),
    }


def _decoded(entry: dict) -> np.ndarray:
    dtype = np.dtype(entry["dtype"]).newbyteorder("<")
    raw = base64.b64decode(entry["data"])
    return np.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("=")).reshape(entry["dims"])


def run_onnxruntime_web(
    jobs: Sequence[tuple[object, Mapping[str, np.ndarray]]], timeout: float = 300
) -> list[dict[str, np.ndarray]]:
    """Each (model, feeds) of `jobs` run by onnxruntime-web's WebAssembly backend (one
    thread) in one Node process; their outputs in order. A model onnxruntime-web refuses or
    fails raises RuntimeFailed (the first such, with its message)."""
    missing = _web_missing()
    if missing:
        raise RuntimeUnavailable(f"onnxruntime-web under Node: {missing}")
    with tempfile.TemporaryDirectory() as tmp:
        args = []
        for i, (model, feeds) in enumerate(jobs):
            model_path, feeds_path = (os.path.join(tmp, f"{i}.{ext}") for ext in ("onnx", "json"))
            onnx.save_model(as_model_proto(model), model_path)
            with open(feeds_path, "w") as f:
                json.dump({name: _encoded(np.asarray(v)) for name, v in feeds.items()}, f)
            args += [model_path, feeds_path]
        done = subprocess.run(
            ["node", NODE_RUNNER, *args],
            cwd=WEB_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeFailed(f"onnxruntime-web: node exited with {done.returncode}: {done.stderr}")
    answers = json.loads(done.stdout)
    results = []
    for answer in answers:
        if "error" in answer:
            raise RuntimeFailed(f"onnxruntime-web: {answer['error']}")
        results.append({name: _decoded(entry) for name, entry in answer.items()})
    return results
