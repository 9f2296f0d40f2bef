"""export_onnx and the @onnx_export decorator."""

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import onnx
import onnx_ir as ir
import pytensor
import pytensor.tensor as pt
from pytensor.compile import Function
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Variable

from pt_onnxscript.errors import TranslationError
from pt_onnxscript.linker import (
    EXTERNAL_DATA_BYTES,
    model_checks,
    onnx_rewrites,
    raise_check,
    session_runner,
    tensor_bytes,
)
from pt_onnxscript.opsets import DEFAULT_OPSET, check_opset
from pt_onnxscript.rng import generator_from_state, is_random_state, state_from_generator
from pt_onnxscript.translate import baked_copy, fgraph_to_model, no_cyclic_gc
from pt_onnxscript.types import Dim

SHARED_CHOICES = ("bake", "input")
RANDOM_STATE_CHOICES = ("input", "bake")


class TensorSpec(NamedTuple):
    """An input of an @onnx_export function: dtype and shape, each dim an int, a name or None."""

    dtype: str
    shape: tuple[Dim, ...]


def compile_for_export(inputs, outputs, updates=None, including=()) -> Function:
    """Rewrite the graph of `inputs` -> `outputs` as mode "ONNX" does (and by the rewrites
    `including` names too), without running it."""
    return pytensor.function(
        list(inputs),
        outputs,
        updates=updates,
        mode=Mode(linker="py", optimizer=onnx_rewrites().including(*including)),
        on_unused_input="ignore",
    )


def as_function(source, caller: str) -> Function:
    """`source` as a compiled function: itself, or an (inputs, outputs) pair compiled for export."""
    if isinstance(source, Function):
        return source
    if isinstance(source, tuple | list) and len(source) == 2:
        inputs, outputs = source
        inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
        return compile_for_export(inputs, outputs)
    raise TypeError(
        f"{caller} takes a compiled pytensor.function or an (inputs, outputs) pair, "
        f"not {type(source).__name__}"
    )


def function_to_model(
    fn: Function,
    *,
    opset: int = DEFAULT_OPSET,
    dims: Mapping[str, Sequence[Dim]] | None = None,
    shared: str = "bake",
    output_names: Sequence[str] | None = None,
    optimize: bool = True,
    random_state: str = "input",
) -> ir.Model:
    """The ONNX model of compiled function `fn` (its rewritten graph, as it runs)."""
    if shared not in SHARED_CHOICES:
        raise ValueError(f"shared must be one of {SHARED_CHOICES}, not {shared!r}")
    if random_state not in RANDOM_STATE_CHOICES:
        raise ValueError(
            f"random_state must be one of {RANDOM_STATE_CHOICES}, not {random_state!r}"
        )
    fgraph = fn.maker.fgraph
    specs = fn.maker.inputs
    input_names, baked, states = [], {}, {}
    for i, (var, spec) in enumerate(zip(fgraph.inputs, specs, strict=True)):
        input_names.append(spec.name or var.name or f"input_{i}")
        if spec.shared and is_random_state(var):
            if random_state == "bake":
                states[i] = state_from_generator(spec.variable.get_value(borrow=True))
        elif spec.shared and shared == "bake":
            baked[var] = spec.variable.get_value(borrow=True)

    n_user = len(fn.maker.outputs)
    if output_names is None:
        output_names = [
            out.variable.name or f"output_{i}" for i, out in enumerate(fn.maker.outputs)
        ]
    else:
        _check_output_names(output_names, n_user, input_names)
    if baked:
        fgraph, baked = baked_copy(fgraph, baked)
    # A baked random state is an initializer: the same draws every call (a fixed seed).
    baked.update({fgraph.inputs[i]: state for i, state in states.items()})
    update_mapping = getattr(fgraph, "update_mapping", None) or {}
    names = list(output_names)
    for out_idx in range(n_user, len(fgraph.outputs)):
        names.append(f"{input_names[update_mapping[out_idx]]}_updated")
    return fgraph_to_model(
        fgraph,
        opset=opset,
        input_names=input_names,
        output_names=names,
        dims={name: d for name, d in (dims or {}).items()},
        baked=baked,
        optimize=optimize,
    )


