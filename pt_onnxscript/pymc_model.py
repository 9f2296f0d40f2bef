"""A PyMC model's log-density and gradient, and its prior and posterior predictive samplers,
as ONNX models, and a sampler of its posterior whose transitions run in ONNX Runtime (`sample`,
`export_sampler`: pt_onnxscript.pymc.sampling) (needs the `pymc` extra).

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
    from pt_onnxscript.export import compile_for_export

    point, logp, dlogp = logp_graph(model, jacobian=jacobian, batch=batch)
    return compile_for_export([point], [logp, dlogp])


def parameter_checks(model) -> str:
    """The rewrite that gives PyMC's parameter checks the meaning pymc.compile gives them: a
    log-density of -inf where one fails (none with the model's check_bounds off)."""
    if model.check_bounds:
        return "local_check_parameter_to_ninf_switch"
    return "local_remove_check_parameter"


def logp_graph(model, *, jacobian: bool = True, batch: bool | int = False):
    """The point (or with `batch` the (K, n) points) variable and `model`'s log-density and
    gradient of it, as symbolic PyTensor variables (logp_and_gradient compiles them)."""
    import pytensor
    import pytensor.tensor as pt
    from pymc.logprob import utils as logprob_utils
    from pymc.pytensorf import join_nonshared_inputs, rewrite_pregrad
    from pytensor.graph.replace import vectorize_graph
    from pytensor.graph.rewriting.basic import in2out
    from pytensor.graph.rewriting.utils import rewrite_graph

    from pt_onnxscript.errors import UnsupportedOpError

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
    # PyMC's parameter checks given their meaning here, not by the rewrites of a compiled
    # function: a graph that takes these (the sampler's, in a Scan) gets them done.
    check = in2out(getattr(logprob_utils, parameter_checks(model)))
    logp, dlogp = rewrite_graph([logp, dlogp], include=(), custom_rewrite=check)
    point.name = "point"
    if size is not False:
        n = layout(model)[-1].stop
        points = pt.tensor("points", dtype=point.type.dtype, shape=(size, n))
        try:
            logp, dlogp = vectorize_graph([logp, dlogp], replace={point: points})
        except (NotImplementedError, TypeError) as err:
            raise UnsupportedOpError(
                "PyTensor cannot vectorize this model's log-density over many points "
                f"({type(err).__name__}: {err}). Export it one point per call "
                "(export_logp(model, batch=False)) and call it once per point; the sampler "
                "needs the many-point one (sample such a model with pm.sample)."
            ) from err
        point = points
    return point, logp, dlogp


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
    from pytensor.compile.mode import Mode

    from pt_onnxscript.linker import onnx_rewrites

    wanted = (
        {var.name for var in model.basic_RVs + model.deterministics}
        if var_names is None
        else set(var_names)
    )
    names = _draw_names(model, wanted)
    sampler, _ = compile_forward_sampling_function(
        [model[name] for name in names],
        vars_in_trace=[],
        basic_rvs=model.basic_RVs,
        givens_dict=None,
        mode=Mode(linker="py", optimizer=onnx_rewrites()),
    )
    proto = _export_draws(sampler, names, model, PRIOR_KEY, {}, opset)
    if path is not None:
        onnx.save(proto, str(Path(path)))
    return proto


def _draw_names(model, wanted) -> list[str]:
    """The names of the variables `wanted` (names) of `model`, sorted, transformed values
    left out; a ValueError naming those the model does not have (PyMC's KeyError came from
    the depths of the export)."""
    from pymc.util import get_default_varnames

    unknown = set(wanted).difference(model.named_vars)
    if unknown:
        raise ValueError(
            f"Unrecognized var_names: {sorted(unknown)}; the model's variables are "
            f"{sorted(model.named_vars)}"
        )
    return sorted(get_default_varnames(wanted, include_transformed=False))


def _export_draws(sampler, names, model, key: str, more: dict, opset: int | None, dims=None):
    """The model of compiled `sampler`, whose outputs are the draws of `names` (then its
    random states' updates), each generator named after the variable it draws: the variable
    a draw of it gives, else the first variable whose graph reads it (a Scan that draws, a
    distribution built of several draws). Its metadata under `key` lists the draws and the
    states, and `more`; `dims` names or fixes its inputs' dims (export_onnx's)."""
    from pytensor.graph.traversal import ancestors

    from pt_onnxscript.export import export_onnx
    from pt_onnxscript.rng import is_random_state
    from pt_onnxscript.translate import DEFAULT_OPSET

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
            sampler,
            opset=DEFAULT_OPSET if opset is None else opset,
            output_names=names,
            dims=dims,
        )
    finally:
        for (variable, _), name in zip(states, old_names, strict=True):
            variable.name = name
    draws = [
        {"name": out.name, "dtype": model[out.name].dtype}
        for out in proto.graph.output[: len(names)]
    ]
    state_names = [value.name for value in proto.graph.input if value.name != more.get("input")]
    entry = proto.metadata_props.add()
    entry.key = key
    entry.value = json.dumps({"draws": draws, "states": state_names} | more)
    return proto


