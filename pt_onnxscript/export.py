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

from pt_onnxscript.linker import inference_session, onnx_rewrites
from pt_onnxscript.translate import DEFAULT_OPSET, fgraph_to_model
from pt_onnxscript.types import Dim

SHARED_CHOICES = ("bake", "input")


class TensorSpec(NamedTuple):
    """An input of an @onnx_export function: dtype and shape, each dim an int, a name or None."""

    dtype: str
    shape: tuple[Dim, ...]


def compile_for_export(inputs, outputs, updates=None) -> Function:
    """Rewrite the graph of `inputs` -> `outputs` as mode "ONNX" does, without running it."""
    return pytensor.function(
        list(inputs),
        outputs,
        updates=updates,
        mode=Mode(linker="py", optimizer=onnx_rewrites()),
        on_unused_input="ignore",
    )


def _as_function(source) -> Function:
    if isinstance(source, Function):
        return source
    if isinstance(source, tuple | list) and len(source) == 2:
        inputs, outputs = source
        if isinstance(inputs, Variable):
            inputs = [inputs]
        return compile_for_export(inputs, outputs)
    raise TypeError(
        "export_onnx takes a compiled pytensor.function or an (inputs, outputs) pair, "
        f"not {type(source).__name__}"
    )


def function_to_model(
    fn: Function,
    *,
    opset: int = DEFAULT_OPSET,
    dims: Mapping[str, Sequence[Dim]] | None = None,
    shared: str = "bake",
    output_names: Sequence[str] | None = None,
) -> ir.Model:
    """The ONNX model of compiled function `fn` (its rewritten graph, as it runs)."""
    if shared not in SHARED_CHOICES:
        raise ValueError(f"shared must be one of {SHARED_CHOICES}, not {shared!r}")
    fgraph = fn.maker.fgraph
    specs = fn.maker.inputs
    input_names, baked = [], {}
    for i, (var, spec) in enumerate(zip(fgraph.inputs, specs, strict=True)):
        input_names.append(spec.name or var.name or f"input_{i}")
        if spec.shared and shared == "bake":
            baked[var] = spec.variable.get_value(borrow=True)

    n_user = len(fn.maker.outputs)
    if output_names is None:
        output_names = [
            out.variable.name or f"output_{i}" for i, out in enumerate(fn.maker.outputs)
        ]
    elif len(output_names) != n_user:
        raise ValueError(f"output_names has {len(output_names)} names for {n_user} outputs")
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
    )


def to_proto(model: ir.Model, check: bool = True) -> onnx.ModelProto:
    proto = ir.serde.serialize_model(model)
    if check:
        onnx.checker.check_model(proto, full_check=True)
    return proto


def export_onnx(
    source,
    path: str | os.PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    dims: Mapping[str, Sequence[Dim]] | None = None,
    shared: str = "bake",
    output_names: Sequence[str] | None = None,
) -> onnx.ModelProto:
    """Export a PyTensor graph to ONNX and return the checked model.

    `source` is a compiled ``pytensor.function`` (any mode) or an ``(inputs, outputs)``
    pair. `dims` maps input names to one entry per dim: an int fixes an unknown dim, a
    string names it, None leaves it symbolic. `shared="bake"` stores shared variables as
    initializers, ``"input"`` makes them graph inputs. Updates of a compiled function are
    extra outputs named ``<shared name>_updated``. With `path`, the model is also saved.
    """
    model = function_to_model(
        _as_function(source), opset=opset, dims=dims, shared=shared, output_names=output_names
    )
    proto = to_proto(model)
    if path is not None:
        onnx.save_model(proto, os.fspath(path))
    return proto


