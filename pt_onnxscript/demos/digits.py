"""The digits demo: train a small CNN written in PyTensor (run by ONNX Runtime through mode
"ONNX"), export it, check ONNX Runtime agrees with PyTensor's own evaluation, and serve a
page that classifies digits in the browser with onnxruntime-web.

    python -m pt_onnxscript.demos.digits            # train, export, verify, serve on 127.0.0.1
    python -m pt_onnxscript.demos.digits --no-serve # stop after the verification

Needs scikit-learn for the dataset (the `test` extra) and, for the page, `npm ci
--ignore-scripts` in pt_onnxscript/demos/web (onnxruntime-web, served from this machine: no
CDN).
"""

import argparse
import collections
import json
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytensor
import pytensor.tensor as pt
from pytensor.tensor.signal import convolve2d

from pt_onnxscript.export import export_onnx

CHANNELS = 8
KERNEL = 3
POOL = 2


@dataclass
class Split:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits(seed: int = 0) -> Split:
    """scikit-learn's 8x8 digits as (N, 1, 8, 8) float32 in [0, 1], a quarter held out."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import train_test_split

    data = sklearn_digits()
    x = (data.images / 16.0).astype("float32")[:, None]
    parts = train_test_split(
        x, data.target, test_size=0.25, random_state=seed, stratify=data.target
    )
    return Split(parts[0], parts[2].astype("int64"), parts[1], parts[3].astype("int64"))


def init_params(seed: int = 0) -> dict[str, pytensor.compile.SharedVariable]:
    rng = np.random.default_rng(seed)
    hidden = CHANNELS * ((8 - KERNEL + 1) // POOL) ** 2
    values = {
        "w1": rng.normal(0, np.sqrt(2 / KERNEL**2), (CHANNELS, 1, KERNEL, KERNEL)),
        "b1": np.zeros(CHANNELS),
        "w2": rng.normal(0, np.sqrt(1 / hidden), (hidden, 10)),
        "b2": np.zeros(10),
    }
    return {
        k: pytensor.shared(v.astype("float32"), name=k, shape=v.shape) for k, v in values.items()
    }


def forward(x, params):
    """Probabilities of the ten classes for images x (N, 1, 8, 8)."""
    w1, b1, w2, b2 = (params[k] for k in ("w1", "b1", "w2", "b2"))
    conv = (
        convolve2d(x[:, None], w1[None], mode="valid", method="direct").sum(axis=2)
        + b1[None, :, None, None]
    )
    hidden = pt.maximum(conv, 0)
    side = (8 - KERNEL + 1) // POOL
    pooled = hidden.reshape((x.shape[0], CHANNELS, side, POOL, side, POOL)).max(axis=(3, 5))
    return pt.special.softmax(pooled.reshape((x.shape[0], -1)) @ w2 + b2, axis=-1)


def training_step(params, lr: float = 0.01, mode="ONNX"):
    """The compiled Adam step on the cross-entropy of a batch, ``step(x, y) -> loss``, which
    updates `params` (and Adam's moments) in place; compiled in `mode` (by default "ONNX":
    PyTensor's graph run by ONNX Runtime, about 19x faster here than PyTensor's default
    mode, benchmarks/cnn.py)."""
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    y = pt.lvector("y")
    probs = forward(x, params)
    loss = -pt.log(probs[pt.arange(y.shape[0]), y] + 1e-7).mean()
    shared = list(params.values())
    grads = pytensor.grad(loss, shared)
    updates, t = [], pytensor.shared(np.float32(0), name="t")
    updates.append((t, t + 1))
    for p, g in zip(shared, grads, strict=True):
        m = pytensor.shared(np.zeros_like(p.get_value()), shape=p.type.shape)
        v = pytensor.shared(np.zeros_like(p.get_value()), shape=p.type.shape)
        m_new = (0.9 * m + 0.1 * g).astype("float32")
        v_new = (0.999 * v + 0.001 * g**2).astype("float32")
        step = (
            lr * (m_new / (1 - 0.9 ** (t + 1))) / (pt.sqrt(v_new / (1 - 0.999 ** (t + 1))) + 1e-8)
        )
        updates += [(m, m_new), (v, v_new), (p, (p - step).astype("float32"))]
    return pytensor.function([x, y], loss, updates=updates, mode=mode)


def predictor(params, mode=None):
    """The compiled ``predict(x) -> probabilities`` (PyTensor's default mode by default)."""
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    return pytensor.function([x], forward(x, params), mode=mode)


def reference_predictor(params):
    """``predict(x) -> probabilities`` in PyTensor's Python implementations (mode
    FAST_COMPILE, the inner graph of PyTensor 3's Softmax included): the export's reference,
    with nothing to compile, where PyTensor 3's default mode spends ~15 s in Numba on a
    machine that has not compiled the CNN before."""
    predict = predictor(params, "FAST_COMPILE")

    def run(x: np.ndarray) -> np.ndarray:
        with pytensor.config.change_flags(mode="FAST_COMPILE"):
            return predict(x)

    return run


def train(
    split: Split,
    params,
    epochs: int = 30,
    batch: int = 64,
    lr: float = 0.01,
    seed: int = 0,
    progress=None,
    mode="ONNX",
):
    """Adam on the cross-entropy, each step compiled in `mode` (training_step); returns the
    held-out accuracy and PyTensor's own predict function (`reference_predictor`, what the
    export is checked against). `progress(epoch, epochs, mean loss, held-out accuracy)` is
    called after each epoch."""
    with warnings.catch_warnings():
        # PyTensor 3's default (Numba) mode runs convolve2d through Python and says so once
        # per op, in red: nothing a reader of the demo can act on.
        warnings.filterwarnings("ignore", message="Numba will use object mode")
        step_fn = training_step(params, lr, mode)
        predict_in_mode = predictor(params, mode)
    predict = reference_predictor(params)
    rng = np.random.default_rng(seed)
    for epoch in range(epochs):
        order = rng.permutation(len(split.y_train))
        losses = []
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            losses.append(step_fn(split.x_train[idx], split.y_train[idx]))
        if progress is not None:
            accuracy = (predict_in_mode(split.x_test).argmax(1) == split.y_test).mean()
            progress(epoch + 1, epochs, float(np.mean(losses)), float(accuracy))
    return float((predict(split.x_test).argmax(1) == split.y_test).mean()), predict


def export_classifier(params, path) -> None:
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    export_onnx(
        ([x], [forward(x, params)]),
        path,
        dims={"x": ("batch", 1, 8, 8)},
        output_names=["probabilities"],
    )


def onnx_probabilities(path, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def describe(path: Path) -> str:
    """The model file's size and operators, as the demo prints them."""
    ops = collections.Counter(node.op_type for node in onnx.load(str(path)).graph.node)
    listed = ", ".join(f"{op} {n}" if n > 1 else op for op, n in sorted(ops.items()))
    return f"{path.stat().st_size / 1000:.1f} kB, {sum(ops.values())} nodes ({listed})"


def build_site(params, split: Split, directory: Path) -> Path:
    """The page's data: the model and the held-out samples (model/digits.onnx, samples.json)."""
    (directory / "model").mkdir(parents=True, exist_ok=True)
    export_classifier(params, directory / "model" / "digits.onnx")
    samples = {"images": split.x_test[:, 0].round(4).tolist(), "labels": split.y_test.tolist()}
    (directory / "samples.json").write_text(json.dumps(samples))
    return directory


def _report(epoch: int, epochs: int, loss: float, accuracy: float) -> None:
    print(
        f"epoch {epoch:2d}/{epochs}: loss {loss:.4f}, held-out accuracy {accuracy:.4f}", flush=True
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Train a small CNN on scikit-learn's 8x8 digits in PyTensor, export it to "
        "ONNX, check that ONNX Runtime agrees, and serve a page (127.0.0.1 only) that "
        "classifies digits drawn in the browser with onnxruntime-web."
    )
    parser.add_argument("--no-serve", action="store_true", help="stop after training and checking")
    parser.add_argument("--port", type=int, default=8000, help="the page's port (default 8000)")
    parser.add_argument(
        "--site", type=Path, default=None, help="where to write the model and samples"
    )
    args = parser.parse_args(argv)
    if not args.no_serve:  # what serving needs, before a minute of training
        from pt_onnxscript.demos.web.server import check_can_serve

        check_can_serve(args.port)

    split = load_digits()
    params = init_params()
    start = time.perf_counter()
    accuracy, predict = train(split, params, progress=_report)
    print(
        f'trained in {time.perf_counter() - start:.1f} s (mode "ONNX"): '
        f"held-out accuracy {accuracy:.4f}"
    )
    site = build_site(params, split, args.site or Path(tempfile.mkdtemp(prefix="digits-")))
    model = site / "model" / "digits.onnx"
    expected = predict(split.x_test)
    got = onnx_probabilities(model, split.x_test)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert (got.argmax(1) == expected.argmax(1)).all()
    print(f"ONNX Runtime agrees with PyTensor on all {len(got)} held-out digits ({model})")
    print(f"the page's model: {describe(model)}")
    if args.no_serve:
        return
    from pt_onnxscript.demos.web.server import serve_until_interrupted

    def loaded(size: int, milliseconds: float) -> None:
        print(
            f"a page loaded the model ({size / 1000:.1f} kB) in {milliseconds:.0f} ms", flush=True
        )

    serve_until_interrupted(site, args.port, "", "draw digits", on_loaded=loaded)


if __name__ == "__main__":
    main()
