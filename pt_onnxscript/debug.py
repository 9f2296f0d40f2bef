"""Eager, node-by-node comparison of a PyTensor graph with its ONNX translation.

Every node is evaluated twice on the same input values, PyTensor's own values for that
node: once by PyTensor (its Python implementation) and once as a one-node ONNX model,
built by the exporter's walker and run eagerly on ONNX Runtime. Errors therefore never
accumulate, and the first node whose results differ is the node whose translation is wrong.

    report = find_divergence(([x], [y]), [x_value])  # or find_divergence(compiled_fn, ...)
    print(report)  # None when every node agrees

Rewrites fuse elementwise chains into one Composite node; to find the scalar op at fault
inside one, compare a function compiled without rewrites
(``pytensor.function(..., mode=Mode(linker="py", optimizer=None))``).
"""

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pytensor.compile import Function
from pytensor.compile.builders import OpFromGraph
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply, Constant, Variable
from pytensor.graph.fg import FunctionGraph
from pytensor.scalar import Composite
from pytensor.scan.op import Scan
from pytensor.tensor.basic import AllocEmpty, constant
from pytensor.tensor.elemwise import CAReduce, Elemwise
from pytensor.tensor.type import TensorType

from pt_onnxscript.export import as_function
from pt_onnxscript.linker import inference_session
from pt_onnxscript.ops.decompositions import SVD, Eigh, reads_lower
from pt_onnxscript.ops.math import unfused
from pt_onnxscript.testing import TOLERANCES, assert_same
from pt_onnxscript.translate import DEFAULT_OPSET, check_supported, fgraph_to_model


@dataclass
class NodeReport:
    """PyTensor's and ONNX Runtime's results for one node, evaluated on the same inputs."""

    index: int  # position of the node in topological order
    node: Apply
    inputs: list  # PyTensor's values of node.inputs
    expected: list  # PyTensor's results
    actual: list | None  # ONNX Runtime's results (None when not run)
    message: str | None = None  # why they differ (Divergence) or were not compared
    max_abs_diff: float | None = field(init=False)  # over numeric outputs of the right shape
    max_rel_diff: float | None = field(init=False)

    def __post_init__(self):
        self.max_abs_diff, self.max_rel_diff = _max_differences(self.actual, self.expected)

    def __str__(self) -> str:
        if isinstance(self, Divergence):
            status = f"differs: {self.message}"
        else:
            status = f"not compared: {self.message}" if self.message else "agrees"
        lines = [f"Node {self.index} {self.node}: ONNX {status}"]
        for i, (var, value) in enumerate(zip(self.node.inputs, self.inputs, strict=True)):
            lines.append(f"  input {i} ({var}): {_show(value)}")
        for i, value in enumerate(self.expected):
            lines.append(f"  PyTensor output {i}: {_show(value)}")
        for i, value in enumerate(self.actual or []):
            lines.append(f"  ONNX output {i}:     {_show(value)}")
        if isinstance(self, Divergence) and self.max_abs_diff is not None:
            lines.append(
                f"  max abs diff {self.max_abs_diff:.3g}, max rel diff {self.max_rel_diff:.3g}"
            )
        return "\n".join(lines)


class Divergence(NodeReport):
    """The report of a node whose ONNX translation does not reproduce PyTensor's results."""


def _max_differences(actual, expected) -> tuple[float | None, float | None]:
    diffs, rels = [], []
    for res, exp in zip(actual or (), expected, strict=False):
        res, exp = np.asarray(res), np.asarray(exp)
        if res.shape != exp.shape or not {res.dtype.kind, exp.dtype.kind} <= set("biuf"):
            continue
        a, e = res.astype(np.float64), exp.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            diff = np.where((a == e) | (np.isnan(a) & np.isnan(e)), 0.0, np.abs(a - e))
            diff = np.where(np.isnan(diff), np.inf, diff)  # NaN on one side only
            diffs.append(np.max(diff, initial=0.0))
            rels.append(np.max(np.where(diff == 0, 0.0, diff / np.abs(e)), initial=0.0))
    return (max(diffs), max(rels)) if diffs else (None, None)


def _show(value) -> str:
    if not isinstance(value, np.ndarray | np.generic):
        return repr(value)
    text = np.array2string(np.asarray(value), threshold=20, edgeitems=3)
    return f"{value.dtype} {value.shape} " + " ".join(text.split())


