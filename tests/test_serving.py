"""Serving on existing engines (pt_onnxscript.serving): Triton's model repository layout, its
config checked against Triton's ModelConfig schema (the fields written, with their numbers
and types from triton-inference-server/common's protobuf/model_config.proto)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnx
import pytensor
import pytensor.tensor as pt
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from pt_onnxscript import export_onnx, runtimes
from pt_onnxscript.serving import (
    export_mlserver_model,
    export_model_repository,
    write_mlserver_settings,
)

F = descriptor_pb2.FieldDescriptorProto


def _model_config_class():
    """Triton's ModelConfig, the part our config.pbtxt uses (model_config.proto)."""
    file = descriptor_pb2.FileDescriptorProto(name="triton_subset.proto", package="inference")
    dtype = file.enum_type.add(name="DataType")
    names = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16"]
    names += ["INT32", "INT64", "FP16", "FP32", "FP64", "STRING", "BF16"]
    for number, name in enumerate(names):
        dtype.value.add(name=f"TYPE_{name}", number=number)

    def message(name, fields):
        msg = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            msg.field.add(
                name=field_name, number=number, type=kind, label=label, type_name=type_name
            )
        return msg

    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message("ModelTensorReshape", [("shape", 1, F.TYPE_INT64, many, None)])
    tensor = [
        ("name", 1, F.TYPE_STRING, one, None),
        ("data_type", 2, F.TYPE_ENUM, one, ".inference.DataType"),
    ]
    message(
        "ModelInput",
        [
            *tensor,
            ("dims", 4, F.TYPE_INT64, many, None),
            ("reshape", 5, F.TYPE_MESSAGE, one, ".inference.ModelTensorReshape"),
        ],
    )
    message(
        "ModelOutput",
        [
            *tensor,
            ("dims", 3, F.TYPE_INT64, many, None),
            ("reshape", 5, F.TYPE_MESSAGE, one, ".inference.ModelTensorReshape"),
        ],
    )
    group = message(
        "ModelInstanceGroup",
        [
            ("count", 2, F.TYPE_INT32, one, None),
            ("kind", 4, F.TYPE_ENUM, one, ".inference.ModelInstanceGroup.Kind"),
        ],
    )
    kind = group.enum_type.add(name="Kind")
    for number, name in enumerate(["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"]):
        kind.value.add(name=name, number=number)
    message("ModelDynamicBatching", [])
    message(
        "ModelConfig",
        [
            ("name", 1, F.TYPE_STRING, one, None),
            ("platform", 2, F.TYPE_STRING, one, None),
            ("max_batch_size", 4, F.TYPE_INT32, one, None),
            ("input", 5, F.TYPE_MESSAGE, many, ".inference.ModelInput"),
            ("output", 6, F.TYPE_MESSAGE, many, ".inference.ModelOutput"),
            ("instance_group", 7, F.TYPE_MESSAGE, many, ".inference.ModelInstanceGroup"),
            ("dynamic_batching", 11, F.TYPE_MESSAGE, one, ".inference.ModelDynamicBatching"),
        ],
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("inference.ModelConfig"))


ModelConfig = _model_config_class()
DTYPE_NAMES = {
    v.number: v.name for v in ModelConfig.DESCRIPTOR.file.enum_types_by_name["DataType"].values
}


def parsed(path):
    return text_format.Parse(path.read_text(), ModelConfig())


def graph():
    x = pt.dmatrix("x")
    scale = pt.dscalar("scale")
    flags = pt.tensor("flags", dtype="bool", shape=(None,))
    return [x, scale, flags], [
        pt.exp(x).sum(axis=1) * scale,
        pt.switch(flags, 1, 2).astype("int64"),
    ]


