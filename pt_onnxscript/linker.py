"""ONNXLinker and the "ONNX" mode: PyTensor functions run on ONNX Runtime.

Importing this module (as ``import pt_onnxscript`` does, to register the mode) imports neither
onnx, onnxscript nor ONNX Runtime: the first function compiled in the mode does.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
from pytensor.compile.mode import Mode
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.rewriting.db import RewriteDatabaseQuery
from pytensor.link.basic import JITLinker
from pytensor.link.utils import raise_with_op
from pytensor.scalar.basic import ScalarType
from pytensor.tensor.type import TensorType

from pt_onnxscript.errors import ExecutionError, IndexOutOfBoundsError, TranslationError
from pt_onnxscript.opsets import DEFAULT_OPSET, check_opset, newest_opset  # noqa: F401
from pt_onnxscript.rng import generator_from_state, is_random_state, state_from_generator

if TYPE_CHECKING:
    import onnx_ir as ir


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
        "local_log_sum_exp",  # rewrites.log_sum_exp in its place
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
        return _Runner(self, fgraph, storage_map)

    def jit_compile(self, fn):
        return fn

    def create_thunk_inputs(self, storage_map):
        return [storage_map[var] for var in self.fgraph.inputs]

    def create_jitable_thunk(self, compute_map, order, input_storage, output_storage, storage_map):
        """JITLinker's thunk, calling the runner with no arguments: it reads the input cells
        and writes the output cells itself (PyTensor's thunk passes each call's values
        through a generator, an argument tuple and a list of results: ~1 us of a call)."""
        fgraph = self.fgraph
        runner = self.jit_compile(
            self.fgraph_convert(
                fgraph,
                order=order,
                input_storage=input_storage,
                output_storage=output_storage,
                storage_map=storage_map,
            )
        )
        output_nodes = [o.owner for o in fgraph.outputs if o.owner is not None][:1]
        step = runner.step

        def thunk():
            try:
                step()
            except Exception:  # noqa: BLE001  (re-raised by PyTensor, naming the node)
                raise_with_op(fgraph, output_nodes[0], thunk)

        thunk.inputs = runner.inputs
        thunk.outputs = runner.outputs
        thunk.lazy = False
        return [thunk], output_nodes, runner

    def _specialise(self, fgraph, updated, cells, general: bool = False):
        """The model and session for `fgraph` specialised on the shared values in the input
        `cells` (or on nothing: `general`), with the cells it reads and checks; `updated`
        holds the positions of the inputs the function updates."""
        from pt_onnxscript.translate import PRINTS, baked_copy, fgraph_to_model
        from pt_onnxscript.types import is_sparse

        baked, shapes = {}, {}
        for i, (var, cell) in enumerate(zip([] if general else fgraph.inputs, cells)):
            if not isinstance(var, SharedVariable) or not isinstance(var.type, TensorType):
                continue
            value = cell[0]
            if type(value) is not np.ndarray:
                continue
            if i not in updated and value.size <= BAKED_ELEMENTS:
                baked[var] = value.copy()
            elif None in var.type.shape:
                shapes[var] = value.shape
        # A sparse shared variable (pm.Data of a SciPy matrix) cannot be fed: it is always a
        # constant of the PyTensor graph, which ops/sparse.py reads (the function updating
        # one computes a sparse value, which has no translation either).
        sparse = {
            var: cell[0].copy()
            for var, cell in zip(fgraph.inputs, cells)
            if isinstance(var, SharedVariable) and is_sparse(var)
        }
        # The constants are PyTensor's too, given its rewrites again, as export_onnx bakes
        # them: the model is the one export_onnx writes of this function (for the values
        # baked here: the small ones it does not update), but that a value of length 1
        # where its variable may have any length stays an input (as a constant it would
        # broadcast where PyTensor refuses to broadcast the variable).
        translated = fgraph
        if baked or sparse:
            translated, _ = baked_copy(fgraph, baked | sparse, as_variables=True)
        position = {var: i for i, var in enumerate(fgraph.inputs)}

        def copied(values):  # keyed by `translated`'s inputs, in fgraph's order
            return {translated.inputs[position[var]]: value for var, value in values.items()}

        model = fgraph_to_model(
            translated,
            opset=self.opset,
            optimize=self.optimize,
            baked=copied(baked | sparse),
            fixed_shapes=copied(shapes),
            prints=True,
        )
        checks = model_checks(model)
        with raising_checks(checks, model):
            run = session_runner(model, self.providers, self.threads, check=True)
        cell_of = dict(zip(fgraph.inputs, cells))
        fed = [var for var in fgraph.inputs if var not in baked and var not in sparse]
        return _Specialised(
            model=model,
            run=run,
            checks=checks,
            feeds=[
                (
                    value.name,
                    cell_of[var],
                    None if is_random_state(var) else np.dtype(var.type.dtype),
                )
                for value, var in zip(model.graph.inputs, fed, strict=True)
            ],
            baked=[(cell_of[var], value.shape, value.tobytes()) for var, value in baked.items()],
            shapes=[(cell_of[var], shape) for var, shape in shapes.items()],
            sparse=[(cell_of[var], _sparse_bytes(value)) for var, value in sparse.items()],
            prints=model.graph.meta[PRINTS],
        )


class _Runner:
    """Mode "ONNX"'s function for one FunctionGraph: `step()` runs the model on the values in
    the `inputs` cells and puts its results in the `outputs` cells.

    The model is specialised on the shared values as they are now: those the function does
    not update (up to BAKED_ELEMENTS each) are initializers, which ONNX Runtime pre-packs and
    folds; the others are inputs of fixed shapes, so shape arithmetic and checks fold away.
    Each call checks the specialisation still holds (the baked values bit for bit: set_value
    and in-place changes alike) and translates the model again when not, up to
    RESPECIALISATIONS times; past that, shared values change too often and the general model
    (every shared variable an input of unknown shape) runs."""

    def __init__(self, linker: ONNXLinker, fgraph, storage_map):
        from pt_onnxscript.types import io_type

        self.linker, self.fgraph = linker, fgraph
        self.inputs = linker.create_thunk_inputs(storage_map)
        self.outputs = [storage_map[var] for var in fgraph.outputs]
        self.updated = set(getattr(fgraph, "update_mapping", {}).values())
        self.states = [i for i, var in enumerate(fgraph.outputs) if is_random_state(var)]
        # A scalar (pytensor.scalar) output is a NumPy scalar, as PyTensor gives it.
        self.scalars = [
            (i, np.dtype(var.type.dtype).type)
            for i, var in enumerate(fgraph.outputs)
            if isinstance(var.type, ScalarType)
        ]
        self.respecialised = 0
        # First: it refuses what cannot be translated (outputs of other types among it).
        self.current = linker._specialise(fgraph, self.updated, self.inputs)
        self.ranks = [len(io_type(var)[1]) for var in fgraph.outputs]

    @property
    def model(self) -> ir.Model:
        """The model the next call runs (unless the shared values change)."""
        return self.current.model

    def step(self) -> None:
        # As little Python per call as possible: this is all mode "ONNX" adds to a call.
        current = self.current
        if not current.holds():
            self.respecialised += 1
            general = self.respecialised > RESPECIALISATIONS
            current = self.current = self.linker._specialise(
                self.fgraph, self.updated, self.inputs, general
            )
        feeds = {}
        for name, cell, dtype in current.feeds:
            value = cell[0]
            if type(value) is not np.ndarray or value.dtype != dtype:
                value = _converted(value, dtype)
            feeds[name] = value
        try:
            results = current.run(feeds, None)
        except Exception as err:  # noqa: BLE001  (a check's own exception, or explained)
            raise_check(err, current.checks, current.model, feeds)
        for value, rank in zip(results, self.ranks):
            if value.ndim != rank:
                raise ExecutionError(_wrong_rank(current.model, results, self.ranks))
        for i in self.states:
            results[i] = generator_from_state(results[i])
        for i, scalar in self.scalars:
            results[i] = scalar(results[i][()])
        for cell, value in zip(self.outputs, results):
            cell[0] = value
        if current.prints:  # the values of the graph's Prints follow its outputs
            for op, value in zip(current.prints, results[len(self.outputs) :], strict=True):
                op.global_fn(op, value)


def _wrong_rank(model: ir.Model, results, ranks) -> str:
    """What went wrong when ONNX Runtime returned arrays of other ranks than PyTensor's."""
    wrong = [
        f"{value.name}: rank {result.ndim} {result.shape}, PyTensor's rank {rank}"
        for value, result, rank in zip(model.graph.outputs, results, ranks)
        if result.ndim != rank
    ]
    return (
        "ONNX Runtime returned outputs of other ranks than PyTensor's ("
        + "; ".join(wrong)
        + "): a bug in a translation, please report it with the model "
        "(pt_onnxscript.export_onnx(function, path))."
    )


