"""Checks on the graph: edges, cycles, arity, fan-out, types, replay dataflow, reachability.

Each asks the analysis graph (``ctx.topology``) about users, ancestors and order; only
"graph" and "cycles" fill it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, get_args

from plangraph.compiler.context import Context, join_hints
from plangraph.compiler.topology import Topology, reachable
from plangraph.ir.refs import resource_ref_id
from plangraph.ir.types import (
    ANY,
    MULTI_AGENT_BATCH,
    RESULT,
    SAMPLE_BATCH,
    PortType,
    is_assignable,
    is_shard,
    shard_of,
    substitute,
    unify,
)
from plangraph.ops.registry import all_ops, close_matches
from plangraph.text import brief

if TYPE_CHECKING:
    import networkx as nx


def check_graph(ctx: Context) -> None:
    """Build the analysis graph; every input and the output name a node."""
    ctx.topology = Topology.build({nid: (n.op, n.inputs) for nid, n in ctx.plan.nodes.items()})
    ids = list(ctx.plan.nodes)
    for nid, node in ctx.plan.nodes.items():
        for i, src in enumerate(node.inputs):
            if src not in ctx.plan.nodes:
                ctx.report(
                    "PG111",
                    f"input {brief(src)} names no node of the plan",
                    node=nid,
                    pointer=f"/nodes/{nid}/inputs/{i}",
                    hint=f"nodes: {', '.join(ids)}",
                    suggestions=close_matches(src, [x for x in ids if x != nid]),
                )
    out = ctx.plan.output
    if out and out not in ctx.plan.nodes:
        ctx.report(
            "PG115",
            f"output {brief(out)} names no node of the plan",
            pointer="/output",
            hint="the output is the id of the node the driver pulls results from, usually "
            "the StandardMetricsReporting node",
            suggestions=close_matches(out, ids),
        )


def check_cycles(ctx: Context) -> None:
    """The graph is acyclic; each cycle is printed as a -> b -> a."""
    topo = ctx.topology
    topo.order = topo.kahn_order()
    if topo.is_acyclic():
        return
    # Only a plan with a cycle needs its strongly connected components (and networkx).
    import networkx as nx

    g = topo.graph
    rank = topo.rank
    cyclic: set[str] = set()
    for comp in sorted(nx.strongly_connected_components(g), key=lambda c: min(map(rank, c))):
        start = min(comp, key=rank)
        if len(comp) == 1 and not g.has_edge(start, start):
            continue
        cyclic |= comp
        cycle = _cycle_through(g.subgraph(comp), start, topo)
        text = " -> ".join([*cycle, cycle[0]])
        ctx.report(
            "PG120",
            f"cycle: {text}",
            node=start,
            pointer=f"/nodes/{start}/inputs",
            hint="a plan is a DAG: feed results back through a resource (e.g. a replay "
            "buffer) instead of an edge",
        )
    topo.cyclic = frozenset(cyclic)


def _cycle_through(g: nx.DiGraph, start: str, topo: Topology) -> list[str]:
    """A shortest cycle through ``start`` (data-flow direction), ties by declaration."""
    if g.has_edge(start, start):
        return [start]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for u in frontier:
            for v in topo.sort(g.successors(u)):
                if v == start:
                    path = [u]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1]
                if v not in prev:
                    prev[v] = u
                    nxt.append(v)
        frontier = nxt
    return [start]  # unreachable for a strongly connected component


def check_arity(ctx: Context) -> None:
    """Each node has as many inputs as its operator takes."""
    for nid, node in ctx.plan.nodes.items():
        sig = ctx.sigs.get(nid)
        if sig is None or sig.accepts_arity(len(node.inputs)):
            continue
        n = len(node.inputs)
        got = f"{n} ({', '.join(node.inputs)})" if n else "none"
        hint = None
        if sig.apply == "source":
            hint = f"{sig.name} is a source; remove its inputs"
        elif sig.variadic is not None:
            hint = f"{sig.name} merges {sig.min_inputs} or more streams; list them in inputs"
        ctx.report(
            "PG131",
            f"{sig.name} takes {sig.arity_text()}, got {got}",
            node=nid,
            pointer=f"/nodes/{nid}/inputs",
            hint=hint,
        )


def check_fan_out(ctx: Context) -> None:
    """A stream read by several nodes goes through a Duplicate (streams are consumed once)."""
    topo = ctx.topology
    # in the order the streams are first read (by declaration, then port): the order of
    # the reports
    read = dict.fromkeys(s for n in ctx.plan.nodes.values() for s in n.inputs if s in topo)
    for src in read:
        users = topo.users(src)
        sig = ctx.sigs.get(src)
        if len(users) < 2 or (sig is not None and sig.name == "Duplicate"):
            continue
        if src in topo.cyclic:
            continue  # the cycle is the problem to fix first (reported by "cycles")
        ctx.report(
            "PG153",
            f"{ctx.plan.nodes[src].op} output is consumed {len(users)} times "
            f"(by {', '.join(repr(u) for u in users)}); a stream can be consumed only once",
            node=src,
            pointer=f"/nodes/{src}",
            key=True,
            hint=f'insert a Duplicate node ("op": "Duplicate", "inputs": ["{src}"]) and '
            "let every consumer read it (Python: stream.duplicate(n))",
        )


def check_types(ctx: Context) -> None:
    """Infer every node's output type in topological order; each edge's type must fit."""
    topo = ctx.topology
    for nid in topo.topological_order():
        node = ctx.plan.nodes[nid]
        sig = ctx.sigs.get(nid)
        if nid in topo.cyclic:
            ctx.types[nid] = None
            ctx.input_types[nid] = tuple(None for _ in node.inputs)
            continue
        ins = tuple(ctx.types.get(src) if src in ctx.plan.nodes else None for src in node.inputs)
        ctx.input_types[nid] = ins
        if sig is None:
            ctx.types[nid] = None
            continue
        bindings: dict[str, PortType] = {}
        if sig.accepts_arity(len(ins)):
            for i, (src, t) in enumerate(zip(node.inputs, ins, strict=True)):
                actual = t if t is not None else ANY
                expected = sig.port_type(i)
                if is_shard(actual) != is_shard(expected) and not expected.var:
                    continue  # a shard into a driver port or back: check "shards" says which
                if not unify(expected, actual, bindings):
                    _mismatch(ctx, nid, i, src, actual, substitute(expected, bindings))
        params = ctx.params.get(nid)
        if sig.infer_output is not None and params is not None:
            known = [t if t is not None else ANY for t in ins]
            ctx.types[nid] = sig.infer_output(known, params)
        else:
            ctx.types[nid] = substitute(sig.output, bindings)
        if sig.apply == "source" and _multi_agent(ctx, nid):
            # The rollouts of a multi-agent worker set are per-policy batches.
            if ctx.types[nid] == SAMPLE_BATCH:
                ctx.types[nid] = MULTI_AGENT_BATCH
            elif ctx.types[nid] == shard_of(SAMPLE_BATCH):
                ctx.types[nid] = shard_of(MULTI_AGENT_BATCH)
        for src in node.inputs:
            if topo.has_edge(src, nid):
                topo.set_edge_type(src, nid, ctx.types.get(src))


def _multi_agent(ctx: Context, nid: str) -> bool:
    """Whether node ``nid`` reads a multi-agent worker set (its ``workers`` param)."""
    rid = resource_ref_id(getattr(ctx.params.get(nid), "workers", None))
    ws = ctx.res_params.get(rid) if rid is not None else None
    return bool(getattr(ws, "multi_agent", False))


def _mismatch(
    ctx: Context, nid: str, index: int, src: str, actual: PortType, expected: PortType
) -> None:
    sig = ctx.sigs[nid]
    assert sig is not None
    src_op = ctx.plan.nodes[src].op
    takers = [
        name
        for name, s in all_ops().items()
        if s.apply != "source"
        and (s.inputs or s.variadic is not None)
        and not s.port_type(0).free_vars()
        and not s.port_type(0).is_any
        and is_assignable(actual, s.port_type(0))
    ]
    hint = f"ops that take {actual}: {', '.join(takers)}" if takers else None
    if expected.is_list and is_assignable(actual, expected.args[0]):
        hint = f"group items first: insert a Batch(n) node between {brief(src)} and {brief(nid)}"
    elif actual.is_list and is_assignable(actual.args[0], expected):
        hint = f"insert a Flatten node between {brief(src)} and {brief(nid)}"
    hint = _gather_mode_hint(ctx, src, expected) or hint
    port = f"input {index}" if sig.variadic is not None or len(sig.inputs) > 1 else "input"
    ctx.report(
        "PG130",
        f"type mismatch on edge {brief(src)} -> {brief(nid)}: {src_op} {brief(src)} emits "
        f"{actual}, but {sig.name} {brief(nid)} {port} expects {expected}",
        node=nid,
        pointer=f"/nodes/{nid}/inputs/{index}",
        hint=hint,
    )


def _gather_mode_hint(ctx: Context, src: str, expected: PortType) -> str | None:
    """Where the mismatched edge leaves a ``GatherShards``, whose ``mode`` decides its
    item type (``T`` or ``list[T]``): the modes whose output the consumer takes, or None
    (``src`` is no GatherShards, or no mode fits)."""
    node, sig, params = ctx.plan.nodes[src], ctx.sigs.get(src), ctx.params.get(src)
    if node.op != "GatherShards" or sig is None or sig.infer_output is None or params is None:
        return None
    ins = [t if t is not None else ANY for t in ctx.input_types.get(src, ())]
    fits: list[str] = []
    made = ANY
    for mode in get_args(type(params).model_fields["mode"].annotation):
        out = sig.infer_output(ins, params.model_copy(update={"mode": mode}))
        if mode != getattr(params, "mode", None) and not out.is_any and unify(expected, out, {}):
            fits.append(f'"{mode}"')
            made = out
    if not fits:
        return None
    return join_hints(
        f"set mode to {' or '.join(fits)} on GatherShards {brief(src)} "
        f"(/nodes/{src}/params/mode), which then emits {made}",
        ctx.config_hint(node.params, ["mode"], " or ".join(fits)),
    )


def _driven_together(ctx: Context, writers: list[str], readers: list[str]) -> bool:
    """Whether some merge node (``Concurrently``/``Union``) drives a writer's and a
    reader's branch of one resource, so that both ever run."""

    def is_merge(n: str) -> bool:
        sig = ctx.sigs.get(n)
        return sig is not None and sig.category == "merge"

    return any(ctx.topology.merges_driving(w, r, is_merge) for w in writers for r in readers)