def _check_output_names(output_names, n_outputs: int, input_names: list[str]) -> None:
    """The names a user gives the outputs are used as given, or refused: never renamed."""
    if isinstance(output_names, str) or len(output_names) != n_outputs:
        raise ValueError(
            f"output_names must be a sequence of {n_outputs} names, one per output, "
            f"not {output_names!r}"
        )
    for name in output_names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"output_names must be non-empty strings, not {name!r}")
        if list(output_names).count(name) > 1:
            raise ValueError(f"output_names has {name!r} more than once: give distinct names")
        if name in input_names:
            raise ValueError(
                f"output name {name!r} is also an input's name: an ONNX graph's values are "
                f"named once; give the output another name"
            )


def to_proto(model: ir.Model, check: bool = True, dims=None) -> onnx.ModelProto:
    """The checked ModelProto of `model` (under 2 GB: see `save_model` for larger ones)."""
    if tensor_bytes(model) > EXTERNAL_DATA_BYTES:
        raise ValueError(
            "The model holds over 2 GB of tensors, more than one ONNX file can: save it "
            "with export_onnx(..., path) or .save(path), which write the tensors to a data "
            "file beside it (ONNX external data)."
        )
    proto = ir.serde.serialize_model(model)
    if check:
        _check(lambda: onnx.checker.check_model(proto, full_check=True), dims)
    return proto


def _check(run_checker, dims) -> None:
    try:
        run_checker()
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        if not dims:
            raise TranslationError(
                f"The exported model fails ONNX's full check, a bug in a translation: please "
                f"report it with the graph (export_onnx(..., optimize=False) shows whether "
                f"the optimiser is at fault). {type(err).__name__}: {err}"
            ) from err
        raise ValueError(
            f"The dims given ({dims}) contradict the graph: ONNX shape inference found "
            f"sizes that cannot agree. Check each named or fixed dim. ({err})"
        ) from err


def save_model(
    model: ir.Model, path, *, external_data: bool | None = None, dims=None
) -> onnx.ModelProto:
    """Check `model` and write it to `path`; its tensors go to ``<file name>.data`` beside it
    when `external_data` is true, or, by default, when they would not fit one file (2 GB).
    Returns the ModelProto (without the external tensors' bytes)."""
    path = os.fspath(path)
    if external_data is None:
        external_data = tensor_bytes(model) > EXTERNAL_DATA_BYTES
    if not external_data:
        proto = to_proto(model, dims=dims)
        onnx.save_model(proto, path)
        return proto
    ir.save(model, path, external_data=os.path.basename(path) + ".data")
    _check(lambda: onnx.checker.check_model(path, full_check=True), dims)
    return onnx.load(path, load_external_data=False)