def _converted(value, dtype: np.dtype | None):
    """`value` as the model's input takes it: an array of `dtype` (what PyTensor's checks of
    the arguments give, unless the function trusts its input), or for None a random
    generator's state."""
    return state_from_generator(value) if dtype is None else np.asarray(value, dtype=dtype)


# Shared values of at most this many elements are baked into mode "ONNX"'s model (see
# _Runner), since each call compares their bytes with the baked ones: conv
# kernels, biases and small dense layers, where ONNX Runtime gains most from constant weights
# (the digits CNN runs 2x faster with its kernel pre-packed); a dense layer's pre-packed
# MatMul gains less than comparing a large matrix costs.
BAKED_ELEMENTS = 4096
RESPECIALISATIONS = 3


@dataclass
class _Specialised:
    """A session for the model specialised on some shared values: the input cells fed (by the
    model's input names, with their dtypes, None for a random state), the baked cells' shapes
    and bytes (the same bit for bit: NaN is NaN, -0.0 is not 0.0), the fixed cells' shapes
    and the Prints it runs."""

    model: ir.Model
    run: Callable  # run(feeds, run_options) -> results
    checks: dict
    feeds: list[tuple[str, list, np.dtype | None]]
    baked: list[tuple[list, tuple[int, ...], bytes]]
    shapes: list[tuple[list, tuple[int, ...]]]
    sparse: list[tuple[list, tuple]]  # the sparse cells baked, and their _sparse_bytes
    prints: list  # the Print Ops whose values the model outputs after fgraph's outputs

    def holds(self) -> bool:
        """Whether the cells hold the values and shapes the model was specialised on."""
        for cell, shape in self.shapes:
            if np.shape(cell[0]) != shape:
                return False
        for cell, data in self.sparse:
            if _sparse_bytes(cell[0]) != data:
                return False
        for cell, shape, data in self.baked:
            value = cell[0]  # a shared variable's container holds its dtype
            if type(value) is not np.ndarray or value.shape != shape or value.tobytes() != data:
                return False
        return True