def check_replay(ctx: Context) -> None:
    """Each replay buffer has a writer and a reader, driven by the same Concurrently/Union."""
    from plangraph.ops.registry import all_resource_kinds

    kinds = all_resource_kinds()
    for rid, res in ctx.plan.resources.items():
        kind = kinds.get(res.kind)
        if kind is None or not kind.needs_writer_and_reader:
            continue
        writers, readers = ctx.writers.get(rid, []), ctx.readers.get(rid, [])
        ptr = f"/resources/{rid}"
        if not writers:
            ctx.report(
                "PG150",
                f"{res.kind} {brief(rid)} has no writer: nothing adds experience to it"
                + (f" (read by {', '.join(repr(r) for r in readers)})" if readers else ""),
                pointer=ptr,
                key=True,
                hint=f'store the rollouts: ParallelRollouts -> StoreToReplay(buffer="@{rid}")',
            )
        if not readers:
            ctx.report(
                "PG151",
                f"{res.kind} {brief(rid)} has no reader: stored experience is never replayed"
                + (f" (written by {', '.join(repr(w) for w in writers)})" if writers else ""),
                pointer=ptr,
                key=True,
                hint=f'replay it: LocalReplay(buffer="@{rid}") -> TrainOneStep',
            )
        if not writers or not readers:
            continue
        if _driven_together(ctx, writers, readers):
            continue
        w, r = writers[0], readers[0]
        ctx.report(
            "PG152",
            f"{res.kind} {brief(rid)} is written by {brief(w)} and read by {brief(r)}, but no "
            "Concurrently drives both branches, so replay would starve (or the writer never runs)",
            node=r,
            pointer=ptr,
            key=True,
            hint=f"merge both branches: Concurrently([<branch of {w}>, <branch of {r}>], "
            'mode="round_robin", output_indexes=[1])',
        )


