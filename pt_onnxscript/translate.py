"""The graph walker: PyTensor FunctionGraph -> ONNX model through onnxscript's GraphBuilder."""

import functools
import gc
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import onnx
import onnx_ir as ir
from onnxscript import GraphBuilder
from onnxscript._internal import param_manipulation
from pytensor.compile.builders import OpFromGraph
from pytensor.graph.basic import Apply, Constant, Variable
from pytensor.graph.fg import FunctionGraph
from pytensor.ifelse import IfElse
from pytensor.scalar.basic import ScalarOp, ScalarType
from pytensor.tensor.basic import constant as pt_constant
from pytensor.tensor.blockwise import Blockwise
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.type import TensorType

from pt_onnxscript.errors import (
    TranslationError,
    UnsupportedOpError,
    UnsupportedTypeError,
    __version__,
)
from pt_onnxscript.inference import InferenceCache
from pt_onnxscript.inference import key as inference_key
from pt_onnxscript.naming import canonical_results, drop_onnxscript_notes, names_by_position
from pt_onnxscript.opsets import DEFAULT_OPSET, check_opset, min_ir_version
from pt_onnxscript.optimize import guard_against_runtime_rewrites
from pt_onnxscript.optimize import optimize as optimize_model
from pt_onnxscript.registry import (
    blockwise_translation_for,
    check_for,
    scalar_translation_for,
    translated_as_inner_graph,
    translation_for,
)
from pt_onnxscript.scripted import inline_functions
from pt_onnxscript.types import (
    Dim,
    as_ir_tensor,
    io_type,
    is_sparse,
    is_xtensor,
    onnx_dtype,
    sparse_problem,
    value_shape,
    variable_problem,
)
from pt_onnxscript.walk import all_nodes


class StaticValue:
    """A node's result that is no ONNX value but what its clients' translations read at
    export: the bounds of a slice (MakeSlice), the builder of an IfElse branch."""


# What the walker binds to a PyTensor variable: an ONNX value, a static value, or None (no
# value: a variable nothing reads, like a random generator's update).
Value = ir.Value | StaticValue | None


class _Builder(GraphBuilder):
    """GraphBuilder of a model's graphs (the main graph and, with the main graph's builder as
    parent, its Loop bodies and If branches), caching the main graph's constants, the
    signatures of the operator schemas it calls and its nodes' type and shape inference.

    GraphBuilder rebuilds a schema's OpSignature at every call (~90 us) and runs ONNX's
    inference on each new node (~150 us); both are the same for the many nodes of a graph
    that repeat an operator on the same types and shapes.
    """

    def __init__(self, graph: ir.Graph, parent: "_Builder | None" = None):
        super().__init__(graph, parent=parent)
        if parent is None:
            # The initializers of PyTensor's constants, by value and by constant.
            self.pytensor_constants: dict[tuple, ir.Value] = {}
            self.constants_seen: dict[int, tuple[Constant, ir.Value]] = {}
            self.inferred = InferenceCache()
            # By id: what translations find once per inner graph (ops.scalar.basic.composite).
            self.inner_graphs: dict[int, tuple] = {}
            # By id: the inner Sigmoid nodes of those graphs that share their parts with
            # another Sigmoid or a Softplus (ops.scalar.math.shared_logistic).
            self.shared_logistic: set[int] = set()
            # The ONNX values whose logistic parts (exp(-|w|), ...) a translation has built,
            # by the value they are (or guard: ops.common.unguarded).
            self.logistic_bases: dict = {}
            # The names of symbolic dims that name one dim of one graph input: two values
            # whose shapes carry such a name have the same size there (a name the user gave
            # to dims of several inputs only says they should).
            self.input_dim_names: frozenset[str] = frozenset()
            # PyTensor's shape inference of the main graph (its ShapeFeature's shape_of):
            # variables whose dim there is one variable have one size (ops.common.same_dim).
            self.shape_of: Mapping[Variable, tuple] = {}
            # The Prints of the main graph, (node, value), when the model's caller prints them
            # (ops.compile.print_); None when it does not.
            self.prints: list[tuple] | None = None
            # The sparse constants that inner graphs' inputs stand for (bind_sparse_constants).
            self.sparse_constants: dict[Variable, Constant] = {}

    def _constant_propagation(self, node: ir.Node) -> None:
        if node.op_type == "Constant":  # all GraphBuilder's propagation reads
            super()._constant_propagation(node)

    def _get_schema(self, op_type: str, domain: str, version: int | None):
        return None if version is None else _schema(op_type, domain, version)

    def _partition_inputs_attributes(self, schema, args, kwargs):
        if schema is None:
            return args, kwargs
        return param_manipulation.separate_input_attributes_from_arguments(
            _signature(schema.name, schema.domain, schema.since_version),
            list(args),
            kwargs,
            fill_defaults=False,
            allow_extra_args=False,
        )

    def _annotate_node(self, node: ir.Node) -> None:
        """The node's namespace (its PyTensor node's index and Op), what `_provenance` reads:
        GraphBuilder also notes the scopes' class and module lists, which
        `drop_onnxscript_notes` removed (~4 us a node, made and dropped)."""
        node.metadata_props["namespace"] = self._build_namespace()

    def _infer_shapes(self, node: ir.Node) -> None:
        key = inference_key(node, node.version)
        if key is not None and self.root.inferred.replay(node, key):
            return
        super()._infer_shapes(node)
        # The builder records a failed inference on the node, and then it is run again.
        if key is not None and _INFERENCE_ERROR not in node.metadata_props:
            self.root.inferred.record(node, key)

    def subgraph(self, trace_function, inputs, outputs, *, name="subgraph") -> ir.Graph:
        """GraphBuilder.subgraph (all inputs given), its body built by a _Builder."""
        graph = ir.Graph(
            inputs=list(inputs),
            outputs=[],
            nodes=[],
            opset_imports=dict(self.graph.opset_imports),
            name=name,
        )
        builder = _Builder(graph, parent=self)
        for module, class_name in self._scope_stack:
            builder.push_module(module, class_name)
        results = trace_function(builder.op, *inputs)
        results = list(results) if isinstance(results, Sequence) else [results]
        if len(results) != len(outputs):
            raise ValueError(
                f"{name} returned {len(results)} values for {len(outputs)} declared outputs"
            )
        for result, declared in zip(results, outputs, strict=True):
            if declared.name:
                result.name = declared.name
            if declared.type is not None:
                if result.type is not None and result.type != declared.type:
                    raise ValueError(
                        f"{name}'s output {declared.name!r} has type {result.type}, "
                        f"declared {declared.type}"
                    )
                result.type = declared.type
            if declared.shape is not None:
                result.merge_shapes(declared.shape)
        graph.outputs.extend(results)
        return graph