def export_onnx(
    source,
    path: str | os.PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    dims: Mapping[str, Sequence[Dim]] | None = None,
    shared: str = "bake",
    output_names: Sequence[str] | None = None,
    external_data: bool | None = None,
    optimize: bool = True,
    random_state: str = "input",
    report=None,
    verify: bool | Sequence = False,
) -> onnx.ModelProto:
    """Export a PyTensor graph to ONNX and return the checked model.

    `source` is a compiled ``pytensor.function`` (any mode) or an ``(inputs, outputs)``
    pair. `dims` maps input names to one entry per dim: an int fixes an unknown dim, a
    string names it, None leaves it symbolic. `shared="bake"` stores shared variables as
    initializers, ``"input"`` makes them graph inputs. Updates of a compiled function are
    extra outputs named ``<shared name>_updated``. With `path`, the model is also saved;
    its tensors go to ``<file name>.data`` beside it with `external_data=True`, and always
    when they pass 2 GB (a model that large needs a `path`). `optimize=False` skips the
    ONNX-level optimisation (constant folding, CSE, ...), to see each translation's nodes.

    A random generator is a ``uint64[2]`` state (pt_onnxscript.rng): a shared one is an input
    named after it, its advanced state the output ``<name>_updated`` (feed it back for new
    draws); ``random_state="bake"`` stores its current state instead, so every run gives
    the same draws.

    `report` is a path to write the model's report to (`pt_onnxscript.report`: opset, inputs
    and outputs, nodes by op type, Loops and Ifs, initializers, ops without kernels, known
    runtime failures; ``.json`` for JSON, Markdown otherwise). `verify=True` adds each
    output's largest error against PyTensor's Python implementation on inputs generated
    from the specs; a sequence of values (one per explicit input) verifies on those.
    """
    check_opset(opset)
    if verify is not False and report is None:
        raise ValueError("verify adds to the report: pass report=path with it")
    if dims is not None and not isinstance(dims, Mapping):
        raise TypeError(
            f"dims must map input names to their dims, such as {{'x': ('batch', 4)}}, not "
            f"a {type(dims).__name__} ({dims!r})"
        )
    if path is None and external_data:
        raise ValueError("external_data=True needs a path to write the data file beside")
    with no_cyclic_gc():  # the graph's copy, the translation, the checked model
        fn = as_function(source, "export_onnx")
        model = function_to_model(
            fn,
            opset=opset,
            dims=dims,
            shared=shared,
            output_names=output_names,
            optimize=optimize,
            random_state=random_state,
        )
        if path is None:
            proto = to_proto(model, dims=dims)
        else:
            proto = save_model(model, path, external_data=external_data, dims=dims)
    if report is not None:
        _write_report(fn, proto, report, verify)
    return proto


def _write_report(fn, proto, path, verify) -> None:
    from pt_onnxscript import report as reporting

    verification = None
    if verify is not False:
        values = None if verify is True else list(verify)
        verification = reporting.verify(fn, proto, values)
    reporting.write(reporting.describe(proto, verification=verification), path)


def _symbolic_input(name: str, spec) -> tuple[Variable, tuple[Dim, ...]]:
    if isinstance(spec, Variable):
        return spec.type(name=name), tuple(spec.type.shape)
    if isinstance(spec, tuple) and len(spec) == 2:
        dtype, shape = TensorSpec(*spec)
        if isinstance(shape, str) or not isinstance(shape, tuple | list):
            raise TypeError(
                f"The shape in the spec of input {name!r} must be a tuple with one entry per "
                f"dim, such as ({shape!r},) for one dim, not {shape!r}"
            )
        for dim in shape:
            if (
                isinstance(dim, bool)
                or not (dim is None or isinstance(dim, int | str))
                or (isinstance(dim, int) and dim < 0)
            ):
                raise ValueError(
                    f"Each dim of input {name!r} must be a size >= 0, a name or None; "
                    f"{tuple(shape)!r} has {dim!r}"
                )
        static = tuple(d if isinstance(d, int) else None for d in shape)
        return pt.tensor(name=name, dtype=dtype, shape=static), tuple(shape)
    raise TypeError(
        f"The spec of input {name!r} must be a PyTensor variable such as "
        f"pt.matrix(dtype='float32', shape=(None, 64)) or a (dtype, shape) pair such as "
        f"('float32', ('batch', 64)), not {spec!r}"
    )


