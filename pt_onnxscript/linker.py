"""ONNXLinker and the "ONNX" mode: PyTensor functions run on ONNX Runtime."""

import os
import re
import tempfile
from contextlib import contextmanager

import numpy as np
import onnx_ir as ir
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.link.basic import JITLinker
from pytensor.tensor.type import TensorType

from pt_onnxscript.ops.common import CHECK
from pt_onnxscript.opsets import DEFAULT_OPSET, check_opset, newest_opset  # noqa: F401
from pt_onnxscript.rng import generator_from_state, is_random_state, state_from_generator
from pt_onnxscript.translate import fgraph_to_model


class ONNXLinker(JITLinker):
    """A Linker that translates the whole FunctionGraph to one ONNX model and runs it on ONNX Runtime."""

    required_rewrites = ("minimum_compile", "onnx")
    incompatible_rewrites = (
        "cxx_only",
        "BlasOpt",
        "local_careduce_fusion",
        "scan_save_mem_prealloc",
        "scan_reduce_trace_prealloc",
        "inplace",
        "reuse_lu_decomposition_multiple_solves",
        "scan_split_non_sequence_lu_decomposition_solve",
    )

    def __init__(
        self,
        opset: int = DEFAULT_OPSET,
        providers=("CPUExecutionProvider",),
        optimize: bool = True,
        threads: int | None = None,
        **kwargs,
    ):
        self.opset = check_opset(opset)
        self.optimize = optimize
        self.threads = threads
        self.providers = tuple(providers)
        super().__init__(**kwargs)

    def accept(self, fgraph, no_recycling=None, profile=None):
        if self.fgraph is not None and self.fgraph is not fgraph:
            # PyTensor's Linker.accept would start over from the default settings.
            fresh = type(self)(
                opset=self.opset,
                providers=self.providers,
                optimize=self.optimize,
                threads=self.threads,
                allow_gc=self.allow_gc,
            )
            return fresh.accept(fgraph, no_recycling, profile)
        return super().accept(fgraph, no_recycling, profile)

    def fgraph_convert(self, fgraph, input_storage, storage_map, **kwargs):
        # Shared variables stay inputs (set_value and in-place changes must be seen), but their
        # shapes are known now: the model specialised on them folds its shape arithmetic and
        # checks away. A call whose shared values have other shapes (set_value of another
        # shape, an update that grows one) runs the general model, translated at that call.
        fixed = shared_shapes(fgraph)
        specialised = self._compile(fgraph, fixed)
        general = None if fixed else specialised
        positions = [(fgraph.inputs.index(var), shape) for var, shape in fixed.items()]
        inputs = [
            (value.name, None if is_random_state(var) else np.dtype(var.type.dtype))
            for value, var in zip(specialised[0].graph.inputs, fgraph.inputs, strict=True)
        ]
        states = [i for i, var in enumerate(fgraph.outputs) if is_random_state(var)]

        def run(*args):
            # As little Python per call as possible: this is all mode "ONNX" adds to a call.
            nonlocal general
            _, session_run, checks = specialised
            for i, shape in positions:
                if np.shape(args[i]) != shape:
                    if general is None:
                        general = self._compile(fgraph, {})
                    _, session_run, checks = general
                    break
            feeds = {
                name: arg
                if type(arg) is np.ndarray and arg.dtype == dtype
                else np.asarray(arg, dtype=dtype)
                if dtype is not None
                else state_from_generator(arg)
                for (name, dtype), arg in zip(inputs, args)
            }
            try:
                results = session_run(None, feeds)
            except Exception as err:  # noqa: BLE001  (re-raised unless a check failed)
                raise_check(err, checks)
            for i in states:
                results[i] = generator_from_state(results[i])
            return results

        run.model = specialised[0]
        return run

    def _compile(self, fgraph, fixed_shapes):
        """(model, its session's run, its checks) for `fgraph`, inputs of the given shapes."""
        model = fgraph_to_model(
            fgraph, opset=self.opset, optimize=self.optimize, fixed_shapes=fixed_shapes
        )
        checks = model_checks(model)
        with raising_checks(checks):
            session = inference_session(model, self.providers, self.threads)
        return model, session.run, checks

    def jit_compile(self, fn):
        return fn

    def create_thunk_inputs(self, storage_map):
        return [storage_map[var] for var in self.fgraph.inputs]