# Where onnxscript's builder records that inference failed on a node.
_INFERENCE_ERROR = "pkg.onnxscript.shape_inference_error"


@functools.cache
def _schema(op_type: str, domain: str, version: int) -> onnx.defs.OpSchema | None:
    """GraphBuilder's schema lookup (None where there is none), once per operator."""
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


@functools.cache
def _signature(op_type: str, domain: str, version: int) -> ir.schemas.OpSignature:
    return ir.schemas.OpSignature.from_op_schema(_schema(op_type, domain, version))


def _label(node: Apply) -> str:
    op = node.op
    if isinstance(op, Elemwise):
        return type(op.scalar_op).__name__
    return type(op).__name__


def _inner_nodes(op) -> list[Apply]:
    fgraph = getattr(op, "fgraph", None)
    return fgraph.toposort() if hasattr(fgraph, "toposort") else []


def _missing(node: Apply, scalar: bool = False, seen: dict | None = None) -> list:
    """What of `node` has no translation, or cannot be translated, as (name, node) pairs.
    `seen` holds the answers for scalar nodes (an Elemwise's), the same for each of the many
    Elemwise nodes of one scalar op and dtypes (their scalar nodes are one: `scalar_node`)."""
    op = node.op
    scalar = scalar or isinstance(op, ScalarOp)
    if scalar:
        found = scalar_translation_for(op) is not None
        name = f"Elemwise({type(op).__name__})"
    elif isinstance(op, Elemwise):
        inner = scalar_node(node)
        seen = {} if seen is None else seen
        if inner not in seen:
            seen[inner] = _missing(inner, True, seen)
        return seen[inner]
    elif isinstance(op, Blockwise):
        core = op.core_op
        found = blockwise_translation_for(core) is not None or translation_for(core) is not None
        name = f"Blockwise({type(core).__name__})"
    else:
        found = translation_for(op) is not None
        name = type(op).__name__
    if not found:
        core = type(op.core_op if isinstance(op, Blockwise) else op)
        hint = next((_HINTS[c.__name__] for c in core.__mro__ if c.__name__ in _HINTS), None)
        return [(f"{name} ({hint})" if hint else name, node)]
    check = check_for(op.core_op if isinstance(op, Blockwise) else op)
    # A core op's check reads a core node: its Op's attributes, its constants.
    problem = (
        None
        if check is None
        else check(blockwise_core_node(node) if isinstance(op, Blockwise) else node)
    )
    if problem:
        return [(f"{name}: {problem}", node)]
    if isinstance(op, OpFromGraph) and not translated_as_inner_graph(op):
        return []  # its own class's translation (AllocDiag, SolveSylvester): no inner graph
    # A Composite is PyTensor's fusion of elementwise ops, not the user's: no location.
    where = "" if isinstance(op, ScalarOp) else f", inside {_container(op)}"
    return [
        (f"{inner_name}{where}", inner_node)
        for inner in _inner_nodes(op)
        for inner_name, inner_node in _missing(inner, scalar, seen)
    ]