def _sparse_bytes(value) -> tuple:
    """A SciPy sparse matrix as what its products read: format, shape and stored entries in
    storage order, as bytes (a set_value of an equal matrix is the same). Checked at every
    call: a csr or csc matrix's own three arrays, copied as bytes, no conversion."""
    if value.format in ("csr", "csc", "bsr"):
        arrays = (value.data, value.indices, value.indptr)
    else:
        coo = value.tocoo(copy=False)
        arrays = (coo.row, coo.col, coo.data)
    return (value.format, value.shape, value.dtype.str, *(a.tobytes() for a in arrays))


def model_checks(model: ir.Model) -> dict[str, tuple[type[Exception], str]]:
    """The checks kept in `model` (see ``ops.common.failure_guard``), by node name."""
    from pt_onnxscript.ops.common import CHECK
    from pt_onnxscript.walk import all_nodes

    return {node.name: node.meta[CHECK] for node in all_nodes(model.graph) if CHECK in node.meta}


def raise_check(
    err: Exception, checks: dict[str, tuple[type[Exception], str]], model: ir.Model, feeds=None
):
    """Raise the check's own exception if ONNX Runtime's error `err` is a check failing; an
    ExecutionError naming the failing node of `model` and the `feeds` otherwise."""
    # The innermost failing node is named last (Loop and If bodies nest their errors).
    names = re.findall(r"Name:'(.*?)' Status Message", str(err), re.DOTALL)
    for name in reversed(names):
        if name in checks:
            exc_type, message = checks[name]
            raise exc_type(message) from err
    name = names[-1] if names else None
    node = None if name is None else _node_named(model, name)
    if node is not None and _OUT_OF_BOUNDS.search(str(err)) and _indexes(node):
        raise IndexOutOfBoundsError(_failure(err, model, name, node, feeds, INDEX_HINT)) from err
    raise ExecutionError(_failure(err, model, name, node, feeds)) from err