def compare_nodes(
    source,
    values: Sequence,
    *,
    opset: int = DEFAULT_OPSET,
    rtol: float | None = None,
    atol: float | None = None,
) -> list[NodeReport]:
    """Evaluate every node with PyTensor and with its ONNX translation; one report per node.

    `source` is a compiled ``pytensor.function`` (its own rewritten graph is compared, the
    graph ``export_onnx`` would export) or an ``(inputs, outputs)`` pair (rewritten as
    export does). `values` holds one value per explicit input; shared variables use their
    current values. `rtol`/`atol` override the per-dtype tolerances of float outputs.
    """
    fn = as_function(source, "compare_nodes")
    fgraph = fn.maker.fgraph
    nodes = fgraph.toposort()
    check_supported(nodes)
    env = _input_values(fn, values)
    reports = []
    for index, node in enumerate(nodes):
        inputs = _values(node.inputs, env)
        expected = _pytensor_results(node, inputs)
        env.update(zip(node.outputs, expected, strict=True))
        reports.append(_compare(index, node, inputs, expected, opset, rtol, atol))
    return reports


def find_divergence(
    source,
    values: Sequence,
    *,
    opset: int = DEFAULT_OPSET,
    rtol: float | None = None,
    atol: float | None = None,
) -> Divergence | None:
    """The first node, in topological order, whose ONNX translation differs from PyTensor.

    Takes the arguments of `compare_nodes`; returns None when every node agrees.
    """
    reports = compare_nodes(source, values, opset=opset, rtol=rtol, atol=atol)
    return next((r for r in reports if isinstance(r, Divergence)), None)


def _input_values(fn: Function, values: Sequence) -> dict[Variable, object]:
    specs = fn.maker.inputs
    explicit = [spec for spec in specs if not spec.shared]
    if len(values) != len(explicit):
        raise ValueError(
            f"Got {len(values)} values for {len(explicit)} inputs "
            f"({', '.join(str(spec.variable) for spec in explicit)})"
        )
    given = iter(values)
    return {
        var: spec.variable.get_value() if spec.shared else var.type.filter(next(given))
        for var, spec in zip(fn.maker.fgraph.inputs, specs, strict=True)
    }


def _pytensor_results(node: Apply, inputs: list) -> list:
    """`node` evaluated alone by PyTensor's Python implementation, on copies of `inputs`."""
    if isinstance(node.op, OpFromGraph):
        # Its inner graph may hold rewrites (inplace ones) that its perform cannot compile.
        return _evaluate_graph(node.op.fgraph, inputs)
    parts = unfused(node) if isinstance(node.op, CAReduce) else None
    if parts is not None:
        # PyTensor 2.38's C reduction fused with an Elemwise, whose Python implementation
        # skips the Elemwise on the first element reduced: its parts, one after the other.
        (value,) = inputs
        for part in parts:
            (value,) = _pytensor_results(part, [value])
        return [value]
    if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, Composite):
        return _composite_results(node, inputs)
    op = _runnable_scan(node.op) if isinstance(node.op, Scan) else node.op
    storage = {var: [copy.deepcopy(value)] for var, value in zip(node.inputs, inputs, strict=True)}
    computed = {var: [True] for var in node.inputs}
    for var in node.outputs:
        storage[var], computed[var] = [None], [False]
    op.make_thunk(node, storage, computed, [], impl="py")()
    return [storage[var][0] for var in node.outputs]


def _composite_results(node: Apply, inputs: list) -> list:
    """An Elemwise of a Composite (a fused elementwise loop of the C and Numba backends)
    evaluated as one Elemwise per scalar Op of its inner graph, each a NumPy ufunc over the
    arrays. Its Python implementation calls the scalar Ops on Python floats one element at
    a time, and PyTensor's reciprocal of a Python float is a float32 (np.float32(1.0) / x,
    under NumPy 2's promotion): PyMC's Exponential log-density, fused as -log(1 / x) by
    PyTensor 2.38, lost half its digits there, and its exact translation was reported."""
    composite = node.op.scalar_op
    tensors = dict(zip(composite.fgraph.inputs, node.inputs, strict=True))
    env = dict(zip(node.inputs, inputs, strict=True))
    ones = (1,) * node.outputs[0].ndim  # an inner constant, of the node's rank
    for inner in composite.fgraph.toposort():
        args = [
            tensors[var]
            if var in tensors
            else constant(np.full(ones, var.data, dtype=var.type.dtype))
            for var in inner.inputs
        ]
        part = Elemwise(inner.op).make_node(*args)
        env.update(zip(part.outputs, _pytensor_results(part, _values(part.inputs, env))))
        tensors.update(zip(inner.outputs, part.outputs, strict=True))
    shape = np.broadcast_shapes(*(np.shape(value) for value in inputs))
    return [
        np.array(np.broadcast_to(env[tensors[var]], shape), dtype=out.type.dtype)
        for var, out in zip(composite.fgraph.outputs, node.outputs, strict=True)
    ]