POSTERIOR_PREDICTIVE_KEY = "pt_onnxscript.posterior_predictive"


def posterior_layout(model) -> list[Slot]:
    """The slot of each free random variable of `model`, in the constrained space in which an
    InferenceData's posterior holds it, in the draw vector `export_posterior_predictive`
    takes (`model.free_RVs` order)."""
    shapes = model.eval_rv_shapes()
    slots, start = [], 0
    for var in model.free_RVs:
        shape = tuple(int(d) for d in shapes[var.name])
        stop = start + int(np.prod(shape, dtype=int))
        slots.append(Slot(var.name, shape, start, stop))
        start = stop
    return slots


def posterior_points(posterior, slots: list[Slot]) -> np.ndarray:
    """The draws of `posterior` as rows of draw vectors laid out by `slots`: an
    InferenceData (its posterior group), an xarray Dataset or a {name: array} dict whose
    arrays have leading (chain, draw) dims; chains one after another."""
    group = getattr(posterior, "posterior", posterior)
    columns = []
    for slot in slots:
        if slot.name not in group:
            raise KeyError(
                f"the posterior has no draws of {slot.name!r}; it needs {[s.name for s in slots]}"
            )
        values = np.asarray(getattr(group[slot.name], "values", group[slot.name]))
        if values.shape[2:] != slot.shape:
            raise ValueError(
                f"the posterior's {slot.name!r} has shape {values.shape}: (chain, draw) "
                f"followed by the variable's shape {slot.shape} expected"
            )
        columns.append(values.reshape(values.shape[0] * values.shape[1], -1))
    return np.concatenate(columns, axis=1).astype(np.float64)