class ONNXFunction:
    """A Python function exported to ONNX: `.model`, `.save(path)`, and calls run ONNX Runtime.

    With ``shared="input"`` the shared variables are inputs of the model: a call feeds their
    current values, or the arrays passed by their names as keywords. A model whose tensors
    pass 2 GB has ``.model = None`` (one ModelProto cannot hold it): ``.save(path)`` writes it
    with external data, and calls still run it.
    """

    def __init__(self, fn: Callable, specs: Mapping[str, object], **export_kwargs):
        self._signature = inspect.signature(fn)
        params = list(self._signature.parameters)
        missing = [p for p in params if p not in specs]
        extra = [s for s in specs if s not in params]
        if missing or extra:
            raise TypeError(
                f"@onnx_export of {fn.__name__}: give one input spec per parameter "
                f"(missing: {missing}, unknown: {extra})"
            )
        check_opset(export_kwargs.get("opset", DEFAULT_OPSET))
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        pairs = {p: _symbolic_input(p, specs[p]) for p in params}
        self.inputs = [pairs[p][0] for p in params]
        self._dims = {p: shape for p, (_, shape) in pairs.items()}
        outputs = fn(*self.inputs)
        self._single = isinstance(outputs, Variable)
        self.outputs = [outputs] if self._single else list(outputs)
        compiled = compile_for_export(self.inputs, self.outputs)
        baked_tensors = export_kwargs.get("shared", "bake") == "bake"
        baked_states = export_kwargs.get("random_state", "input") == "bake"
        fgraph = compiled.maker.fgraph
        fed = [
            spec
            for spec, var in zip(compiled.maker.inputs, fgraph.inputs, strict=True)
            if not (spec.shared and (baked_states if is_random_state(var) else baked_tensors))
        ]
        # The baked shared tensors and the arrays they held: the model's values.
        self._baked = [
            (spec.variable, spec.variable.get_value(borrow=True))
            for spec in compiled.maker.inputs
            if spec.shared and spec not in fed and not is_random_state(spec.variable)
        ]
        update_mapping = getattr(fgraph, "update_mapping", None) or {}
        updated = {id(compiled.maker.inputs[inp].variable) for inp in update_mapping.values()}
        fixed = [str(variable) for variable, _ in self._baked if id(variable) in updated]
        if fixed:
            raise ValueError(
                f"@onnx_export of {fn.__name__}: a call updates shared variables {fixed} "
                '(their default_update), whose values shared="bake" fixes in the model: '
                'decorate with shared="input", which feeds them and updates them every call'
            )
        self._ir_model = function_to_model(compiled, dims=self._dims, **export_kwargs)
        names = [value.name for value in self._ir_model.graph.inputs]
        self.input_names = names
        self._shared = {
            name: spec.variable for name, spec in zip(names, fed, strict=True) if spec.shared
        }
        # What a call updates, as a PyTensor function would: (output index, shared variable)
        # for the fed shared variables with (default) updates.
        fed_variables = {id(spec.variable) for spec in fed if spec.shared}
        self._n_outputs = len(self.outputs)
        self._updates = [
            (out, compiled.maker.inputs[inp].variable)
            for out, inp in update_mapping.items()
            if id(compiled.maker.inputs[inp].variable) in fed_variables
        ]
        self._large = tensor_bytes(self._ir_model) > EXTERNAL_DATA_BYTES
        self.model = None if self._large else to_proto(self._ir_model, dims=self._dims)
        self._checks = model_checks(self._ir_model)
        self._run = None  # ONNX Runtime's binding, made at the first call

    @property
    def output_names(self) -> list[str]:
        return [value.name for value in self._ir_model.graph.outputs]

    def save(self, path: str | os.PathLike, *, external_data: bool | None = None) -> None:
        """Write the model to `path` (its tensors to ``<file name>.data`` beside it with
        `external_data`, and always past 2 GB)."""
        save_model(self._ir_model, path, external_data=external_data, dims=self._dims)

    def __call__(self, *args, **kwargs):
        for variable, value in self._baked:
            if variable.get_value(borrow=True) is not value:
                raise ValueError(
                    f"Shared variable {variable.name or variable!r} was set after "
                    f"{self.__name__} was exported with its value baked into the model "
                    '(shared="bake"): export it again, or decorate with shared="input" to feed '
                    "the variables' current values at every call"
                )
        given = {name: kwargs.pop(name) for name in list(kwargs) if name in self._shared}
        bound = self._signature.bind(*args, **kwargs)
        feeds = {}
        named = {}  # a named dim: the first input giving it and its size there
        for var, (name, shape) in zip(self.inputs, self._dims.items(), strict=True):
            feeds[name] = _checked_array(bound.arguments[name], var, name, shape)
            for dim, size in zip(shape, feeds[name].shape, strict=True):
                if isinstance(dim, str):
                    first, expected = named.setdefault(dim, (name, size))
                    if size != expected:
                        raise ValueError(
                            f"Input {name!r} has shape {feeds[name].shape}, expected "
                            f"{tuple(shape)!r}: dim {dim!r} is {size} there, {expected} in "
                            f"input {first!r}"
                        )
        for name, variable in self._shared.items():
            value = given[name] if name in given else variable.get_value(borrow=True)
            if is_random_state(variable):
                feeds[name] = state_from_generator(value)
            else:
                feeds[name] = _checked_array(value, variable, name, variable.type.shape)
        try:
            if self._run is None:
                self._run = session_runner(self._ir_model)
            results = self._run(feeds, None)
        except Exception as err:  # noqa: BLE001  (a check's own exception, or explained)
            raise_check(err, self._checks, self._ir_model, feeds)
        for out, variable in self._updates:
            value = results[out]
            variable.set_value(
                generator_from_state(value) if is_random_state(variable) else value, borrow=True
            )
        results = [
            generator_from_state(value) if is_random_state(var) else value
            for var, value in zip(self.outputs, results, strict=False)
        ]
        return results[0] if self._single else tuple(results)