def _runnable_scan(op: Scan) -> Scan:
    """`op`, or a copy of it whose step PyTensor can compile: Scan compiles its step from its
    own inner graph on first use, refusing in-place Ops, and a compiled function's backend
    may have rewritten that graph without compiling it there (PyTensor's Numba backend, and
    3.0's C backend, leave in-place Ops in it). The copy's step is compiled from a copy of
    the inner graph, in-place Ops accepted (nested Scans likewise), by the C VM: its inner
    graph holds the C backend's fused reductions, whose Python implementation is wrong
    (ops.math.unfused)."""
    if getattr(op, "_fn", None) is not None:  # compiled by the function that holds it
        return op
    fgraph = op.fgraph.clone()
    for node in fgraph.toposort():
        if isinstance(node.op, Scan) and (inner := _runnable_scan(node.op)) is not node.op:
            fgraph.replace_all(
                zip(node.outputs, inner.make_node(*node.inputs).outputs, strict=True),
                reason="pt_onnxscript: a nested Scan's step compiled",
            )
    inputs, outputs = op.prepare_fgraph(fgraph)
    mode = Mode(linker="cvm", optimizer=None)
    options = {"mode": mode, "accept_inplace": True, "on_unused_input": "ignore"}
    if hasattr(mode, "function_maker"):  # PyTensor 3
        step = mode.function_maker(inputs, outputs, fgraph=fgraph, **options).create()
    else:  # PyTensor 2.38
        from pytensor.compile.function.pfunc import pfunc

        step = pfunc(inputs, outputs, fgraph=fgraph, **options)
    scan = copy.copy(op)
    scan._fn = step  # what Scan.fn compiles (and caches) on first use
    return scan


def _evaluate_graph(fgraph: FunctionGraph, inputs: list) -> list:
    env = dict(zip(fgraph.inputs, inputs, strict=True))
    for node in fgraph.toposort():
        results = _pytensor_results(node, _values(node.inputs, env))
        env.update(zip(node.outputs, results, strict=True))
    return _values(fgraph.outputs, env)


def _values(variables, env: dict) -> list:
    return [var.data if isinstance(var, Constant) else env[var] for var in variables]


def _compare(index, node, inputs, expected, opset, rtol, atol) -> NodeReport:
    if not all(isinstance(var.type, TensorType) for var in node.outputs):
        # A model cannot return a scalar; the node's consumers see its value as a constant.
        message = "a one-node ONNX model cannot return its non-tensor outputs"
        return NodeReport(index, node, inputs, expected, None, message)
    try:
        actual = _onnx_results(node, inputs, opset)
    except Exception as err:  # noqa: BLE001  (any failure of the ONNX side is the finding)
        return Divergence(index, node, inputs, expected, None, f"{type(err).__name__}: {err}")
    unspecified = isinstance(node.op, AllocEmpty)
    vectors = _vector_outputs(node)
    if vectors and (failure := _vector_invariants(node, inputs, actual)):
        return Divergence(index, node, inputs, expected, actual, failure)
    signs = []  # outputs equal but for the sign of some zeros
    for i, (res, exp) in enumerate(zip(actual, expected, strict=True)):
        if i in vectors:
            continue
        try:
            if unspecified:  # only the shape and dtype are AllocEmpty's
                res, exp = np.zeros_like(res), np.zeros_like(exp)
            what = f"output {i}"
            assert_same(res, exp, rtol=rtol, atol=atol, what=what, signed_zeros=False)
        except AssertionError as err:
            first = str(err).strip().splitlines()[0]  # the rest repeats the values
            message = first if first.startswith("output") else f"output {i}: {first}"
            return Divergence(index, node, inputs, expected, actual, message)
        try:
            assert_same(res, exp, rtol=rtol, atol=atol, what=what)
        except AssertionError:
            signs.append(i)
    notes = [UNSPECIFIED] if unspecified else []
    notes += [SIGNED_ZEROS.format(signs)] if signs else []
    notes += [VECTORS.format(list(vectors))] if vectors else []
    return NodeReport(index, node, inputs, expected, actual, "; ".join(notes) or None)