def test_model_repository_layout_and_config(tmp_path):
    root = export_model_repository(graph(), tmp_path, "density")
    assert root == tmp_path / "density"
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "density",
        "density/1",
        "density/1/model.onnx",
        "density/config.pbtxt",
    ]
    config = parsed(root / "config.pbtxt")
    assert (config.name, config.platform, config.max_batch_size) == (
        "density",
        "onnxruntime_onnx",
        0,
    )
    inputs = [
        (
            t.name,
            ModelConfig.DESCRIPTOR.fields_by_name["input"]
            .message_type.fields_by_name["data_type"]
            .enum_type.values_by_number[t.data_type]
            .name,
            list(t.dims),
            list(t.reshape.shape),
            t.HasField("reshape"),
        )
        for t in config.input
    ]
    assert inputs == [
        ("x", "TYPE_FP64", [-1, -1], [], False),
        ("scale", "TYPE_FP64", [1], [], True),  # a 0-d input: one element, reshaped to 0-d
        ("flags", "TYPE_BOOL", [-1], [], False),
    ]
    assert [(t.name, DTYPE_NAMES[t.data_type], list(t.dims)) for t in config.output] == [
        ("output_0", "TYPE_FP64", [-1]),
        ("output_1", "TYPE_INT64", [-1]),
    ]
    assert [(g.kind, g.count) for g in config.instance_group] == [(2, 1)]  # KIND_CPU
    # The model in the repository is the one export_onnx writes, and runs.
    model = onnx.load(root / "1" / "model.onnx")
    assert model.graph.SerializeToString() == export_onnx(graph()).graph.SerializeToString()
    feeds = {"x": np.ones((2, 3)), "scale": np.array(2.0), "flags": np.array([True, False])}
    got = runtimes.run_onnxruntime(model, feeds)
    np.testing.assert_allclose(got["output_0"], 2 * 3 * np.e * np.ones(2), rtol=1e-15)


def test_batching_takes_the_leading_batch_dim(tmp_path):
    x = pt.dmatrix("x")
    fn_graph = ([x], [pt.log1p(x**2).sum(axis=1)])
    root = export_model_repository(
        fn_graph, tmp_path, "rows", batching=True, max_batch_size=32, dims={"x": ("batch", 4)}
    )
    config = parsed(root / "config.pbtxt")
    assert config.max_batch_size == 32 and config.HasField("dynamic_batching")
    assert [list(t.dims) for t in config.input] == [[4]]
    assert [list(t.dims) for t in config.output] == [[1]]  # 0-d per row
    assert [t.HasField("reshape") for t in config.output] == [True]