def blockwise_core_node(node: Apply) -> Apply:
    """The core op applied to dummy core inputs, except that a constant the same for the
    whole batch (its batch dims of length 1) stays that constant, which translations read
    (a sort's axis: the gradient of inv sorts LU pivots by a Blockwise ArgSort whose axis is
    the constant [[-1]])."""
    batch_ndim = node.op.batch_ndim(node)
    core_node = node.op._create_dummy_core_node(node.inputs)
    inputs = [
        pt_constant(var.data.reshape(var.data.shape[batch_ndim:]), dtype=var.type.dtype)
        if isinstance(var, Constant) and all(var.type.broadcastable[:batch_ndim])
        else dummy
        for var, dummy in zip(node.inputs, core_node.inputs, strict=True)
    ]
    if all(a is b for a, b in zip(inputs, core_node.inputs, strict=True)):
        return core_node
    return node.op.core_op.make_node(*inputs)


def _container(op) -> str:
    """How an unsupported op's enclosing inner graph is named: its class, and its name when
    it has one (a Scan's `name=`)."""
    name = getattr(op, "name", None)
    label = type(op).__name__
    return f"{label} {name!r}" if isinstance(name, str) and name and name != label else label


# What to do instead, for Ops users meet that have no translation.
_HINTS = {
    "Eig": "complex eigenvalues: ONNX Runtime has no complex dtypes; for a symmetric matrix "
    "use eigh; pt.linalg.schur(a) holds a real matrix's eigenvalues in T's 1 x 1 and 2 x 2 "
    "diagonal blocks",
    "QZ": "no ONNX translation yet: it needs a QZ-iteration eigensolver (solve_discrete_are, "
    "which PyTensor builds on it, translates without it)",
    "Fourier": "complex output: ONNX Runtime has no complex dtypes; use pt.fft.rfft, whose "
    "real and imaginary parts are a real axis",
    "FromFunctionOp": "it runs a Python function (as_op), which ONNX cannot: write the "
    "function with PyTensor Ops, or register a translation of it",
    "PdbBreakpoint": "a Python debugger breakpoint, which cannot stop ONNX Runtime: remove it "
    '(pytensor.printing.Print prints in mode "ONNX")',
    "Hyp2F1": "no ONNX translation yet (SciPy's hyp2f1 and its transformations)",
    # PyMC's (matched by name: translate.py does not import PyMC)
    "DifferentialEquation": "it runs SciPy's odeint in Python: write the solver's steps as a "
    "Scan (a Runge-Kutta step, say), which translates",
    "SimulatorRV": "it draws by calling a Python function, which ONNX cannot",
    **dict.fromkeys(
        ["MinimizeOp", "MinimizeScalarOp", "RootOp", "RootScalarOp"],
        "it runs SciPy's optimizer in Python: solve outside the model and feed the solution "
        "as an input",
    ),
}


def check_supported(nodes: Sequence[Apply], scalar: bool = False, variables=()) -> None:
    """Raise one UnsupportedOpError listing every Op of `nodes` that has no translation,
    after what is wrong with `variables` (`types.variable_problem`'s answers, None where
    nothing is): then it is an UnsupportedTypeError, also a TypeError."""
    seen: dict[Apply, list] = {}
    missing = [m for node in nodes for m in _missing(node, scalar, seen)]
    problems = list(dict.fromkeys(p for p in variables if p))
    if not missing and not problems:
        return
    counts = Counter(name for name, _ in missing)
    examples = {}
    for name, node in missing:
        examples.setdefault(name, node)
    lines = [f"  - {problem}" for problem in problems] + [
        f"  - {name} ({counts[name]} node{'s' if counts[name] > 1 else ''}), e.g. {examples[name]}"
        for name in counts
    ]
    error = UnsupportedTypeError if problems else UnsupportedOpError
    what = {
        (False, True): "Ops without an ONNX translation, or nodes they cannot translate",
        (True, False): "variables ONNX export cannot take",
        (True, True): "variables ONNX export cannot take, and Ops without an ONNX "
        "translation or nodes they cannot translate",
    }[bool(problems), bool(missing)]
    raise error(
        f"The graph has {what}:\n"
        + "\n".join(lines)
        + "\nRewrite the graph to avoid them, or register a translation with "
        "pt_onnxscript.register (docs/extending.md: Adding a translation)."
    )