def shared_shapes(fgraph) -> dict:
    """The current shapes of the shared tensor inputs of `fgraph` whose dims PyTensor leaves
    unknown."""
    return {
        var: np.shape(var.get_value(borrow=True))
        for var in fgraph.inputs
        if isinstance(var, SharedVariable)
        and isinstance(var.type, TensorType)
        and None in var.type.shape
    }


def model_checks(model: ir.Model) -> dict[str, tuple[type[Exception], str]]:
    """The checks kept in `model` (see ``ops.common.failure_guard``), by node name."""
    return {
        node.name: node.meta[CHECK]
        for node in ir.traversal.RecursiveGraphIterator(model.graph)
        if CHECK in node.meta
    }


def raise_check(err: Exception, checks: dict[str, tuple[type[Exception], str]]):
    """Raise the check's own exception if ONNX Runtime's error `err` is a check failing;
    re-raise `err` otherwise."""
    # The innermost failing node is named last (Loop and If bodies nest their errors).
    for name in reversed(re.findall(r"Name:'(.*?)' Status Message", str(err), re.DOTALL)):
        if name in checks:
            exc_type, message = checks[name]
            raise exc_type(message) from err
    raise err


@contextmanager
def raising_checks(checks: dict[str, tuple[type[Exception], str]]):
    """Turn ONNX Runtime's failure in a check's node into the check's own exception."""
    try:
        yield
    except Exception as err:  # noqa: BLE001  (re-raised unless a check failed)
        raise_check(err, checks)


# Protobuf cannot serialize a message of 2 GiB or more; past this many bytes of tensors,
# they go to a data file beside the model.
EXTERNAL_DATA_BYTES = 2**31 - 2**26


def tensor_bytes(model: ir.Model) -> int:
    """The bytes of the model's initializers."""
    values = model.graph.initializers.values()
    return sum(v.const_value.nbytes for v in values if v.const_value is not None)


def inference_session(
    model: ir.Model, providers=("CPUExecutionProvider",), threads: int | None = None
):
    """An ONNX Runtime session for `model` (through a temporary file with external data
    when its tensors pass 2 GB), running each node on `threads` threads (None: ONNX Runtime's
    default, one per core)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # failures are raised, not logged
    if threads is not None:
        options.intra_op_num_threads = threads
    if tensor_bytes(model) <= EXTERNAL_DATA_BYTES:
        proto = ir.serde.serialize_model(model)
        return ort.InferenceSession(
            proto.SerializeToString(), sess_options=options, providers=list(providers)
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        ir.save(model, path, external_data="model.onnx.data")
        return ort.InferenceSession(path, sess_options=options, providers=list(providers))


def onnx_rewrites() -> RewriteDatabaseQuery:
    """The rewrites graphs get before translation, as in mode "ONNX"."""
    return RewriteDatabaseQuery(
        include=["fast_run", *ONNXLinker.required_rewrites],
        exclude=list(ONNXLinker.incompatible_rewrites),
    )


def onnx_mode(
    opset: int = DEFAULT_OPSET, optimize: bool = True, threads: int | None = None
) -> Mode:
    """Mode "ONNX" for a given opset (`optimize=False`: without the ONNX-level optimisation;
    `threads`: ONNX Runtime's threads per node, by default one per core)."""
    return Mode(
        linker=ONNXLinker(opset=opset, optimize=optimize, threads=threads),
        optimizer=RewriteDatabaseQuery(include=["fast_run"]),
    )
