"""A PyMC model's log-density and gradient, and its prior predictive sampler, as ONNX models
(needs the `pymc` extra).

The log-density model takes the point as PyMC's samplers see it: one vector of the value
variables in unconstrained space, raveled and concatenated in `model.value_vars` order. Its
layout is stored in the model's metadata (key "pt_onnxscript.layout") so the vector can be
built and read back without PyMC. Its log-density is -inf where a parameter check fails,
as in the functions PyMC compiles. With `batch`, it takes many points per call, a (K, n)
matrix of point vectors (ONNX Runtime's cost is per node, not per element, so K points cost
little more than one), and gives each row's log-density and gradient.

The prior predictive model takes one random state per random variable (``<name>_rng``,
uint64[2], see pt_onnxscript.rng) and returns one draw of each variable and the advanced
states (``<name>_rng_updated``): feed those back for the next draw. Its metadata (key
"pt_onnxscript.prior") lists the draws and the states; `initial_states` seeds them.
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


def logp_and_gradient(model, *, jacobian: bool = True, batch: bool | int = False):
    """`model`'s log-density and its gradient as one compiled function, rewritten for export:
    the Function export_logp writes (point vector in, logp and dlogp out; with `batch`, a
    (K, n) matrix of points in, K log-densities and a (K, n) gradient out: see export_logp).

    As PyMC's samplers compile them (ValueGradFunction): the log-density as rewritten before
    differentiation and its gradient with respect to all value variables in one pass (as
    model.logp() and model.dlogp(), one pass per variable, a GP's two ran 1,417 nodes,
    PyMC's function 1,095); and, as pymc.compile does, a parameter check that fails makes
    the log-density -inf (nothing checked if the model's check_bounds is off), not an error.
    Many points are PyTensor's own vectorisation of that graph (vectorize_graph).
    """
    import pytensor
    import pytensor.tensor as pt
    from pymc.pytensorf import join_nonshared_inputs, rewrite_pregrad
    from pytensor.graph.replace import vectorize_graph

    from pt_onnxscript.errors import UnsupportedOpError
    from pt_onnxscript.export import compile_for_export

    size = _batch_size(batch)
    if not model.value_vars:
        raise ValueError(
            "export_logp: the model has no free random variables, so its log-density is a "
            "constant and there is no point to take; add a free variable, or evaluate "
            "model.compile_logp()({}) once"
        )
    logp = rewrite_pregrad(model.logp(jacobian=jacobian))
    grads = pytensor.grad(logp, model.value_vars, disconnected_inputs="ignore")
    dlogp = pt.join(0, *[pt.as_tensor(g).ravel() for g in grads])
    [logp, dlogp], point = join_nonshared_inputs(
        model.initial_point(), [logp, dlogp], model.value_vars
    )
    point.name = "point"
    if size is not False:
        points = pt.tensor("points", dtype=point.type.dtype, shape=(size, *point.type.shape))
        try:
            logp, dlogp = vectorize_graph([logp, dlogp], replace={point: points})
        except (NotImplementedError, TypeError) as err:
            raise UnsupportedOpError(
                "export_logp(batch=...): PyTensor cannot vectorize this model's log-density "
                f"over many points ({type(err).__name__}: {err}). Export it one point per "
                "call (batch=False) and call it once per point."
            ) from err
        point = points
    checks = (
        "local_check_parameter_to_ninf_switch"
        if model.check_bounds
        else "local_remove_check_parameter"
    )
    return compile_for_export([point], [logp, dlogp], including=[checks])


def _batch_size(batch) -> bool | int | None:
    """`batch` checked: False (one point), None (any number of points: True) or a number
    of points fixed at export."""
    if batch is False:
        return False
    if batch is True:
        return None
    if isinstance(batch, int | np.integer) and not isinstance(batch, bool) and batch >= 1:
        return int(batch)
    raise ValueError(
        f"batch must be False (one point per call), True (any number of points per call) "
        f"or a number of points >= 1 fixed at export, not {batch!r}"
    )


BATCH_KEY = "pt_onnxscript.batch"


def export_logp(
    model,
    path=None,
    *,
    jacobian: bool = True,
    batch: bool | int = False,
    opset: int | None = None,
):
    """Export `model`'s log-density and its gradient, point vector in, ("logp", "dlogp") out.

    `jacobian` includes the log-Jacobian of the transforms, as PyMC's samplers do. With
    `batch`, the model takes many points per call: ``points``, a (K, n) matrix of point
    vectors in, ``logp`` (K,) and ``dlogp`` (K, n) out, each row the one-point model's result
    for that row; K is any number (``batch=True``, the dim named "points") or fixed
    (``batch=K``). Returns the onnx.ModelProto (also written to `path` if given).
    """
    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.translate import DEFAULT_OPSET

    size = _batch_size(batch)
    function = logp_and_gradient(model, jacobian=jacobian, batch=batch)
    proto = export_onnx(
        function,
        opset=DEFAULT_OPSET if opset is None else opset,
        output_names=["logp", "dlogp"],
        dims={"points": ("points", None)} if size is None else None,
    )
    slots = layout(model)
    entry = proto.metadata_props.add()
    entry.key = "pt_onnxscript.layout"
    entry.value = json.dumps([s.__dict__ | {"shape": list(s.shape)} for s in slots])
    if size is not False:
        entry = proto.metadata_props.add()
        entry.key = BATCH_KEY
        entry.value = json.dumps({"input": "points", "size": size})
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


PRIOR_KEY = "pt_onnxscript.prior"


def export_prior_predictive(model, path=None, *, var_names=None, opset: int | None = None):
    """Export one draw of `model`'s prior predictive (its random variables and deterministics,
    or `var_names`), random states in and out, as ``pm.sample_prior_predictive`` draws it.
    Returns the onnx.ModelProto (also written to `path` if given)."""
    from pymc.sampling.forward import compile_forward_sampling_function
    from pymc.util import get_default_varnames
    from pytensor.compile.mode import Mode
    from pytensor.graph.traversal import ancestors

    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.linker import onnx_rewrites
    from pt_onnxscript.rng import is_random_state
    from pt_onnxscript.translate import DEFAULT_OPSET

    wanted = (
        {var.name for var in model.basic_RVs + model.deterministics}
        if var_names is None
        else set(var_names)
    )
    names = sorted(get_default_varnames(wanted, include_transformed=False))
    unknown = wanted.difference(names)
    if unknown:
        raise ValueError(f"Unrecognized var_names: {sorted(unknown)}")
    sampler, _ = compile_forward_sampling_function(
        [model[name] for name in names],
        vars_in_trace=[],
        basic_rvs=model.basic_RVs,
        givens_dict=None,
        mode=Mode(linker="py", optimizer=onnx_rewrites()),
    )
    # Name each generator after the variable it draws (PyMC's are unnamed) for the export:
    # the variable a draw of it gives, else the first variable whose graph reads it (a Scan
    # that draws, a distribution built of several draws).
    fgraph = sampler.maker.fgraph
    readers: dict = {}
    for name, out in zip(names, fgraph.outputs, strict=False):  # then the updated states
        for var in ancestors([out]):
            readers.setdefault(var, name)
    states = []
    for spec, var in zip(sampler.maker.inputs, fgraph.inputs, strict=True):
        if spec.shared and is_random_state(var):
            drawn = [
                out.name
                for client, _ in fgraph.clients[var]
                for out in client.outputs[1:]
                if out.name
            ]
            states.append(
                (spec.variable, f"{drawn[0] if drawn else readers.get(var, 'random')}_rng")
            )
    old_names = [variable.name for variable, _ in states]
    try:
        for variable, name in states:
            variable.name = name
        proto = export_onnx(
            sampler, opset=DEFAULT_OPSET if opset is None else opset, output_names=names
        )
    finally:
        for (variable, _), name in zip(states, old_names, strict=True):
            variable.name = name
    draws = [
        {"name": out.name, "dtype": model[out.name].dtype}
        for out in proto.graph.output[: len(names)]
    ]
    entry = proto.metadata_props.add()
    entry.key = PRIOR_KEY
    entry.value = json.dumps(
        {"draws": draws, "states": [value.name for value in proto.graph.input]}
    )
    if path is not None:
        onnx.save(proto, str(Path(path)))
    return proto


def initial_states(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Random states seeded by `seed` for the inputs of a model written by
    `export_prior_predictive` (independent streams, the same for the same seed)."""
    from pt_onnxscript.rng import state_from_generator

    for entry in model.metadata_props:
        if entry.key == PRIOR_KEY:
            names = json.loads(entry.value)["states"]
            children = np.random.SeedSequence(seed).spawn(len(names))
            return {
                name: state_from_generator(np.random.default_rng(child))
                for name, child in zip(names, children, strict=True)
            }
    raise ValueError(
        "the model has no random states: it was not written by export_prior_predictive"
    )