def check_learner(ctx: Context) -> None:
    """Each learner thread is fed (Enqueue) and read (Dequeue), driven by one Concurrently."""
    for rid, res in ctx.plan.resources.items():
        if res.kind != "LearnerThread":
            continue
        writers, readers = ctx.writers.get(rid, []), ctx.readers.get(rid, [])
        if not writers and not readers:
            continue  # declared but unused: PG162 warns
        ptr = f"/resources/{rid}"
        if not writers:
            ctx.report(
                "PG154",
                f"learner thread {brief(rid)} is read by "
                f"{', '.join(brief(r) for r in readers)} but nothing enqueues train batches "
                "to it, so Dequeue would wait forever",
                pointer=ptr,
                key=True,
                hint=f'feed it: ... -> ConcatBatches -> Enqueue(queue="@{rid}")',
            )
        if not readers:
            ctx.report(
                "PG155",
                f"learner thread {brief(rid)} is fed by {', '.join(brief(w) for w in writers)} but "
                "nothing dequeues its results, so its out-queue fills and Enqueue blocks forever",
                pointer=ptr,
                key=True,
                hint=f'read it: Dequeue(queue="@{rid}") as an input of the Concurrently that '
                "drives the Enqueue branch",
            )
        if not writers or not readers:
            continue
        if _driven_together(ctx, writers, readers):
            continue
        w, r = writers[0], readers[0]
        ctx.report(
            "PG156",
            f"learner thread {brief(rid)} is fed by {brief(w)} and read by {brief(r)}, but no "
            "Concurrently drives both branches, so one of them never runs and the plan "
            "deadlocks",
            node=r,
            pointer=ptr,
            key=True,
            hint=f'merge both branches: Concurrently([<branch of {w}>, {r}], mode="async", '
            "output_indexes=[1])",
        )