def _node_named(model: ir.Model, name: str) -> ir.Node | None:
    from pt_onnxscript.walk import all_nodes

    return next((n for n in all_nodes(model.graph) if n.name == name), None)


# PyTensor's indexing Ops, the ONNX operators they translate to, and ONNX Runtime's words for
# an index out of bounds in those (Gather, ScatterElements; GatherElements; GatherND;
# ScatterND).
_INDEXING_OPS = {
    "Subtensor",
    "IncSubtensor",
    "AdvancedSubtensor1",
    "AdvancedSubtensor",
    "AdvancedIncSubtensor1",
    "AdvancedIncSubtensor",
}
_INDEXING = {"Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND"}
_OUT_OF_BOUNDS = re.compile(
    r"out of data bounds|out of range value in index|invalid ind(?:ex|ice) found", re.IGNORECASE
)


def _indexes(node: ir.Node) -> bool:
    """Whether `node` is a Gather or Scatter of the translation of an indexing Op: the
    innermost scope of its name is the PyTensor node's ``<index>_<Op>`` (a Gather that fails
    in a linear-algebra translation on a non-square matrix is no index error: PyTensor raises
    a ValueError there)."""
    *scopes, _ = node.name.split("/")
    return (
        node.op_type in _INDEXING
        and bool(scopes)
        and re.sub(r"^\d+_", "", scopes[-1]) in _INDEXING_OPS
    )


# What an ExecutionError ends with: the way out.
RUN_HINT = (
    "If PyTensor's own modes fail on these inputs too, they do not fit the graph; if not, "
    "the translation is wrong: please report it with the model "
    "(pt_onnxscript.export_onnx(function, path))."
)
INDEX_HINT = (
    "An index is out of bounds for the axis it indexes (PyTensor's own modes raise an "
    "IndexError for it too): check the indices given."
)
# ONNX Runtime's source location, the C++ function and the failed assertion before its
# message: "void onnxruntime::BroadcastIterator::Init(ptrdiff_t, ptrdiff_t) axis == 1 ||
# axis == largest was false. Attempting to broadcast...".
_INTERNALS = re.compile(
    r"^(?:\S+\.(?:h|cc):\d+ )?(?:[\w:<>*&, ]*?onnxruntime::[\w:<>~]+\(.*?\)(?: const)? )?"
    r"(?:[^.]*? was false\. )?"
)


def _failure(
    err: Exception, model: ir.Model, name: str | None, node: ir.Node | None, feeds, hint=RUN_HINT
) -> str:
    """What went wrong, in the model's terms: the node `name` (`node`, where the model has
    it), the PyTensor node and user's line it was translated from, ONNX Runtime's own words
    (without its C++ source location, function and assertion) and the inputs' dtypes and
    shapes, then `hint`."""
    said = str(err).split("Status Message: ", 1)[-1].strip()
    said = _INTERNALS.sub("", said, count=1)
    lines = [f"ONNX Runtime failed running {model.graph.name or 'the model'}"]
    if name is not None:
        lines[0] = f"ONNX Runtime failed at node {name!r}"
        if node is not None:
            lines[0] += f" ({node.op_type})"
            for key, label in [
                ("pkg.pytensor.node", "PyTensor op"),
                ("pkg.pytensor.source", "built at"),
            ]:
                if key in node.metadata_props:
                    lines.append(f"  {label}: {node.metadata_props[key]}")
    lines.append(f"  ONNX Runtime said: {said}")
    if feeds:
        given = ", ".join(
            f"{key} {getattr(value, 'dtype', type(value).__name__)} {np.shape(value)}"
            for key, value in feeds.items()
        )
        lines.append(f"  inputs: {given}")
    lines.append(hint)
    return "\n".join(lines)