def test_bad_requests_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="same leading symbolic dim"):
        export_model_repository(graph(), tmp_path, "m", batching=True)
    assert not (tmp_path / "m" / "config.pbtxt").exists()
    assert not (tmp_path / "m" / "1" / "model.onnx").exists()
    with pytest.raises(ValueError, match="model name"):
        export_model_repository(graph(), tmp_path, "a/b")
    with pytest.raises(ValueError, match="version"):
        export_model_repository(graph(), tmp_path, "m", version=0)
    with pytest.raises(TypeError, match="need a PyTensor source"):
        export_model_repository(export_onnx(graph()), tmp_path, "m", opset=18)


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def mlserver(tmp_path_factory):
    """MLServer serving a batched log-density (points (K, 3) -> logp (K,), gradient (K, 3),
    float64) with adaptive batching, on 127.0.0.1; its V2 REST base URL and the model."""
    if shutil.which("mlserver") is None and not (Path(sys.executable).parent / "mlserver").exists():
        message = "the MLServer test needs mlserver (pip install pt_onnxscript[serving])"
        if os.environ.get("PT_ONNXSCRIPT_REQUIRE_SERVING"):
            pytest.fail(message)
        pytest.skip(message)
    directory = tmp_path_factory.mktemp("mlserver")
    points = pt.dmatrix("points")
    logp = -0.5 * (points**2).sum(axis=1) - pt.log1p(pt.exp(points)).sum(axis=1)
    source = ([points], [logp, pytensor.grad(logp.sum(), points)])
    model = export_onnx(source, dims={"points": ("batch", 3)}, output_names=["logp", "dlogp"])
    export_mlserver_model(model, directory, "density", max_batch_size=16, max_batch_time=0.05)
    http, grpc, metrics = _free_ports(3)
    write_mlserver_settings(directory, http_port=http, grpc_port=grpc, metrics_port=metrics)
    executable = shutil.which("mlserver") or str(Path(sys.executable).parent / "mlserver")
    server = subprocess.Popen(
        [executable, "start", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{http}/v2/models/density"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"MLServer did not start: {server.stdout.read()[-3000:]}")
            time.sleep(0.5)
        yield url, model
    finally:
        server.terminate()
        server.wait(timeout=30)


def _infer(url: str, points: np.ndarray) -> dict:
    body = {
        "inputs": [
            {
                "name": "points",
                "datatype": "FP64",
                "shape": list(points.shape),
                "data": points.reshape(-1).tolist(),
            }
        ]
    }
    request = urllib.request.Request(
        f"{url}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    return {
        out["name"]: np.array(out["data"], dtype=np.float64).reshape(out["shape"])
        for out in answer["outputs"]
        if out["datatype"] == "FP64"
    }


def test_mlserver_answers_v2_requests_exactly_as_onnxruntime(mlserver):
    """FP64 in and out: a request alone gets ONNX Runtime's results bit for bit; concurrent
    requests, which MLServer's adaptive batching may join into one call, each get their own
    rows, within an ulp or two (ONNX Runtime's vectorised Exp and Log round the elements of a
    block's tail differently, so a row's last bit can depend on its place in a batch)."""
    url, model = mlserver
    rng = np.random.default_rng(0)
    alone = rng.normal(size=(7, 3))
    answer, want = _infer(url, alone), runtimes.run_onnxruntime(model, {"points": alone})
    assert sorted(answer) == ["dlogp", "logp"]
    for name in ("logp", "dlogp"):
        assert answer[name].shape == want[name].shape
        np.testing.assert_array_equal(answer[name], want[name])
    requests = [rng.normal(size=(k, 3)) for k in (1, 2, 5, 3, 1, 4)]
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda p: _infer(url, p), requests))
    for points, answer in zip(requests, answers, strict=True):
        want = runtimes.run_onnxruntime(model, {"points": points})
        for name in ("logp", "dlogp"):
            assert answer[name].shape == want[name].shape
            np.testing.assert_allclose(answer[name], want[name], rtol=1e-15, atol=0)


def test_mlserver_names_a_wrong_input(mlserver):
    url, _ = mlserver
    body = {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 3], "data": [0, 0, 0]}]}
    request = urllib.request.Request(
        f"{url}/infer", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=30)
    assert raised.value.code == 400
    assert "no input 'x'" in raised.value.read().decode()


def test_predictive_batches_across_ray_workers():
    """Batches of parameter draws, each with its own random state, through an exported
    predictive model on two Ray workers of a local cluster: each batch's draws equal one
    ONNX Runtime session's on this process."""
    if os.environ.get("PT_ONNXSCRIPT_REQUIRE_SERVING"):
        import ray
    else:
        ray = pytest.importorskip("ray", reason="pip install pt_onnxscript[serving]")
    from pt_onnxscript.ray_workers import OnnxWorkers

    rng = pytensor.shared(np.random.default_rng(0), name="rng")
    mu = pt.dvector("mu")
    sigma = pt.dvector("sigma")
    draws = pt.random.normal(mu[:, None], sigma[:, None], size=(mu.shape[0], 5), rng=rng)
    fn = pytensor.function([mu, sigma], draws, updates={rng: draws.owner.outputs[0]})
    model = export_onnx(fn)
    posterior = np.random.default_rng(1)
    batches = [
        {
            "mu": posterior.normal(size=k),
            "sigma": posterior.uniform(0.5, 2, size=k),
            "rng": np.array([seed, 0], dtype=np.uint64),
        }
        for seed, k in enumerate((3, 4, 2, 5))
    ]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        workers = OnnxWorkers(model, workers=2)
        results = workers.map(batches)
        workers.close()
    finally:
        ray.shutdown()
    for feed, got in zip(batches, results, strict=True):
        want = runtimes.run_onnxruntime(model, feed)
        assert sorted(got) == sorted(want)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    assert results[0]["output_0"].shape == (3, 5)