def check_reachability(ctx: Context) -> None:
    """Every node reaches the output (the driver pulls only the output; others never run).

    An unknown input (PG111) is a cut edge: the nodes upstream of it would reach the output
    once the typo is fixed, so they are not reported again as unreachable.
    """
    out = ctx.plan.output
    if out not in ctx.plan.nodes:
        return
    live = reachable(_repaired_inputs(ctx), out) | {out}
    for nid in ctx.plan.nodes:
        if nid in live:
            continue
        ctx.report(
            "PG160",
            f"{ctx.plan.nodes[nid].op} node cannot reach the output {brief(out)}, so it would "
            "never run",
            node=nid,
            pointer=f"/nodes/{nid}",
            key=True,
            hint="connect its branch to the output (e.g. through Concurrently) or remove it",
        )


def _repaired_inputs(ctx: Context) -> dict[str, set[str]]:
    """``{node: the nodes it reads}``, with each unknown input wired to the node(s) it
    most likely meant.

    An input that names no node is given, for reachability only, the sources PG111 offers
    as did-you-mean; without a close match, any stream that nobody consumes (other than the
    output) may be the one meant. Nodes downstream of the naming node are never candidates
    (that would be a cycle, not a fix). Nodes that stay cut off are genuinely unreachable.
    """
    topo = ctx.topology
    repaired = topo.predecessors_map()
    dangling = [n for n in ctx.plan.nodes if not topo.users(n) and n != ctx.plan.output]
    for nid, node in ctx.plan.nodes.items():
        unknown = [src for src in node.inputs if src not in ctx.plan.nodes]
        if not unknown:
            continue
        downstream = topo.descendants(nid) | {nid}
        others = [x for x in ctx.plan.nodes if x not in downstream]
        for src in unknown:
            meant = close_matches(src, others) or [x for x in dangling if x not in downstream]
            repaired[nid].update(meant)
    return repaired


def check_output_type(ctx: Context) -> None:
    """The output emits Result items (a StandardMetricsReporting node), else a warning."""
    out = ctx.plan.output
    t = ctx.types.get(out)
    if t is None or t.is_any or is_assignable(t, RESULT):
        return
    ctx.report(
        "PG161",
        f"the plan output {brief(out)} emits {t}, not Result: training iterations will yield "
        "raw items instead of result dicts",
        node=out,
        pointer="/output",
        hint=f'wrap it: "metrics": {{"op": "StandardMetricsReporting", "inputs": ["{out}"]}}',
    )