def export_posterior_predictive(
    model,
    path=None,
    *,
    var_names=None,
    batch: bool | int = False,
    opset: int | None = None,
):
    """Export `model`'s posterior predictive: one draw of its observed variables (or
    `var_names`) for a posterior draw of its free variables, as ``pm.sample_posterior_
    predictive`` draws it, so a fitted model's predictions are served without PyMC.

    Its input ``draw`` is the vector of the free variables' values (constrained, as an
    InferenceData holds them) laid out by `posterior_layout`; with `batch`, ``draws``, a
    (K, n) matrix of them (`posterior_points` makes it from an InferenceData; K any number
    with ``batch=True``, or fixed), and each output gains a leading dim of K. Random states
    in and out as in `export_prior_predictive` (`initial_states` seeds them). Returns the
    onnx.ModelProto (also written to `path` if given).
    """
    import pytensor.tensor as pt
    from pymc.sampling.forward import compile_forward_sampling_function
    from pytensor.compile.mode import Mode
    from pytensor.graph.replace import graph_replace, vectorize_graph

    from pt_onnxscript.errors import UnsupportedOpError
    from pt_onnxscript.export import compile_for_export

    size = _batch_size(batch)
    wanted = {var.name for var in model.observed_RVs} if var_names is None else set(var_names)
    names = _draw_names(model, wanted)
    if not names:
        raise ValueError("export_posterior_predictive: the model has no observed variables")
    slots = posterior_layout(model)
    free = {var.name for var in model.free_RVs}
    if free.intersection(names):
        raise ValueError(
            f"export_posterior_predictive draws variables given by the posterior: "
            f"{sorted(free.intersection(names))}; name observed variables or deterministics"
        )
    sampler, _ = compile_forward_sampling_function(
        [model[name] for name in names],
        vars_in_trace=list(model.free_RVs),
        basic_rvs=model.basic_RVs,
        givens_dict=None,
        mode=Mode(linker="py", optimizer=None),
    )
    fgraph = sampler.maker.fgraph
    inputs = list(zip(sampler.maker.inputs, fgraph.inputs, strict=True))
    draw = pt.vector("draw", shape=(slots[-1].stop if slots else 0,), dtype="float64")
    replace = {}
    for spec, var in inputs:
        if spec.shared:
            replace[var] = spec.variable
        else:
            slot = next(s for s in slots if s.name == var.name)
            replace[var] = draw[slot.start : slot.stop].reshape(slot.shape).astype(var.dtype)
    outputs = _out_of_place_draws(graph_replace(list(fgraph.outputs), replace, strict=False))
    point = draw
    if size is not False:
        point = pt.tensor("draws", dtype="float64", shape=(size, draw.type.shape[0]))
        try:
            outputs = vectorize_graph(outputs, replace={draw: point})
        except (NotImplementedError, TypeError) as err:
            raise UnsupportedOpError(
                "export_posterior_predictive(batch=...): PyTensor cannot vectorize this "
                f"model's draws over many posterior draws ({type(err).__name__}: {err}). "
                "Export it one draw per call (batch=False)."
            ) from err
    updated = [spec.variable for spec, _ in inputs if spec.update is not None]
    function = compile_for_export(
        [point],
        outputs[: len(names)],
        updates=dict(zip(updated, outputs[len(names) :], strict=True)),
    )
    layout_entry = [s.__dict__ | {"shape": list(s.shape)} for s in slots]
    more = {"input": point.name, "layout": layout_entry, "batch": size is not False}
    dims = {"draws": ("draws", None)} if size is None else None
    proto = _export_draws(function, names, model, POSTERIOR_PREDICTIVE_KEY, more, opset, dims)
    entry = proto.metadata_props.add()
    entry.key = "pt_onnxscript.layout"
    entry.value = json.dumps(layout_entry)
    if path is not None:
        onnx.save(proto, str(Path(path)))
    return proto


def _out_of_place_draws(outputs):
    """`outputs` with PyMC's in-place random variables (pymc.compile makes them so) drawn
    out of place: a function compiled anew takes no in-place Op."""
    from pytensor.graph.fg import FunctionGraph
    from pytensor.tensor.random.op import RandomVariable

    fgraph = FunctionGraph(outputs=outputs, clone=False)
    for node in fgraph.toposort():
        if isinstance(node.op, RandomVariable) and node.op.inplace:
            props = node.op._props_dict() | {"inplace": False}
            new = type(node.op)(**props).make_node(*node.inputs)
            fgraph.replace_all(list(zip(node.outputs, new.outputs, strict=True)))
    return list(fgraph.outputs)


def initial_states(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Random states seeded by `seed` for the inputs of a model written by
    `export_prior_predictive` or `export_posterior_predictive` (independent streams, the same
    for the same seed)."""
    from pt_onnxscript.rng import state_from_generator

    for entry in model.metadata_props:
        if entry.key in (PRIOR_KEY, POSTERIOR_PREDICTIVE_KEY):
            names = json.loads(entry.value)["states"]
            children = np.random.SeedSequence(seed).spawn(len(names))
            return {
                name: state_from_generator(np.random.default_rng(child))
                for name, child in zip(names, children, strict=True)
            }
    raise ValueError(
        "the model has no random states: it was not written by export_prior_predictive or "
        "export_posterior_predictive"
    )


# The sampler lives in pt_onnxscript.pymc.sampling (which imports this module): its entry
# points are found here too, where users look for the rest.
_SAMPLING = ("sample", "export_sampler")


def __getattr__(name: str):
    if name in _SAMPLING:
        from pt_onnxscript.pymc import sampling

        return getattr(sampling, name)
    raise AttributeError(f"module 'pt_onnxscript.pymc_model' has no attribute {name!r}")