def _symbolic_input(name: str, spec) -> tuple[Variable, tuple[Dim, ...]]:
    if isinstance(spec, Variable):
        return spec.type(name=name), tuple(spec.type.shape)
    if isinstance(spec, tuple) and len(spec) == 2:
        dtype, shape = TensorSpec(*spec)
        static = tuple(d if isinstance(d, int) and not isinstance(d, bool) else None for d in shape)
        return pt.tensor(name=name, dtype=dtype, shape=static), tuple(shape)
    raise TypeError(
        f"The spec of input {name!r} must be a PyTensor variable such as "
        f"pt.matrix(dtype='float32', shape=(None, 64)) or a (dtype, shape) pair such as "
        f"('float32', ('batch', 64)), not {spec!r}"
    )


class ONNXFunction:
    """A Python function exported to ONNX: `.model`, `.save(path)`, and calls run ONNX Runtime."""

    def __init__(self, fn: Callable, specs: Mapping[str, object], **export_kwargs):
        params = list(inspect.signature(fn).parameters)
        missing = [p for p in params if p not in specs]
        extra = [s for s in specs if s not in params]
        if missing or extra:
            raise TypeError(
                f"@onnx_export of {fn.__name__}: give one input spec per parameter "
                f"(missing: {missing}, unknown: {extra})"
            )
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.input_names = params
        pairs = {p: _symbolic_input(p, specs[p]) for p in params}
        self.inputs = [pairs[p][0] for p in params]
        dims = {p: shape for p, (_, shape) in pairs.items()}
        outputs = fn(*self.inputs)
        self._single = isinstance(outputs, Variable)
        self.outputs = [outputs] if self._single else list(outputs)
        model = function_to_model(
            compile_for_export(self.inputs, self.outputs), dims=dims, **export_kwargs
        )
        self.model = to_proto(model)
        self._ir_model = model
        self._session = None

    @property
    def output_names(self) -> list[str]:
        return [out.name for out in self.model.graph.output]

    def save(self, path: str | os.PathLike) -> None:
        onnx.save_model(self.model, os.fspath(path))

    def __call__(self, *args, **kwargs):
        bound = inspect.signature(self.__wrapped__).bind(*args, **kwargs)
        feeds = {}
        for var, name in zip(self.inputs, self.input_names, strict=True):
            feeds[name] = _checked_array(bound.arguments[name], var, name)
        if self._session is None:
            self._session = inference_session(self._ir_model)
        results = self._session.run(None, feeds)
        return results[0] if self._single else tuple(results)


def _checked_array(value, var: Variable, name: str) -> np.ndarray:
    dtype = np.dtype(var.type.dtype)
    array = np.asarray(value)
    if array.dtype != dtype:
        if isinstance(value, np.ndarray | np.generic) and not np.can_cast(array.dtype, dtype, "safe"):
            raise TypeError(
                f"Input {name!r} is {dtype}, got {array.dtype}: convert it with "
                f".astype({dtype.name!r}) if that is what you mean."
            )
        array = array.astype(dtype)
    if array.ndim != var.type.ndim or any(
        s is not None and s != n for s, n in zip(var.type.shape, array.shape, strict=True)
    ):
        raise ValueError(f"Input {name!r} has shape {array.shape}, expected {var.type.shape}")
    return array


def onnx_export(fn: Callable | None = None, /, *, opset: int = DEFAULT_OPSET, shared: str = "bake",
                output_names: Sequence[str] | None = None, **input_specs):
    """Decorate a function that builds a PyTensor graph from symbolic inputs.

    Give one spec per parameter, as a PyTensor variable (``pt.matrix(dtype="float32",
    shape=(None, 64))``) or a ``(dtype, shape)`` pair whose dims are ints, names
    (``"batch"``) or None. The result has ``.model`` (an ``onnx.ModelProto``),
    ``.save(path)``, and calling it with arrays runs the model on ONNX Runtime.
    """

    def decorate(f: Callable) -> ONNXFunction:
        return ONNXFunction(f, input_specs, opset=opset, shared=shared, output_names=output_names)

    return decorate if fn is None else decorate(fn)