def scalar_node(node: Apply) -> Apply:
    """The scalar Apply computing one element of Elemwise `node`."""
    types = tuple(var.type.dtype for var in node.inputs), tuple(o.type.dtype for o in node.outputs)
    return _scalar_node(node.op.scalar_op, *types)


@functools.lru_cache(maxsize=4096)
def _scalar_node(scalar_op: ScalarOp, dtypes: tuple[str, ...], _out_dtypes) -> Apply:
    # One per scalar op and input and output dtypes (the output's can depend on floatX when
    # the node was made): making PyTensor variables records a stack trace each (~35 us),
    # and a graph repeats its few elementwise ops many times. Translations only read it.
    return scalar_op.make_node(*(ScalarType(dtype)() for dtype in dtypes))


def constant_value(g, var: Constant) -> ir.Value | None:
    """The ONNX initializer holding constant `var` (None for non-tensor constants and sparse
    ones, which their Ops' translations read; an xtensor's is its array: a graph output that
    folded to a constant is one)."""
    if not isinstance(var.type, TensorType | ScalarType) and not is_xtensor(var):
        return None
    if is_sparse(var):
        return None
    root = g.builder.root
    seen = root.constants_seen.get(id(var))
    if seen is not None:
        return seen[1]
    array = np.asarray(var.data, dtype=var.type.dtype)
    key = (array.dtype.str, array.shape, array.tobytes())
    cache = root.pytensor_constants
    if key not in cache:
        # A named constant (a baked shared variable, say) keeps its name where it is free.
        graph = root.graph
        free = var.name and var.name not in graph.initializers
        if free and all(value.name != var.name for value in graph.inputs):
            name = var.name
        else:
            name = f"const{len(cache)}" + (f"_{var.name}" if var.name else "")
        cache[key] = root.initializer(as_ir_tensor(array, var.type.dtype, name), qualify=False)
    root.constants_seen[id(var)] = (var, cache[key])  # `var` kept alive: its id stays its own
    return cache[key]


def translate_node(g, node: Apply, inputs: Sequence[Value], scalar: bool = False) -> list[Value]:
    """Translate one node; returns the list of its output values.

    A translation returns its node's one output, or a sequence of its outputs (of any length,
    one included)."""
    scalar = scalar or isinstance(node.op, ScalarOp)  # a scalar op outside Elemwise, on 0-d
    translation = (scalar_translation_for if scalar else translation_for)(node.op)
    if translation is None:
        check_supported([node], scalar)
    try:
        result = translation(g, node, *inputs)
    except (UnsupportedOpError, TranslationError):
        raise
    except Exception as err:
        raise TranslationError(f"Translating {node} failed: {err}") from err
    single = result is None or isinstance(result, ir.Value | StaticValue)
    outputs = [result] if single else list(result)
    if len(outputs) != len(node.outputs):
        raise TranslationError(
            f"The translation of {node} returned {len(outputs)} values for "
            f"{len(node.outputs)} outputs"
        )
    for var, value in zip(node.outputs, outputs, strict=True):
        expected = getattr(var.type, "dtype", None)
        if (
            isinstance(value, ir.Value)
            and value.dtype is not None
            and expected in _CHECKED_DTYPES
            and value.dtype != onnx_dtype(expected)
        ):
            raise TranslationError(
                f"The translation of {node} gives {value.dtype} where PyTensor gives {expected}"
            )
    return outputs


_CHECKED_DTYPES = frozenset(
    ["bool", "float16", "float32", "float64"]
    + [f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)]
)


def translate_graph(
    g,
    nodes: Sequence[Apply],
    values: dict[Variable, Value],
    scalar: bool = False,
    outputs: Sequence[Variable] = (),
    branches: dict | None = None,
) -> dict[Variable, Value]:
    """Translate `nodes` in order, binding each output in `values` (inputs already bound).

    Composite, OpFromGraph and IfElse inner graphs are walked through this same function.
    The nodes only one branch of an IfElse needs are translated inside that branch: the
    IfElse translation receives, for each branch, a function that builds them and returns
    the branch's values.
    """
    builder = g.builder
    if branches is None:
        branches = {} if scalar else _branch_nodes(nodes, outputs)
        owned = {n for pair in branches.values() for branch in pair for n in branch}
    else:  # `nodes` are the nodes of a branch
        owned = set()
    for index, node in enumerate(nodes):
        if node in owned:
            continue
        if isinstance(node.op, IfElse) and not scalar:
            inputs = [value_of(g, values, node.inputs[0])] + [
                Branch(values, node, b, branches) for b in (0, 1)
            ]
        else:
            inputs = [value_of(g, values, var) for var in node.inputs]
        builder.push_module(f"{index}_{_label(node)}", class_name=str(node.op))
        try:
            results = translate_node(g, node, inputs, scalar)
        finally:
            builder.pop_module()
        values.update(zip(node.outputs, results, strict=True))
    return values