@contextmanager
def raising_checks(checks: dict[str, tuple[type[Exception], str]], model: ir.Model):
    """Turn ONNX Runtime's failure in a check's node into the check's own exception, and
    others into an ExecutionError on `model`."""
    try:
        yield
    except TranslationError:
        raise  # the full check's: already explained
    except Exception as err:  # noqa: BLE001  (a check's own exception, or explained)
        raise_check(err, checks, model)


# Protobuf cannot serialize a message of 2 GiB or more; past this many bytes of tensors,
# they go to a data file beside the model.
EXTERNAL_DATA_BYTES = 2**31 - 2**26


def tensor_bytes(model: ir.Model) -> int:
    """The bytes of the model's initializers."""
    values = model.graph.initializers.values()
    return sum(v.const_value.nbytes for v in values if v.const_value is not None)


def inference_session(
    model: ir.Model,
    providers=("CPUExecutionProvider",),
    threads: int | None = None,
    check: bool = False,
):
    """An ONNX Runtime session for `model` (through a temporary file with external data
    when its tensors pass 2 GB), running each node on `threads` threads (None: ONNX Runtime's
    default, one per core); with `check`, after ONNX's full check of the model, as
    export_onnx's (see full_check)."""
    import onnx_ir as ir
    import onnxruntime as ort

    options = session_options(threads)
    options.log_severity_level = 4  # failures are raised, not logged
    if tensor_bytes(model) <= EXTERNAL_DATA_BYTES:
        proto = ir.serde.serialize_model(model)
        if check:
            full_check(proto)
        return ort.InferenceSession(
            proto.SerializeToString(), sess_options=options, providers=list(providers)
        )
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        ir.save(model, path, external_data="model.onnx.data")
        if check:
            full_check(path)
        return ort.InferenceSession(path, sess_options=options, providers=list(providers))


def session_options(threads: int | None = None):
    """ONNX Runtime's session options for `threads` threads per node; None: one per core (its
    default), whose pool's threads sleep between nodes instead of spinning. Measured with
    two cores (`benchmarks/threads.py`, wall / CPU us per call): a small MLP at batch 1 12 /
    12 on one thread, 13 / 25 with the spinning pool, 10 / 10 with the sleeping one; at batch
    64 25 / 25, 28 / 49, 35 / 41; a 1000 x 1000 MatMul 50 / 50 ms on one thread, 25 / 50 ms
    with either pool. So the sleeping pool costs about one thread's CPU where a graph is
    small, runs large nodes on every core, and leaves the CPU to the rest of the process
    between calls (a spinning pool keeps spinning after a call returns)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads is None:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    else:
        options.intra_op_num_threads = threads
    return options


def full_check(model) -> None:
    """ONNX's full check (the checker and strict shape inference) of mode "ONNX"'s model, a
    ModelProto or a file: values whose shapes contradict each other are a translation's bug
    (a scripted function typed a vector as a scalar, say) that ONNX Runtime may run and
    answer wrongly."""
    import onnx

    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise TranslationError(
            f'The model of mode "ONNX" fails ONNX\'s full check: a bug in a translation, '
            f"unless the shared variables' values do not fit the graph (PyTensor's own modes "
            f"fail on them too). Please report it with the graph "
            f"(pt_onnxscript.export_onnx(function, path)). {type(err).__name__}: {err}"
        ) from err


def session_runner(
    model: ir.Model,
    providers=("CPUExecutionProvider",),
    threads: int | None = None,
    check: bool = False,
) -> Callable:
    """``run(feeds, run_options) -> results`` on a new session for `model` (see
    inference_session), for feeds named as the model's inputs: ONNX Runtime's own binding,
    without InferenceSession.run's Python checks of the feeds' names and its retry on
    another execution provider (a failure is raised): ~3 us of a call."""
    session = inference_session(model, providers, threads, check)
    return partial(session._sess.run, [value.name for value in model.graph.outputs])


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
    `threads`: ONNX Runtime's threads per node, by default one per core, sleeping between
    nodes: `session_options`)."""
    return Mode(
        linker=ONNXLinker(opset=opset, optimize=optimize, threads=threads),
        optimizer=RewriteDatabaseQuery(include=["fast_run"]),
    )
