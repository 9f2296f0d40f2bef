"""Deterministic files: a canonical order for the results of Loops and Ifs, then names by
position.

onnxscript 0.7 orders the values a scripted loop carries, and the values a scripted ``if``
assigns, as a Python set does, which depends on the hash seed; the order of everything else
the walker emits is fixed by the PyTensor graph. Sorting each Loop's carried values and each
If's results by name and numbering names in graph order makes the same PyTensor graph give
the same bytes in any process.
"""

import re

import onnx_ir as ir

from pt_onnxscript.walk import all_nodes

_NUMBERS = re.compile(r"_\d+(?=_|$)")


def _base(name: str | None) -> str:
    return _NUMBERS.sub("", name or "")


def canonical_results(graph: ir.Graph) -> None:
    """Order the carried values of every Loop and the results of every If (nested ones
    included) by their names in the body (the then branch)."""
    nodes = list(all_nodes(graph))
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Loop":
            body = node.attributes["body"].as_graph()
            count = len(node.inputs) - 2
            perm = sorted(range(count), key=lambda i: _base(body.inputs[2 + i].name))
            if perm == list(range(count)):
                continue
            inputs = list(node.inputs)
            for j, i in enumerate(perm):
                node.replace_input_with(2 + j, inputs[2 + i])
            body_inputs, body_outputs = list(body.inputs), list(body.outputs)
            body.inputs[2:] = [body_inputs[2 + i] for i in perm]
            body.outputs[1 : 1 + count] = [body_outputs[1 + i] for i in perm]
            _permute_outputs(node, perm)
        elif node.op_type == "If":
            branches = [node.attributes[b].as_graph() for b in ("then_branch", "else_branch")]
            count = len(node.outputs)
            perm = sorted(range(count), key=lambda i: _base(branches[0].outputs[i].name))
            if perm == list(range(count)):
                continue
            for branch in branches:
                outputs = list(branch.outputs)
                branch.outputs[:] = [outputs[i] for i in perm]
            _permute_outputs(node, perm)
    for owner in dict.fromkeys(node.graph for node in nodes):  # each graph that has nodes
        _sort_identity_runs(owner)


def _sort_identity_runs(graph: ir.Graph) -> None:
    """Order each run of consecutive Identity nodes, none reading another's output, by
    their outputs' (then inputs') names, and their own names likewise: a scripted loop body
    ends with an Identity per carried value, made in a hash-seed-dependent order (seen with
    optimize=False, which keeps them)."""
    nodes = list(graph)
    start = 0
    while start < len(nodes):
        run, made = [], set()
        while (
            start + len(run) < len(nodes)
            and (node := nodes[start + len(run)]).op_type == "Identity"
            and node.domain in ("", "ai.onnx")
            and node.inputs[0] not in made
        ):
            run.append(node)
            made.add(node.outputs[0])
        start += max(len(run), 1)
        if len(run) < 2:
            continue
        ordered = sorted(run, key=lambda n: (_base(n.outputs[0].name), _base(n.inputs[0].name)))
        # The nodes' own names follow the order they were made in: they go in order too,
        # within each PyTensor node's namespace (which says where a node comes from).
        for prefix in {_namespace(n) for n in run}:
            mine = [n for n in ordered if _namespace(n) == prefix]
            for node, name in zip(mine, sorted(n.name or "" for n in mine)):
                node.name = name
        if ordered != run:
            graph.remove(run)
            if start < len(nodes):
                graph.insert_before(nodes[start], ordered)
            else:
                graph.extend(ordered)


def _namespace(node: ir.Node) -> str:
    return (node.name or "").rpartition("/")[0]


def _permute_outputs(node: ir.Node, perm: list[int]) -> None:
    """Make output j of `node` carry what its output perm[j] did (for j < len(perm)): move
    its uses, graph-output places, name, type and shape there (all read before any is
    changed)."""
    count = len(perm)
    outputs = list(node.outputs)
    owner_outputs = node.graph.outputs
    uses = {i: list(outputs[i].uses()) for i in range(count)}
    places = {i: [p for p, v in enumerate(owner_outputs) if v is outputs[i]] for i in range(count)}
    meta = {i: (outputs[i].name, outputs[i].type, outputs[i].shape) for i in range(count)}
    for i in range(count):
        outputs[i].name = f"__canonical_{i}"
    for j, i in enumerate(perm):
        target = outputs[j]
        for user, index in uses[i]:
            user.replace_input_with(index, target)
        for place in places[i]:
            owner_outputs[place] = target
        _, target.type, target.shape = meta[i]
    for j, i in enumerate(perm):
        outputs[j].name = meta[i][0]


def drop_onnxscript_notes(graph: ir.Graph) -> None:
    """Remove the notes onnxscript leaves on values and nodes: its optimizer's (the set of
    names a constant was folded from, listed in a hash-seed-dependent order) and its
    builder's (a shape inference that could not run inside a scripted function's branch,
    naming values as they were before `canonical_results`). They mean nothing to a reader
    of the file, and files stay byte-identical, and smaller."""
    nodes = list(all_nodes(graph))
    values = [*graph.inputs, *graph.initializers.values()]
    for item in [*nodes, *(value for node in nodes for value in node.outputs), *values]:
        for key in [k for k in item.metadata_props if k.startswith("pkg.onnxscript.")]:
            del item.metadata_props[key]


def names_by_position(graph: ir.Graph, initializers: set[str] | None = None) -> None:
    """Name every node, and every value the graph does not expose, by its base name and its
    position in graph order. The graph's inputs and outputs keep their names, and so do the
    `initializers` named (all by default); the others are named by position too."""
    kept = {v.name for v in [*graph.inputs, *graph.outputs]}
    kept |= set(graph.initializers) if initializers is None else set(initializers)
    counts: dict[str, int] = {}

    def fresh(base: str) -> str:
        while True:
            counts[base] = counts.get(base, 0) + 1
            name = f"{base}_{counts[base]}"
            if name not in kept:
                return name

    renamed = [v for v in graph.initializers.values() if v.name not in kept]
    for i, value in enumerate(renamed):  # first out of the way of the new names
        value.name = f"__initializer_{i}"
    for value in renamed:
        value.name = fresh("const")

    def visit(g: ir.Graph, top: bool) -> None:
        if not top:
            for value in [*g.inputs, *g.outputs]:
                # A subgraph's own inputs; an output may be an outer value, such as a constant.
                if value.name not in kept and value.producer() is None and value.graph is g:
                    value.name = fresh(_base(value.name))
        for node in g:
            node.name = fresh(_base(node.name) or node.op_type)
            for value in node.outputs:
                if value.name not in kept:
                    value.name = fresh(_base(value.name) or "v")
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.TENSOR:
                    # Constant tensors may be shared with the scripted functions' own IR,
                    # which earlier models renamed: name them here too.
                    attr.value.name = node.outputs[0].name if node.outputs else None
                elif attr.type == ir.AttributeType.GRAPH:
                    visit(attr.as_graph(), False)
                elif attr.type == ir.AttributeType.GRAPHS:
                    for sub in attr.as_graphs():
                        visit(sub, False)

    visit(graph, True)