def value_of(g, values: Mapping[Variable, Value], var: Variable) -> Value:
    """The value `values` binds to `var`, or the initializer of constant `var`."""
    return values[var] if var in values else constant_value(g, var)


class Branch(StaticValue):
    """Builds branch `branch` of IfElse `node` into the graph of a builder ``g``: ``build(g)``
    translates the nodes only that branch needs and returns the branch's values."""

    def __init__(self, values, node: Apply, branch: int, branches: dict):
        self.values, self.node, self.branch, self.branches = values, node, branch, branches

    def __call__(self, g) -> list[Value]:
        n = self.node.op.n_outs
        branch_vars = self.node.inputs[1 + self.branch * n : 1 + (self.branch + 1) * n]
        inner = dict(self.values)
        nodes = self.branches.get(self.node, ([], []))[self.branch]
        translate_graph(g, nodes, inner, branches=self.branches)
        return [value_of(g, inner, var) for var in branch_vars]


def _branch_nodes(nodes: Sequence[Apply], outputs: Sequence[Variable]) -> dict:
    """For each IfElse, the nodes (in order) whose results only its then or else branch uses.

    A node the branches of several IfElses use goes to the innermost branch that holds them
    all (both branches of an IfElse in a branch of another: that branch), or stays out."""
    clients: dict[Variable, list[tuple[Apply, int]]] = {}
    for node in nodes:
        for i, var in enumerate(node.inputs):
            clients.setdefault(var, []).append((node, i))
    owner: dict[Apply, tuple[Apply, int]] = {}

    def enclosing(place) -> list:
        """The branches holding `place` (an (IfElse, branch) pair), outermost first."""
        path = []
        while place is not None:
            path.append(place)
            place = owner.get(place[0])
        return path[::-1]

    for node in reversed(nodes):
        owners = set()
        for var in node.outputs:
            if var in outputs:
                owners.add(None)
            for client, i in clients.get(var, []):
                if isinstance(client.op, IfElse) and i > 0:
                    owners.add((client, 0 if i <= client.op.n_outs else 1))
                else:
                    owners.add(owner.get(client))
        if not owners or None in owners:
            continue
        common = None
        for places in zip(*(enclosing(place) for place in owners)):
            if len(set(places)) > 1:
                break
            common = places[0]
        if common is not None:
            owner[node] = common
    branches: dict[Apply, tuple[list, list]] = {}
    for node in nodes:
        if node in owner:
            ifelse, branch = owner[node]
            branches.setdefault(ifelse, ([], []))[branch].append(node)
    return branches


def sparse_constant(g, var: Variable) -> Constant | None:
    """The sparse constant `var` is, or the one an inner graph's input `var` stands for (None
    if it stands for none: a sparse value not known at export)."""
    return var if isinstance(var, Constant) else g.builder.root.sparse_constants.get(var)


def bind_sparse_constants(g, inner_inputs, outer_inputs) -> None:
    """Note the sparse constants (ops/sparse.py reads their entries) that an inner graph's
    inputs stand for: a sparse outer input has no ONNX value to bind them to."""
    for inner, outer in zip(inner_inputs, outer_inputs, strict=True):
        if is_sparse(outer) and (constant := sparse_constant(g, outer)) is not None:
            g.builder.root.sparse_constants[inner] = constant


def translate_inner_graph(g, inner_inputs, inner_outputs, inner_nodes, outer_values, scalar=False):
    """Inline an inner graph: bind its inputs to `outer_values`, return its output values."""
    values = dict(zip(inner_inputs, outer_values, strict=True))
    translate_graph(g, inner_nodes, values, scalar, outputs=inner_outputs)
    return [value_of(g, values, var) for var in inner_outputs]


def rewrite_inner_graphs(nodes: Sequence[Apply]) -> None:
    """Give the inner graphs of Scan nodes (nested ones included) the rewrites of mode "ONNX",
    as the outer graph had: log(1 + x) becomes log1p(x) there too.

    They are rewritten in place, once per Op, as PyTensor's JAX and Numba backends do.
    """
    from pytensor.scan.op import Scan

    for node in nodes:
        op = node.op
        if isinstance(op, Scan) and not getattr(op, "_pt_onnxscript_rewritten", False):
            _rewrite(op.fgraph)
            op._pt_onnxscript_rewritten = True
            rewrite_inner_graphs(op.fgraph.toposort())


def rewritten_copy(fgraph: FunctionGraph) -> FunctionGraph:
    """A copy of `fgraph` with mode "ONNX"'s rewrites (for OpFromGraph's inner graph)."""
    fgraph = fgraph.clone()
    _rewrite(fgraph)
    return fgraph


