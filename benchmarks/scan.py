"""Scan recursions, side by side in one run: the exported model in ONNX Runtime, PyTensor's
Numba mode, and, as ONNX Runtime's own floor, a hand-written ONNX Loop carrying one value per
step. Then the exported models' nodes.

Problems: `y[t] = 0.9 y[t-1] + x[t]` over 20,000 scalars, and the same over 1,000 steps of
100-vectors.

One core, one thread, rounds interleaved, medians (benchmarks/timing.py).

Run: python benchmarks/scan.py
"""

import argparse

from timing import ROUNDS, interleaved, session  # first: one core, one thread, before BLAS loads

# isort: split
import collections

import numpy as np
import pytensor
import pytensor.tensor as pt
from onnx import TensorProto, helper

from pt_onnxscript import export_onnx


def recursion(x):
    return pytensor.scan(
        lambda v, prev: 0.9 * prev + v,
        sequences=[x],
        outputs_info=[pt.zeros(x.shape[1:], dtype=x.dtype)],
        return_updates=False,
    )


def hand_written_loop(width):
    """y = 0.9 y + x[t] per step, y stacked by the Loop: one Gather, Mul, Add, Identity."""
    shape = [] if width is None else [width]
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["x", "t"], ["row"], axis=0),
            helper.make_node("Mul", ["prev", "rate"], ["decayed"]),
            helper.make_node("Add", ["decayed", "row"], ["next"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Identity", ["next"], ["stacked"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("prev", TensorProto.DOUBLE, shape),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("next", TensorProto.DOUBLE, shape),
            helper.make_tensor_value_info("stacked", TensorProto.DOUBLE, shape),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["shape"], start=0, end=1),
            helper.make_node("Squeeze", ["shape"], ["n"]),
            helper.make_node("Shape", ["x"], ["row_shape"], start=1),
            helper.make_node(
                "ConstantOfShape",
                ["row_shape"],
                ["zero"],
                value=helper.make_tensor("", TensorProto.DOUBLE, [1], [0.0]),
            ),
            helper.make_node("Loop", ["n", "true", "zero"], ["last", "out"], body=body),
        ],
        "loop",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["n", *shape])],
        [helper.make_tensor_value_info("out", TensorProto.DOUBLE, ["n", *shape])],
        initializer=[
            helper.make_tensor("true", TensorProto.BOOL, [], [True]),
            helper.make_tensor("rate", TensorProto.DOUBLE, [], [0.9]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def main():
    rng = np.random.default_rng(0)
    problems = {
        "20,000 scalars": (pt.vector("x"), rng.normal(size=20_000), None),
        "1,000 x 100-vectors": (pt.matrix("x"), rng.normal(size=(1_000, 100)), 100),
    }
    rows, nodes = [], collections.defaultdict(dict)
    for name, (x, value, width) in problems.items():
        y = recursion(x)
        numba = pytensor.function([x], y, mode="NUMBA")
        model = export_onnx(([x], [y]))
        ours, floor = session(model), session(hand_written_loop(width))
        expected = numba(value)
        np.testing.assert_allclose(
            ours.run(None, {"x": value})[0], expected, rtol=1e-12, atol=1e-14
        )
        np.testing.assert_allclose(
            floor.run(None, {"x": value})[0], expected, rtol=1e-12, atol=1e-14
        )
        times = interleaved(
            {
                "PyTensor Numba": numba,
                "exported, ONNX Runtime": lambda v, s=ours: s.run(None, {"x": v}),
                "hand-written Loop": lambda v, s=floor: s.run(None, {"x": v}),
            },
            value,
        )
        rows.append((name, times))
        nodes[name] = {
            "exported": len(model.graph.node),
            "exported, in subgraphs": sum(
                len(a.g.node) for n in model.graph.node for a in n.attribute if a.g.node
            ),
        }
    print(f"median of {ROUNDS} interleaved rounds, one thread; wall ms (CPU ms)")
    for name, times in rows:
        numba_wall = times["PyTensor Numba"][0]
        floor_wall = times["hand-written Loop"][0]
        print(f"\n{name}")
        for runner, (wall, cpu) in times.items():
            print(
                f"  {runner:<24} {wall * 1e3:9.3f} ({cpu * 1e3:9.3f})"
                f"  {wall / numba_wall:7.1f}x Numba  {wall / floor_wall:5.2f}x hand-written Loop"
            )
    print("\nnodes (top level / inside Loop bodies):")
    for name, counts in nodes.items():
        print(f"  {name:<24} {counts['exported']} / {counts['exported, in subgraphs']}")


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