def _vector_outputs(node: Apply) -> tuple[int, ...]:
    """The outputs of `node` unique only up to sign (eigh's eigenvectors, svd's singular
    vectors; and to a rotation within a repeated eigenvalue's space), which the translation
    need not give as LAPACK does: compared by what any correct one satisfies."""
    core = getattr(node.op, "core_op", node.op)
    if isinstance(core, Eigh):
        return (1,)
    if isinstance(core, SVD) and core.compute_uv:
        return (0, 2)
    return ()


def _vector_invariants(node: Apply, inputs: list, actual: list) -> str | None:
    """Why ONNX's eigenvectors or singular vectors are wrong (a v - b v diag(w) or
    u diag(s) v^T - a relative to |a|, and their orthonormality, beyond rounding), or None."""
    core = getattr(node.op, "core_op", node.op)
    dtype = node.outputs[-1].type.dtype
    a, *b = (np.asarray(x, dtype=dtype) for x in inputs)  # b: PyTensor 3's eigh(a, b)
    if isinstance(core, Eigh):  # of the triangles it reads
        w, v = actual
        triangle, strict = (np.tril, -1) if reads_lower(core) else (np.triu, 1)
        a, *b = (triangle(m) + np.swapaxes(triangle(m, strict), -1, -2) for m in (a, *b))
        bv = b[0] @ v if b else v
        residuals = {"a v - b v diag(w)": a @ v - bv * w[..., None, :]}
        bases = {"v": (v, bv)}  # v^T b v = I
    else:
        u, s, vt = actual
        k = s.shape[-1]
        residuals = {"u diag(s) v^T - a": (u[..., :k] * s[..., None, :]) @ vt[..., :k, :] - a}
        bases = {"u": (u, u), "v": (np.swapaxes(vt, -1, -2),) * 2}
    tol = 10 * max(1, *a.shape[-2:]) * TOLERANCES[dtype][0]
    scale = max(float(np.max(np.abs(a), initial=0.0)), np.finfo(dtype).tiny)
    for name, residual in residuals.items():
        if not np.max(np.abs(residual), initial=0.0) <= tol * scale:  # NaN fails too
            return f"{name} is {np.max(np.abs(residual)):.3g}, |a| {scale:.3g}"
    for name, (basis, image) in bases.items():
        gram = np.swapaxes(basis, -1, -2) @ image
        error = np.max(np.abs(gram - np.eye(gram.shape[-1])), initial=0.0)
        if not error <= tol:
            return f"{name}^T {name} differs from the identity by {error:.3g}"
    return None


VECTORS = "outputs {} (vectors unique only up to sign) compared by their invariants"

# PyTensor's own implementations differ in the sign of a zero result: its Python max of
# [0.0, -0.0] and min of [-0.0, 0.0] are -0.0, its C and Numba ones 0.0 (ONNX Runtime's too);
# its Python alloc of -0.0 fills 0.0, the others -0.0. A sum of negative zeros is 0.0 in
# PyTensor, -0.0 in ONNX Runtime. Reported, not a divergence.
SIGNED_ZEROS = "outputs {} equal but for the sign of some zeros (0.0 against -0.0)"


# AllocEmpty (a Scan's output buffers, pt.empty) leaves its memory as it was: PyTensor's
# values are whatever it held, ONNX Runtime's zeros. Its consumers read PyTensor's.
UNSPECIFIED = "its values are unspecified (its shape and dtype agree)"


def _onnx_results(node: Apply, inputs: list, opset: int) -> list:
    """`node` alone as an ONNX model (the exporter's walker), run on ONNX Runtime."""
    graph_inputs, feeds, node_inputs = [], {}, []
    for var, value in zip(node.inputs, inputs, strict=True):
        if isinstance(var, Constant):
            node_inputs.append(var)
        elif isinstance(var.type, TensorType):
            fresh = var.type()
            graph_inputs.append(fresh)
            node_inputs.append(fresh)
            feeds[f"input_{len(feeds)}"] = np.asarray(value)
        else:  # a scalar or other non-tensor value is known here: make it a constant
            node_inputs.append(Constant(var.type, value))
    alone = node.clone_with_new_inputs(node_inputs)
    fgraph = FunctionGraph(graph_inputs, alone.outputs, clone=False)
    # A Print's value comes out after the node's outputs (prints=True), unprinted: the
    # reference (its perform) prints it.
    model = fgraph_to_model(fgraph, opset=opset, input_names=list(feeds), name="node", prints=True)
    return inference_session(model).run(None, feeds)[: len(alone.outputs)]