def baked_copy(
    fgraph: FunctionGraph, values: Mapping[Variable, np.ndarray], *, as_variables: bool = False
) -> tuple[FunctionGraph, dict[Variable, np.ndarray]]:
    """A copy of `fgraph` whose inputs in `values` (baked shared variables) are constants,
    given mode "ONNX"'s rewrites again: what depends only on them (shapes, a kernel's size, a
    pooling's tiling, whole subexpressions) is known to PyTensor's rewrites and folds away.

    Returns the copy and `values` keyed by the copy's inputs, which nothing reads any more.
    With `as_variables` (mode "ONNX", where baking is the linker's business and must not
    change what the function does), a value of length 1 where its variable's type allows
    any length stays an input, baked as an initializer (`_length_one_of_any_length`).
    A compiled graph may hold in-place Ops, which some rewrites cannot rebuild on constants:
    those rewrites are skipped, as PyTensor skips a failing rewrite (the translation of an
    in-place Op is the same pure function). PyTensor's constant folding runs an Op on its
    constant inputs' own arrays, and the copy's in-place Ops (an update t + 1 of a shared t, a
    Cholesky overwriting its matrix) would write into what other nodes read and into the
    shared variables' own arrays: the copy is folded by rewrites.constant_folding_on_copies
    instead, and its constants are read-only views of the values, which nothing writes into.
    """
    from pytensor import config

    copy, equiv = fgraph.clone_get_equiv(check_integrity=False, attach_feature=False)
    replacements = [
        (equiv[var], _baked_constant(var, value))
        for var, value in values.items()
        if not (as_variables and _length_one_of_any_length(var, value))
    ]
    copy.replace_all(replacements, reason="pt_onnxscript: shared variables baked")
    with config.change_flags(on_opt_error="ignore"):
        _rewrite(copy)
    return copy, {equiv[var]: value for var, value in values.items()}


def _length_one_of_any_length(var: Variable, value) -> bool:
    """Whether `value` has length 1 in a dim where `var`'s type allows any length: as a
    constant it would broadcast there (PyTensor types a constant, and what its folding makes
    of one, by its value), where PyTensor refuses to broadcast the variable at run time."""
    if is_sparse(var) or not isinstance(var.type, TensorType):
        return False
    return any(
        size is None and length == 1
        for size, length in zip(var.type.shape, np.shape(value), strict=False)
    )


def _baked_constant(var: Variable, value) -> Constant:
    """The constant that stands for shared variable `var` holding `value`."""
    from pytensor.tensor import constant as tensor_constant

    if is_sparse(var):  # a SciPy sparse matrix, which ops/sparse.py reads
        from pytensor.sparse import as_sparse_variable

        return as_sparse_variable(value.astype(var.type.dtype), name=var.name)
    return tensor_constant(_read_only(value, var.type.dtype), name=var.name)


def _read_only(value, dtype: str) -> np.ndarray:
    """`value` as an array of `dtype` that nothing can write through (a view: no copy)."""
    view = np.asarray(value, dtype=dtype).view()
    view.flags.writeable = False
    return view


def _rewrite(fgraph: FunctionGraph) -> None:
    """Apply mode "ONNX"'s rewrites to `fgraph`, in place, with constant folding on copies
    (rewrites.constant_folding_on_copies, see baked_copy) in place of PyTensor's: what is
    rewritten here again may hold in-place Ops and fused reductions (a compiled graph, a
    Scan's inner graph its C linker compiled) that meet new constants (baked shared
    variables, which Scan's rewrites push into and out of its loop). Scan's
    scan_push_out_add is left out: it asserts that an Add of a step's carried value and a
    Dot has two inputs, and a rewritten graph's Adds have more (Add(Dot, Dot, h) stopped
    the export of a compiled RNN's gradient with an AssertionError)."""
    from pytensor.compile import optdb

    from pt_onnxscript.linker import onnx_rewrites  # the linker imports this module

    query = (
        onnx_rewrites()
        .including("onnx_folding")
        .excluding("topo_constant_folding", "constant_folding_for_scan2", "scan_push_out_add")
    )
    optdb.query(query)(fgraph)


def _unique(name: str, taken: set[str]) -> str:
    candidate, suffix = name, 1
    while candidate in taken:
        candidate = f"{name}_{suffix}"
        suffix += 1
    taken.add(candidate)
    return candidate