def _checked_array(value, var: Variable, name: str, shape) -> np.ndarray:
    """`value` as an array of `var`'s dtype and of `shape` (dims as the user wrote them);
    an error rather than a conversion that changes values."""
    dtype = np.dtype(var.type.dtype)
    array = np.asarray(value)
    if array.dtype != dtype:
        if isinstance(value, np.ndarray | np.generic):
            if not np.can_cast(array.dtype, dtype, "safe"):
                raise TypeError(
                    f"Input {name!r} is {dtype}, got {array.dtype}: convert it with "
                    f".astype({dtype.name!r}) if that is what you mean."
                )
            array = array.astype(dtype)
        else:
            array = _converted(array, dtype, name)
    if array.ndim != var.type.ndim or any(
        s is not None and s != n for s, n in zip(var.type.shape, array.shape, strict=True)
    ):
        raise ValueError(f"Input {name!r} has shape {array.shape}, expected {tuple(shape)!r}")
    return array


def _converted(array: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    """Python numbers (lists, scalars) as `dtype`: integers and bools must keep their values;
    floats are rounded to the nearest value of `dtype` but must not overflow."""
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise TypeError(f"Input {name!r} must hold numbers, got {array.dtype}")
    with np.errstate(all="ignore"):
        converted = array.astype(dtype)
        if dtype.kind == "f":
            lossless = (
                np.isinf(converted) == np.isinf(array)
                if array.dtype.kind == "f"
                else np.isfinite(converted)
            )
        else:
            lossless = converted.astype(array.dtype) == array
    if not np.all(lossless):
        bad = array[~np.asarray(lossless)].ravel()[:3].tolist() if array.ndim else array.item()
        raise ValueError(
            f"Input {name!r} is {dtype}, and {bad} cannot be converted to it without changing "
            f"values: pass values {dtype} holds, or convert them yourself with .astype({dtype.name!r})."
        )
    return converted


def onnx_export(
    fn: Callable | None = None,
    /,
    *,
    opset: int = DEFAULT_OPSET,
    shared: str = "bake",
    output_names: Sequence[str] | None = None,
    optimize: bool = True,
    random_state: str = "input",
    **input_specs,
):
    """Decorate a function that builds a PyTensor graph from symbolic inputs.

    Give one spec per parameter, as a PyTensor variable (``pt.matrix(dtype="float32",
    shape=(None, 64))``) or a ``(dtype, shape)`` pair whose dims are ints, names
    (``"batch"``) or None. The result has ``.model`` (an ``onnx.ModelProto``),
    ``.save(path)``, and calling it with arrays runs the model on ONNX Runtime.
    """

    def decorate(f: Callable) -> ONNXFunction:
        return ONNXFunction(
            f,
            input_specs,
            opset=opset,
            shared=shared,
            output_names=output_names,
            optimize=optimize,
            random_state=random_state,
        )

    return decorate if fn is None else decorate(fn)
