"""Our exports against torch.onnx's exports of the same networks, side by side in one run:
an MLP and the digits CNN (PyTensor's `convolve2d` formulation; PyTorch's Conv2d with the
flipped kernel), at batch 1 and 64, in ONNX Runtime, beside mode "ONNX" and PyTensor's default
and Numba modes; then each exported model's node count.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/compare.py   (needs the `bench` extra, PyTorch's CPU build:
pip install -e ".[test,bench]" --extra-index-url https://download.pytorch.org/whl/cpu)
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import collections
import itertools
import warnings

import numpy as np
import pytensor
import pytensor.tensor as pt
import torch

from pt_onnxscript import export_onnx, onnx_mode
from pt_onnxscript.demos import digits

torch.set_num_threads(1)


def mlp(seed=0):
    """64 -> 128 -> 128 -> 10, ReLU, softmax: PyTensor and PyTorch with the same weights."""
    rng = np.random.default_rng(seed)
    sizes = [64, 128, 128, 10]
    weights = [
        (
            rng.normal(0, np.sqrt(2 / m), (m, n)).astype("float32"),
            rng.normal(0, 0.1, n).astype("float32"),
        )
        for m, n in itertools.pairwise(sizes)
    ]
    x = pt.matrix("x", dtype="float32", shape=(None, 64))
    h = x
    for i, (w, b) in enumerate(weights):
        h = h @ pytensor.shared(w, name=f"w{i}") + pytensor.shared(b, name=f"b{i}")
        h = pt.maximum(h, 0) if i < len(weights) - 1 else pt.special.softmax(h, axis=-1)

    layers = []
    for i, (w, b) in enumerate(weights):
        linear = torch.nn.Linear(*w.shape)
        linear.weight.data, linear.bias.data = torch.from_numpy(w.T.copy()), torch.from_numpy(b)
        layers += [linear, torch.nn.ReLU() if i < len(weights) - 1 else torch.nn.Softmax(dim=-1)]
    return x, h, torch.nn.Sequential(*layers), np.random.default_rng(1).random((64, 64), "float32")


def cnn():
    """The digits demo's CNN, trained for a few epochs."""
    split = digits.load_digits()
    params = digits.init_params()
    digits.train(split, params, epochs=3)
    x = pt.tensor4("x", dtype="float32", shape=(None, 1, 8, 8))
    w1, b1, w2, b2 = (params[k].get_value() for k in ("w1", "b1", "w2", "b2"))
    conv = torch.nn.Conv2d(1, digits.CHANNELS, digits.KERNEL)
    conv.weight.data = torch.from_numpy(w1[:, :, ::-1, ::-1].copy())  # convolution, not correlation
    conv.bias.data = torch.from_numpy(b1)
    dense = torch.nn.Linear(*w2.shape)
    dense.weight.data, dense.bias.data = torch.from_numpy(w2.T.copy()), torch.from_numpy(b2)
    model = torch.nn.Sequential(
        conv,
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(digits.POOL),
        torch.nn.Flatten(),
        dense,
        torch.nn.Softmax(dim=-1),
    )
    return x, digits.forward(x, params), model, split.x_test[:64]


def torch_export(model, example):
    program = torch.onnx.export(
        model.eval(),
        (torch.from_numpy(example),),
        dynamo=True,
        dynamic_shapes=({0: "batch"},),
        verbose=False,
    )
    return program.model_proto


def main():
    warnings.simplefilter("ignore")
    rows = []
    for label, (x, y, model, data) in (("MLP 64-128-128-10", mlp()), ("digits CNN", cnn())):
        ours = export_onnx(([x], [y]))
        theirs = torch_export(model, data)
        our_session, their_session = session(ours), session(theirs)
        their_input = theirs.graph.input[0].name
        runners = {
            "exported, ORT": lambda v, s=our_session: s.run(None, {"x": v})[0],
            "torch.onnx, ORT": lambda v, s=their_session, n=their_input: s.run(None, {n: v})[0],
            'mode "ONNX"': pytensor.function([x], y, mode=onnx_mode(threads=1)),
            "PyTensor default": pytensor.function([x], y),
            "PyTensor NUMBA": pytensor.function([x], y, mode="NUMBA"),
        }
        for batch in (1, 64):
            v = data[:batch]
            reference = runners["PyTensor default"](v)
            for run in runners.values():
                np.testing.assert_allclose(run(v), reference, rtol=1e-4, atol=1e-6)
            rows.append((f"{label}, batch {batch}", interleaved(runners, v)))
        for name, proto in (("ours", ours), ("torch.onnx", theirs)):
            counts = collections.Counter(node.op_type for node in proto.graph.node)
            print(f"{label}, {name}: {sum(counts.values())} nodes {dict(sorted(counts.items()))}")
    print(
        f"\nmedian of {ROUNDS} interleaved rounds, one thread; wall us (CPU us), ratio to torch.onnx"
    )
    names = list(rows[0][1])
    print(f"{'':26}" + "".join(f"{name:>26}" for name in names))
    for label, times in rows:
        base = times["torch.onnx, ORT"][0]
        cells = [f"{w * 1e6:7.1f} ({c * 1e6:6.1f}) {w / base:4.1f}x" for w, c in times.values()]
        print(f"{label:26}" + "".join(f"{cell:>26}" for cell in cells))


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