@contextmanager
def no_cyclic_gc():
    """Python's cyclic garbage collector paused: an export makes millions of objects that
    live until it ends (PyTensor and onnx-ir nodes, values, shapes), and each full collection
    walks all of them; an export of 10,000 nodes spent a quarter of its time collecting. What
    it leaves for the collector is collected once it resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# The key of the Print Ops whose values a model outputs for its caller to print, in its
# graph's meta.
PRINTS = "pytensor_prints"


@no_cyclic_gc()
def fgraph_to_model(
    fgraph: FunctionGraph,
    *,
    opset: int = DEFAULT_OPSET,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    dims: Mapping[str, Sequence[Dim]] | None = None,
    baked: Mapping[Variable, np.ndarray] | None = None,
    fixed_shapes: Mapping[Variable, Sequence[int]] | None = None,
    name: str = "pytensor_graph",
    optimize: bool = True,
    prints: bool = False,
) -> ir.Model:
    """Translate `fgraph` into an ONNX model.

    With `optimize` (the default), onnxscript's optimizer folds constants, simplifies shape
    bookkeeping and removes common subexpressions and dead values, keeping every value exact
    (pt_onnxscript.optimize); turn it off to see the translations' own nodes.

    `baked` maps fgraph inputs to values stored as initializers instead of graph inputs;
    `dims` maps input names to the names or sizes of their unknown dims, `fixed_shapes`
    fgraph inputs to their sizes.

    With `prints`, the caller prints: the values of the main graph's Print nodes are further
    outputs ``print_<i>`` after fgraph's, their Ops in ``model.graph.meta[PRINTS]``, in
    order (ops.compile.print_).
    """
    check_opset(opset)
    baked, fixed_shapes = baked or {}, fixed_shapes or {}
    # Baked into the graph as constants: inputs that nothing reads are no inputs of the model.
    unread = {var for var in baked if not fgraph.clients.get(var) and var not in fgraph.outputs}
    nodes = fgraph.toposort()
    rewrite_inner_graphs(nodes)
    # Everything that cannot be translated, in one error: the graph's inputs and outputs of
    # other types, sparse values computed in it, Ops without a translation.
    variables = [
        variable_problem(var)
        for var in list(fgraph.inputs) + list(fgraph.outputs)
        if var not in unread
    ]
    variables += [sparse_problem(var) for node in nodes for var in node.outputs]
    check_supported(nodes, variables=variables)
    dims = dict(dims or {})

    taken: set[str] = set()
    if input_names is None:
        input_names = [var.name or f"input_{i}" for i, var in enumerate(fgraph.inputs)]
    input_names = [_unique(n, taken) for n in input_names]
    unknown = set(dims) - set(input_names)
    if unknown:
        raise ValueError(
            f"dims names inputs {sorted(unknown)}, but the graph's inputs are {input_names}"
        )

    graph = ir.Graph(inputs=[], outputs=[], nodes=[], opset_imports={"": opset}, name=name)
    builder = _Builder(graph)
    if prints:
        builder.prints = []
    g = builder.op
    values: dict[Variable, Value] = {}
    for var, var_name in zip(fgraph.inputs, input_names, strict=True):
        if var in unread:
            continue
        if var in baked:
            tensor = as_ir_tensor(baked[var], io_type(var)[0], var_name)
            values[var] = builder.initializer(tensor, var_name, qualify=False)
        else:
            shape = value_shape(var, fixed_shapes.get(var, dims.get(var_name)), var_name)
            values[var] = builder.input(var_name, onnx_dtype(io_type(var)[0]), shape)
    named = Counter(
        dim.value
        for value in graph.inputs
        for dim in value.shape
        if isinstance(dim, ir.SymbolicDim) and dim.value is not None
    )
    builder.input_dim_names = frozenset(name for name, count in named.items() if count == 1)
    shape_feature = getattr(fgraph, "shape_feature", None)
    if shape_feature is not None:
        builder.shape_of = shape_feature.shape_of

    translate_graph(g, nodes, values, outputs=fgraph.outputs)

    if output_names is None:
        output_names = [f"output_{i}" for i in range(len(fgraph.outputs))]
    printed = builder.prints or []
    outputs = [(var, value_of(g, values, var)) for var in fgraph.outputs]
    outputs += [(node.inputs[0], value) for node, value in printed]
    output_names = [*output_names, *(f"print_{i}" for i in range(len(printed)))]
    # An output PyTensor folded to a constant can share its name with the constant's
    # initializer (``pt.var`` of one value is the constant 0 named "var"): the initializer,
    # whose name is the package's own, gives way. Baked inputs keep their names.
    constants = {value.name: value for value in builder.pytensor_constants.values()}
    for out_name in output_names:
        if out_name in constants:
            constants[out_name].name = _unique(f"const_{out_name}", set(graph.initializers))
    taken |= set(graph.initializers)
    used: set[int] = set()
    for (var, value), out_name in zip(outputs, output_names, strict=True):
        if value.producer() is None or id(value) in used:
            value = g.Identity(value)
        used.add(id(value))
        _set_output_type(value, var)
        builder.add_output(value, _unique(out_name, taken))
    graph.meta[PRINTS] = [node.op for node, _ in printed]
    for value in builder.pytensor_constants.values():
        if not value.uses() and not value.is_graph_output():
            graph.initializers.pop(value.name)

    model = ir.Model(
        graph,
        ir_version=min_ir_version(opset),
        producer_name="pt_onnxscript",
        producer_version=__version__,
        functions=list(builder.functions.values()),
    )
    inline_functions(model, opset)
    named = set(graph.initializers)  # baked inputs and PyTensor's constants
    if optimize:
        optimize_model(model)
    guard_against_runtime_rewrites(model)
    drop_onnxscript_notes(graph)
    canonical_results(graph)
    names_by_position(graph, named)
    _provenance(model, nodes, [var for var, _ in outputs])
    return model


def _provenance(model: ir.Model, nodes: Sequence[Apply], outputs: Sequence[Variable]) -> None:
    """What Netron and other readers show: the model's doc_string and metadata (versions,
    the PyTensor variable each of the graph's `outputs` stands for), and on each
    node the PyTensor node it translates (``pkg.pytensor.node``) and the user's source line
    that built it where PyTensor's tag has one (``pkg.pytensor.source``). A node's PyTensor
    node is found from the leading ``<index>_<Op>`` of the namespace the builder gave it."""
    import json

    import pytensor

    graph = model.graph
    inputs = [value.name for value in graph.inputs]
    output_names = [value.name for value in graph.outputs]
    model.doc_string = (
        f"PyTensor graph ({len(nodes)} nodes) exported by pt_onnxscript {__version__} from "
        f"PyTensor {pytensor.__version__}: inputs {', '.join(inputs) or '(none)'}; outputs "
        f"{', '.join(output_names)}."
    )
    model.metadata_props["pt_onnxscript.version"] = __version__
    model.metadata_props["pytensor.version"] = pytensor.__version__
    model.metadata_props["pytensor.outputs"] = json.dumps(
        {name: str(var) for name, var in zip(output_names, outputs, strict=True)}
    )
    notes: dict[int, dict[str, str]] = {}  # by PyTensor node: the many ONNX nodes of one
    for node in all_nodes(graph):
        namespace = node.metadata_props.get("namespace", "")
        index = namespace.split("_", 1)[0]
        if not index.isdigit() or int(index) >= len(nodes):
            continue
        if int(index) not in notes:
            apply = nodes[int(index)]
            source = _source_line(apply)
            notes[int(index)] = {"pkg.pytensor.node": str(apply.op)} | (
                {"pkg.pytensor.source": source} if source else {}
            )
        node.metadata_props.update(notes[int(index)])


def _source_line(node: Apply) -> str | None:
    """The user's line that built `node`'s first output, from PyTensor's tag trace (a list of
    stack summaries, nested once more after rewrites copy them): ``file:line: code``."""
    trace = getattr(node.outputs[0].tag, "trace", None)
    while isinstance(trace, list) and trace and isinstance(trace[0], list):
        trace = trace[0]
    if not trace or not isinstance(trace[-1], tuple) or len(trace[-1]) < 4:
        return None
    filename, line, _, code = trace[-1][:4]
    if re.search(r"ipykernel_\d+[/\\]\d+\.py$", filename):
        filename = "<notebook cell>"  # IPython's temporary file for the cell: meaningless later
    return f"{filename}:{line}: {code}" if code else f"{filename}:{line}"


def _set_output_type(value: ir.Value, var: Variable) -> None:
    """Give graph output `value` the dtype and static dims PyTensor gives `var`, and the dims
    ONNX's inference found where PyTensor's are unknown. A rank or size that contradicts
    PyTensor's is a translation's bug, raised here: giving the output PyTensor's shape hid it
    from ONNX's full check, and mode "ONNX" returned arrays of the wrong shape."""
    dtype, static = io_type(var)
    inferred = value.shape
    if inferred is not None:
        contradicts = len(inferred) != len(static) or any(
            isinstance(d, int) and s is not None and d != s
            for s, d in zip(static, inferred.dims, strict=True)
        )
        if contradicts:
            raise TranslationError(
                f"The translation of {var} gives an ONNX value of shape {_dims(inferred.dims)} "
                f"where PyTensor's is {_dims(static)}: a bug in a translation, please report it "
                f"with the graph"
            )
        dims = [s if s is not None else d for s, d in zip(static, inferred.dims, strict=True)]
    else:
        dims = list(static)
    value.type = ir.TensorType(onnx_dtype(dtype))
    value.shape = ir.Shape(dims)


def _dims(dims) -> str:
    """Dims as users read them: sizes, dim names, and ? where unknown."""
    names = [str(d) if isinstance(d, int) else getattr(d, "value", None) or "?" for d in dims]
    return f"({', '.join(names)})"
