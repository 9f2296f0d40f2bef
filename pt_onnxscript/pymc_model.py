"""A PyMC model's log-density and its gradient as one ONNX model (needs the `pymc` extra).

The model takes the point as PyMC's samplers see it: one vector of the value variables in
unconstrained space, raveled and concatenated in `model.value_vars` order. Its layout is
stored in the model's metadata (key "pt_onnxscript.layout") so the vector can be built and
read back without PyMC.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx


@dataclass(frozen=True)
class Slot:
    """Where one value variable sits in the point vector."""

    name: str
    shape: tuple[int, ...]
    start: int
    stop: int


def layout(model) -> list[Slot]:
    """The slot of each value variable of `model` in the point vector."""
    point = model.initial_point()
    slots, start = [], 0
    for var in model.value_vars:
        shape = tuple(int(d) for d in np.shape(point[var.name]))
        stop = start + int(np.prod(shape, dtype=int))
        slots.append(Slot(var.name, shape, start, stop))
        start = stop
    return slots


def ravel_point(point: dict, slots: list[Slot]) -> np.ndarray:
    """The point vector of a {value variable name: value} dict."""
    missing = [s.name for s in slots if s.name not in point]
    if missing:
        raise KeyError(f"the point has no value for {missing}; it needs {[s.name for s in slots]}")
    return np.concatenate([np.ravel(point[s.name]) for s in slots]) if slots else np.zeros(0)


def export_logp(model, path=None, *, jacobian: bool = True, opset: int | None = None):
    """Export `model`'s log-density and its gradient, point vector in, ("logp", "dlogp") out.

    `jacobian` includes the log-Jacobian of the transforms, as PyMC's samplers do. Returns
    the onnx.ModelProto (also written to `path` if given).
    """
    from pymc.pytensorf import join_nonshared_inputs

    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.translate import DEFAULT_OPSET

    slots = layout(model)
    logp = model.logp(jacobian=jacobian)
    dlogp = model.dlogp(jacobian=jacobian)
    [logp, dlogp], point = join_nonshared_inputs(
        model.initial_point(), [logp, dlogp], model.value_vars
    )
    point.name = "point"
    proto = export_onnx(
        ([point], [logp, dlogp]),
        opset=DEFAULT_OPSET if opset is None else opset,
        output_names=["logp", "dlogp"],
    )
    entry = proto.metadata_props.add()
    entry.key = "pt_onnxscript.layout"
    entry.value = json.dumps([s.__dict__ | {"shape": list(s.shape)} for s in slots])
    if path is not None:
        onnx.save(proto, str(Path(path)))
    return proto


def read_layout(model: onnx.ModelProto) -> list[Slot]:
    """The point layout stored in a model written by `export_logp`."""
    for entry in model.metadata_props:
        if entry.key == "pt_onnxscript.layout":
            return [
                Slot(d["name"], tuple(d["shape"]), d["start"], d["stop"])
                for d in json.loads(entry.value)
            ]
    raise ValueError("the model has no point layout: it was not written by export_logp")
