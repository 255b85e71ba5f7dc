"""The compiler's result: a typed, validated graph with resolved params.

One record per node (:class:`CompiledNode`) and one topology (the analysis graph,
:class:`~plangraph.compiler.topology.Topology`); :class:`CompiledPlan` answers the
dataflow questions (users, ancestors, order, what feeds a node) from them, so the
renderer and the lowering never recompute them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from plangraph.compiler.diagnostics import Diagnostic
from plangraph.compiler.topology import Topology
from plangraph.ir.plan import Node, Plan, Resource, dump_json
from plangraph.ir.source import Location
from plangraph.ir.types import PortType
from plangraph.ops.registry import OpSignature, all_resource_kinds
from plangraph.text import brief, count

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "PLACEMENTS",
    "REPLAY_KIND",
    "CompiledNode",
    "CompiledPlan",
    "CompiledResource",
    "PassRecord",
]

REPLAY_KIND = "ReplayBuffer"
"""The resource kind whose sampled batches :attr:`CompiledNode.replay_sources` tracks."""

PLACEMENTS: tuple[str, ...] = ("driver", "actors", "aggregators", "learner thread")
"""Where a node's work runs after the optimisation passes (:attr:`CompiledNode.placement`):
in the driver process, on the rollout-worker actors, on aggregation actors
(``AggregateBatches``), or in a learner thread of the driver (whose training runs beside
the driver's own pulls)."""


def _json(v: Any) -> Any:
    if isinstance(v, BaseModel):
        return v.model_dump(mode="json")
    if isinstance(v, Mapping):
        return {k: _json(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json(x) for x in v]
    return v


@dataclass(frozen=True)
class CompiledNode:
    """One node after analysis.

    ``params``: the validated ``Params`` instance (config refs resolved, resource refs still
    ``"@id"``), or None when they are invalid (``raw_params`` then holds what was given,
    resolved as far as possible). ``signature``/``output_type`` are None for an unknown op
    or a node on a cycle.

    ``users``: ids of the nodes that read this node's stream, in declaration order, once
    per input port (``consumers`` is the same tuple, under its older name).
    ``fed_by``: resource kind -> ids of the resources of that kind that some node
    upstream of this one reads (resource declaration order), i.e. whose items can reach
    this node's inputs; derived from the ops' resource params with access ``"read"``.

    After the optimisation passes (the same in the declared and the executed plan):
    ``placement`` (one of :data:`PLACEMENTS`); ``host``: for a node moved onto the rollout
    workers, the id of the rollout source whose workers run it; for an ``Enqueue``, the
    learner thread that trains on its batches; ``stage``: the ids of the fused driver stage
    this node runs in (pass ``map-fusion``; ``()`` when it is a stage of its own);
    ``worker_maps``: on a rollout source, the ids of the nodes its workers apply to each
    fragment after postprocessing, in order.
    """

    id: str
    op: str
    signature: OpSignature | None
    params: BaseModel | None
    inputs: tuple[str, ...]
    input_types: tuple[PortType | None, ...]
    output_type: PortType | None
    location: Location | None
    raw_params: dict[str, Any] = field(default_factory=dict)
    users: tuple[str, ...] = ()
    fed_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    placement: str = "driver"
    host: str | None = None
    stage: tuple[str, ...] = ()
    worker_maps: tuple[str, ...] = ()

    @property
    def category(self) -> str | None:
        return self.signature.category if self.signature else None

    @property
    def consumers(self) -> tuple[str, ...]:
        """Alias of :attr:`users` (the name this field had first)."""
        return self.users

    @property
    def replay_sources(self) -> tuple[str, ...]:
        """Ids of the replay buffers whose sampled batches reach this node (read by a node
        upstream of it), e.g. ``("replay",)`` for DQN's TrainOneStep; ``()`` for none."""
        return self.fed_by.get(REPLAY_KIND, ())


@dataclass(frozen=True)
class CompiledResource:
    """A declared resource: ``params`` validated (None if invalid); ``readers``/``writers``:
    ids of the nodes referencing it, by access."""

    id: str
    kind: str
    params: BaseModel | None
    readers: tuple[str, ...]
    writers: tuple[str, ...]
    location: Location | None = None
    raw_params: dict[str, Any] = field(default_factory=dict)
    sized_for: int | None = None
    """In the executed plan, for a worker set whose ``rollout_fragment_length`` was
    ``"auto"``: the train batch (env steps) pass ``rollout-sizing`` sized it for, so that a
    ``num_workers`` override at build time sizes it again; None otherwise."""


@dataclass(frozen=True)
class PassRecord:
    """One check that ran: its name, what it checks, and how many diagnostics it raised."""

    name: str
    doc: str
    diagnostics: int


def _resources_text(resources: Mapping[str, float]) -> str:
    """``{"CPU": 4, "memory": 2**30}`` -> ``"CPU 4, memory 1.0 GiB"``."""
    return ", ".join(
        f"{k} {v / 2**30:.1f} GiB" if k == "memory" else f"{k} {v:g}"
        for k, v in sorted(resources.items())
    )


@dataclass(frozen=True, eq=False)
class CompiledPlan:
    """A plan after analysis (see docs/CONTRACTS.md).

    ``nodes`` are in topological order (inputs before users; nodes on or after a cycle
    last, in declaration order).
    ``ok`` is True when no diagnostic is an error. ``topology`` is the analysis graph;
    ``graph`` its ``networkx.DiGraph`` with node attributes ``op``, ``type`` and edge
    attributes ``index`` (input port), ``ports`` and ``type``. The queries below take a
    node id of the plan and raise ``KeyError`` for any other.

    Two plans in one: this object is the plan as declared (params as written, resolved),
    for display (``explain``, ``render``, ``to_json``); :attr:`executed` is the plan the
    optimisation passes produced (``optimisations``: what each pass did, or why not), for
    lowering. Both have the same nodes, edges and placements; the executed one may have
    other params (e.g. a sized ``rollout_fragment_length``). ``disabled_passes``: the
    passes turned off for this compilation.

    Drawing and running a compiled plan belong to the layers above the compiler:
    ``plangraph.render(compiled, path)`` / ``plangraph.to_dot(compiled)``
    (``plangraph.diagram``) and ``plangraph.build(compiled, ...)`` (``plangraph.runtime``).
    """

    plan: Plan
    config: dict[str, Any]
    output: str
    nodes: dict[str, CompiledNode]
    resources: dict[str, CompiledResource]
    topology: Topology
    diagnostics: tuple[Diagnostic, ...]
    pass_records: tuple[PassRecord, ...] = ()
    optimisations: tuple[Any, ...] = ()
    """One ``plangraph.compiler.passes.PassResult`` per optimisation pass, in run order."""
    disabled_passes: frozenset[str] = frozenset()
    executed_plan: CompiledPlan | None = None
    capacity: Any = None
    """The ``Capacity`` the plan was checked against (machine or cluster), or None."""

    @property
    def executed(self) -> CompiledPlan:
        """The plan to lower: the optimisation passes' result (itself when none changed
        anything, and for the executed plan itself)."""
        return self.executed_plan if self.executed_plan is not None else self

    @property
    def graph(self) -> nx.DiGraph:
        """The dataflow graph as a ``networkx.DiGraph`` (the topology's, built on first
        use)."""
        return self.topology.graph

    # -- dataflow queries -----------------------------------------------------------------

    def _known(self, node_id: str) -> str:
        if node_id not in self.nodes:
            raise KeyError(f"plan {brief(self.plan.name)} has no node {brief(node_id)}")
        return node_id

    def users(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes reading ``node_id``'s stream: declaration order, one entry per
        input port (``Union(a, a)`` lists its id twice). ``()`` for the output."""
        return self.nodes[self._known(node_id)].users

    def ancestors(self, node_id: str) -> frozenset[str]:
        """Ids of every node with a path to ``node_id`` (never ``node_id`` itself). Use
        :meth:`upstream` for them in topological order."""
        return self.topology.ancestors(self._known(node_id))

    def descendants(self, node_id: str) -> frozenset[str]:
        """Ids of every node ``node_id`` has a path to (never ``node_id`` itself)."""
        return self.topology.descendants(self._known(node_id))

    def topological_order(self) -> tuple[str, ...]:
        """Every node id, inputs before users (ties and nodes on cycles as in ``nodes``)."""
        return tuple(self.nodes)

    def upstream(self, node_id: str, *, op: str | None = None) -> tuple[str, ...]:
        """Ids of the ancestors of ``node_id`` (running operator ``op``, if given), in
        topological order."""
        where = None if op is None else (lambda n: self.nodes[n].op == op)
        return self.topology.upstream(self._known(node_id), where)

    def fed_by(self, node_id: str, kind: str = REPLAY_KIND) -> tuple[str, ...]:
        """Ids of the ``kind`` resources read upstream of ``node_id``, whose items can
        therefore reach it (resource declaration order). For DQN's train node:
        ``("replay",)``; ``()`` when nothing upstream reads a resource of that kind."""
        return self.nodes[self._known(node_id)].fed_by.get(kind, ())

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if not d.is_error)

    @property
    def passes(self) -> tuple[str, ...]:
        """Names of the checks that ran, in order (the name this property had before the
        optimisation passes existed; those are :attr:`optimisations`)."""
        return tuple(p.name for p in self.pass_records)

    @property
    def output_type(self) -> PortType | None:
        n = self.nodes.get(self.output)
        return n.output_type if n else None

    def placement(self, node_id: str) -> str:
        """Where ``node_id``'s work runs, in words: ``"rollout workers (actors)"`` (its op's
        ``placement`` is ``"actors"``, e.g. ``ParallelRollouts``: the sampling runs in the
        worker actors, the driver gathers), ``"driver, feeds learner thread @learner"`` /
        ``"driver, reads learner thread @learner"`` (an op that writes / reads a learner
        thread resource: the training itself runs in that thread of the driver), or
        ``"driver"``. After the optimisation passes: a node moved onto the rollout workers
        says so (``"rollout workers (actors), on each worker of @workers, moved after
        rollouts by pass worker-side-maps"``), and a driver node in a fused stage adds
        ``"fused stage train+target"``. A per-shard operator (``placement="shard"``) says
        ``"rollout workers (actors), per-shard on each worker of @workers, after
        rollouts"``."""
        node = self.nodes[self._known(node_id)]
        sig = node.signature
        if sig is not None and sig.placement == "shard":
            ws = self.worker_set_of(node.id)
            of = f" of @{ws}" if ws else ""
            after = f", after {node.host}" if node.host else ""
            return f"rollout workers (actors), per-shard on each worker{of}{after}"
        if node.placement == "actors" and node.host:
            ws = self.worker_set_of(node.id)
            on = f"on each worker of @{ws}, " if ws else ""
            return f"rollout workers (actors), {on}moved after {node.host} by pass worker-side-maps"
        if node.placement == "actors" or (sig is not None and sig.placement == "actors"):
            return "rollout workers (actors)"
        if node.placement == "aggregators":
            return "aggregation actors (each gathers some rollout workers' fragments)"
        notes = []
        for rp in sig.resources if sig is not None else ():
            value = getattr(node.params, rp.param, None) if node.params is not None else None
            rid = value[1:] if isinstance(value, str) and value.startswith("@") else None
            res = self.resources.get(rid) if rid is not None else None
            if res is not None and res.kind == "LearnerThread":
                verb = "feeds" if rp.access == "write" else "reads"
                notes.append(f"{verb} learner thread @{rid}")
        if node.stage:
            notes.append(f"fused stage {'+'.join(node.stage)}")
        return ", ".join(["driver", *notes])

    def worker_set_of(self, node_id: str) -> str | None:
        """The id of the worker set whose rollout workers run ``node_id``'s work (a
        rollout source's ``workers``; for a node moved onto the workers or a per-shard
        operator, its source's), or None: a driver node, or an unknown worker set.

        Raises:
            KeyError: ``node_id`` is not a node of the plan.
        """
        node = self.nodes[self._known(node_id)]
        if node.placement != "actors":
            return None
        src = self.nodes.get(node.host) if node.host else node
        params = src.params if src is not None else None
        value = getattr(params, "workers", None) if params is not None else None
        return value[1:] if isinstance(value, str) and value.startswith("@") else None

    def shard_regions(self) -> dict[str, tuple[str, ...]]:
        """Rollout source id -> the nodes whose work runs in each of its workers, itself
        first: a raw ``ParallelRollouts`` and the per-shard operators on its shards, or a
        source with the pure maps pass ``worker-side-maps`` moved there (topological
        order). A source with nothing else on its workers has no region (the diagram
        draws a box around each region; ``explain`` lists what runs where)."""
        regions: dict[str, list[str]] = {}
        for n in self.nodes.values():
            if n.placement == "actors" and n.host and n.host in self.nodes:
                regions.setdefault(n.host, [n.host]).append(n.id)
        for n in self.nodes.values():
            if n.op == "ParallelRollouts" and getattr(n.params, "mode", None) == "raw":
                regions.setdefault(n.id, [n.id])
        order = list(self.nodes)
        return {
            src: tuple(sorted(ids, key=order.index))
            for src, ids in sorted(regions.items(), key=lambda kv: order.index(kv[0]))
        }

    def diagnostics_for(self, node_id: str) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.node == node_id)

    # -- serialisation --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The compiled graph as JSON data: resolved params with defaults, inferred types."""

        def t(x: PortType | None) -> str | None:
            return None if x is None else str(x)

        return {
            "name": self.plan.name,
            "config": {k: _json(self.config[k]) for k in sorted(self.config)},
            "resources": {
                r.id: {
                    "kind": r.kind,
                    "params": _json(r.params) if r.params is not None else _json(r.raw_params),
                    "readers": list(r.readers),
                    "writers": list(r.writers),
                }
                for r in self.resources.values()
            },
            "nodes": {
                n.id: {
                    "op": n.op,
                    "inputs": list(n.inputs),
                    "input_types": [t(x) for x in n.input_types],
                    "output_type": t(n.output_type),
                    "params": _json(n.params) if n.params is not None else _json(n.raw_params),
                }
                for n in self.nodes.values()
            },
            "output": self.output,
            "output_type": t(self.output_type),
        }

    def to_json(self) -> str:
        """Deterministic JSON of :meth:`to_dict` (no source locations)."""
        return dump_json(self.to_dict()) + "\n"

    def to_plan(self) -> Plan:
        """The plan as it compiled, as a plan again: every node and resource param explicit
        (``${key}`` references resolved, config overrides applied, defaults filled in) and
        no ``config`` left to reference. Compiling it gives the same nodes and resources
        (``compile(c.to_plan()).to_plan() == c.to_plan()``); a run directory's
        ``plan.json`` and each checkpoint's hold it, so ``plangraph validate/run`` accept
        them. Change a value with ``--set nodes.ID.PARAM=V`` / ``resources.ID.PARAM=V``.

        Raises:
            ValueError: the plan has errors (there is no resolved form to give).
        """
        if not self.ok:
            raise ValueError(f"plan {self.plan.name!r} has errors; it has no resolved form")
        resources = {
            rid: Resource(kind=r.kind, params=_json(r.params)) for rid, r in self.resources.items()
        }
        nodes = {
            nid: Node(op=self.plan.nodes[nid].op, inputs=n.inputs, params=_json(n.params))
            for nid, n in ((nid, self.nodes[nid]) for nid in self.plan.nodes)
        }
        return Plan(
            name=self.plan.name,
            description=self.plan.description,
            config={},
            resources=resources,
            nodes=nodes,
            output=self.output,
        )

    def explain(self, resource_notes: Mapping[str, Sequence[str]] | None = None) -> str:
        """A readable account: the checks run, the optimisation passes (what each changed
        in the executed plan, before/after and why, or why not), the typed nodes in order
        with their placement after the passes, resources (with what their kind notes, e.g.
        replay shards, per-worker exploration, plus ``resource_notes[id]`` lines a caller
        adds, e.g. memory estimates), diagnostics."""
        lines = [
            f"plan {brief(self.plan.name)}: {count(len(self.nodes), 'node')}, "
            f"{count(len(self.resources), 'resource')}, output {brief(self.output)} "
            f"({self.output_type or '?'})",
            "",
            "checks run:",
        ]
        w = max((len(p.name) for p in self.pass_records), default=0)
        for i, p in enumerate(self.pass_records, 1):
            found = f"  [{p.diagnostics} found]" if p.diagnostics else ""
            # whole sentences, wrapped under the description column
            lines += _wrap(f"{i:2d}. {p.name:<{w}}  {p.doc}{found}", "  ", 120, w + 6)
        lines += ["", *self._explain_passes()]
        lines += ["", *self._explain_placement()]
        lines += self._explain_workers()
        lines += ["", "nodes (topological order), each with where it runs after the passes:"]
        executed = self.executed
        wid = max((len(n) for n in self.nodes), default=0)
        wop = max((len(n.op) for n in self.nodes.values()), default=0)
        sigs = {
            n.id: "({}) -> {}".format(
                ", ".join(str(x) if x is not None else "?" for x in n.input_types),
                n.output_type or "?",
            )
            for n in self.nodes.values()
        }
        wsig = max((len(x) for x in sigs.values()), default=0)
        for n in self.nodes.values():
            lines.append(
                f"  {n.id:<{wid}}  {n.op:<{wop}}  {sigs[n.id]:<{wsig}}  [{self.placement(n.id)}]"
            )
            if n.inputs:
                lines.append(f"  {'':<{wid}}    inputs: {', '.join(n.inputs)}")
            if n.replay_sources:
                lines.append(f"  {'':<{wid}}    replayed from: {', '.join(n.replay_sources)}")
            params = _json(n.params) if n.params is not None else n.raw_params
            if params:
                text = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
                lines.append(f"  {'':<{wid}}    params: {text}")
            changed = _changed(params, executed.nodes[n.id].params)
            if changed:
                lines.append(f"  {'':<{wid}}    executed with: {changed}")
        if self.resources:
            lines += ["", "resources (params resolved, defaults included):"]
            kinds = all_resource_kinds()
            for r in self.resources.values():
                where = _WHERE.get(r.kind, "")
                lines.append(
                    f"  {r.id}: {r.kind}{where}; writers: {', '.join(r.writers) or '-'}; "
                    f"readers: {', '.join(r.readers) or '-'}"
                )
                lines += _resource_param_lines(r, indent="      ")
                declared = _json(r.params) if r.params is not None else r.raw_params
                changed = _changed(declared, executed.resources[r.id].params)
                if changed:
                    lines.append(f"      executed with: {changed}")
                kind = kinds.get(r.kind)
                if kind is not None and kind.notes is not None and r.params is not None:
                    lines += ["      " + x for x in kind.notes(r.params)]
                lines += ["      " + x for x in (resource_notes or {}).get(r.id, ())]
        lines += ["", "diagnostics:" if self.diagnostics else "diagnostics: none"]
        for d in self.diagnostics:
            lines += ["  " + x for x in d.format().splitlines()]
        return "\n".join(lines) + "\n"

    def _explain_placement(self) -> list[str]:
        """Where each node's work runs after the passes, one line per place; a fused
        stage is shown once, as ``a+b``."""
        groups: dict[str, list[str]] = {p: [] for p in PLACEMENTS}
        on_workers: dict[str | None, list[str]] = {}  # worker set -> its nodes
        for n in self.nodes.values():
            if n.stage and n.stage[0] != n.id:
                continue
            name = "+".join(n.stage) if n.stage else n.id
            if n.signature is not None and n.signature.placement == "shard":
                name += " (per-shard)"
            elif n.placement == "actors" and n.host:
                name += f" (moved, after {n.host})"
            elif n.placement == "learner thread" and n.host:
                name += f" (its batches train in {n.host})"
            elif n.stage:
                name += " (one stage)"
            if n.placement == "actors":
                on_workers.setdefault(self.worker_set_of(n.id), []).append(name)
            else:
                groups.get(n.placement, groups["driver"]).append(name)
        # What runs on the driver, in each worker of which worker set, on aggregation
        # actors and on learner threads.
        rows = [("driver", groups["driver"])]
        rows += [
            (f"each rollout worker of @{ws}" if ws else "rollout workers", names)
            for ws, names in on_workers.items()
        ]
        rows.append(("aggregation actors", groups["aggregators"]))
        rows.append(("learner thread", groups["learner thread"]))
        w = max(len(label) for label, names in rows if names)
        out = ["placement after the passes:"]
        for label, names in rows:
            if names:
                out += _wrap(f"{label:<{w}}  {', '.join(names)}", "  ")
        return out

    def _explain_workers(self) -> list[str]:
        """Each worker set's rollout workers: what each reserves, how they are placed,
        the totals, the learner's device; with the cluster's nodes known, each worker's
        expected node (``plangraph.compiler.placement``)."""
        from plangraph.compiler.placement import place_bundles
        from plangraph.compiler.resource_checks import reserved_totals
        from plangraph.ops.resources import WorkerSetParams

        executed = self.executed  # pass rollout-sizing may have sized a fragment
        sets = [
            (rid, r.params)
            for rid, r in executed.resources.items()
            if isinstance(r.params, WorkerSetParams)
        ]
        if not sets:
            return []
        cap = self.capacity
        where = f" on {cap.where}" if cap is not None else ""
        out = ["", f"rollout workers and resources{where}:"]
        free = [n.amounts for n in cap.nodes] if cap is not None and cap.nodes else None
        for rid, ws in sets:
            bundle = ws.worker_resources.bundle()
            each = _resources_text(bundle) if bundle else "nothing reserved"
            how = (
                f"placement group {ws.placement_strategy}"
                if ws.placement_strategy
                else "no placement group"
            )
            out.append(
                f"  {rid}: {count(ws.num_workers, 'rollout worker')} x {each}; {how}; "
                f"{self._learners_text(rid, ws)}"
            )
            if free is None or not ws.num_workers:
                continue
            placed = place_bundles(bundle, ws.num_workers, ws.placement_strategy, cap.nodes, free)
            for i, n in enumerate(placed.nodes, 1):
                node = cap.nodes[n].label() if n is not None else "no node fits (PG187)"
                out.append(f"      worker {i} -> {node}")
        totals = reserved_totals(sets)
        out.append(f"  reserved in all: {_resources_text(totals) if totals else 'nothing'}")
        if cap is not None:
            have = {
                k: cap.total(k)
                for k in sorted({"CPU", "GPU", "memory", *totals})
                if cap.total(k) is not None
            }
            out.append(f"  available: {_resources_text(have) if have else 'unknown'}")
            if cap.nodes:
                for n in cap.nodes:
                    out.append(f"      {n.label()}: {_resources_text(n.amounts) or 'nothing'}")
        return out

    def _learners_text(self, rid: str, ws: Any) -> str:
        """Where worker set ``rid``'s policy learns, from the nodes whose op ``learns``:
        ``"learner: device auto (in the driver)"``, and for per-shard ones ``"learners:
        each rollout worker (train, per-shard); no learner in the driver"``. A plan with
        no such node (only user ops that do not declare it) keeps the driver's learner."""
        in_driver, on_workers = [], []
        for n in self.nodes.values():
            if n.signature is None or not n.signature.learns:
                continue
            if n.signature.placement == "shard":
                if self.worker_set_of(n.id) == rid:
                    on_workers.append(n.id)
            elif self._trained_set(n) == rid:
                in_driver.append(n.id)
        device = f"device {ws.learner.device}"
        if ws.learner.num_gpus:
            device += f", {ws.learner.num_gpus:g} GPU(s)"
        if not on_workers:
            return f"learner: {device} (in the driver)"
        shards = f"each rollout worker ({', '.join(on_workers)}, per-shard)"
        if not in_driver:
            return f"learners: {shards}; no learner in the driver"
        return f"learners: {shards} and the driver ({', '.join(in_driver)}; {device})"

    def _trained_set(self, node: CompiledNode) -> str | None:
        """The worker set whose policy driver node ``node`` trains: its ``workers``, or
        for an ``Enqueue`` its learner thread's."""
        ref = getattr(node.params, "workers", None)
        thread = self.resources.get(node.host) if node.host else None
        if thread is not None and thread.kind == "LearnerThread":
            ref = getattr(thread.params, "workers", None)
        return ref[1:] if isinstance(ref, str) and ref.startswith("@") else None

    def _explain_passes(self) -> list[str]:
        if not self.optimisations:
            why = "the plan has errors" if not self.ok else "none ran"
            return [f"optimisation passes: not run ({why})"]
        lines = [
            "optimisation passes (they change the executed plan; --no-pass NAME turns one off):"
        ]
        w = max(len(r.name) for r in self.optimisations)
        for i, r in enumerate(self.optimisations, 1):
            lines.append(f"  {i:2d}. {r.name:<{w}}  {r.doc}")
            pad = "        "
            if r.status == "off":
                lines.append(f"{pad}off (--no-pass {r.name})")
            for c in r.changes:
                lines += _wrap(f"applied to {c.target}:", pad)
                lines += _wrap(f"before: {c.before}", pad + "  ")
                lines += _wrap(f"after:  {c.after}", pad + "  ")
                lines += _wrap(f"why:    {c.why}", pad + "  ")
            for note in r.notes:
                head = "" if r.status == "off" else "not applied: "
                lines += _wrap(f"{head}{note}", pad)
        return lines


_WHERE = {
    "LearnerThread": " (a thread in the driver)",
    "ReplayActors": " (sharded over Ray actors)",
}
"""Where a resource of each kind lives, when not in the driver's dataflow itself."""


def _wrap(text: str, indent: str, width: int = 92, indent_more: int = 2) -> list[str]:
    """``text`` wrapped at ``width``, continuation lines indented ``indent_more`` more."""
    import textwrap

    more = indent + " " * indent_more
    return textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=more, break_on_hyphens=False
    )


def _changed(declared: Any, executed: BaseModel | None) -> str:
    """``key=value`` of the executed params that differ from the declared ones."""
    if executed is None or not isinstance(declared, Mapping):
        return ""
    after = _json(executed)
    return ", ".join(
        f"{k}={_short(v)}" for k, v in after.items() if k not in declared or declared[k] != v
    )


def _resource_param_lines(r: CompiledResource, indent: str, width: int = 92) -> list[str]:
    """A resource's params as ``key=value`` lines wrapped at ``width``: top-level values,
    then one group per nested model (e.g. ``policy``), then the names left at defaults."""
    if r.params is None:
        if not r.raw_params:
            return []
        items = [f"{k}={_inline(v)}" for k, v in r.raw_params.items()]
        return _pack("params (invalid, given): ", items, indent, width)
    top: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    defaults: list[str] = []
    for name, value in r.params:
        if isinstance(value, BaseModel):
            fields = sorted(value, key=lambda kv: kv[0] != "algo")  # the tag first
            groups.append((name, [f"{k}={_inline(_json(v))}" for k, v in fields]))
            defaults += [
                f"{name}.{k}" for k in type(value).model_fields if k not in value.model_fields_set
            ]
        else:
            top.append(f"{name}={_inline(_json(value))}")
        if name not in r.params.model_fields_set:
            defaults.append(name)
    out = _pack("params: ", top, indent, width)
    for name, items in groups:
        out += _pack(f"{name}: ", items, indent, width)
    out += _model_lines(r.params, indent, width)
    if defaults:
        out += _pack("defaults used: ", defaults, indent, width)
    return out


def _model_lines(params: BaseModel, indent: str, width: int) -> list[str]:
    """A worker set's env spaces and the model its policy builds for them (the default
    one when the policy names none)."""
    env, policy = getattr(params, "env", None), getattr(params, "policy", None)
    if not isinstance(env, str) or policy is None or not hasattr(policy, "resolved_model"):
        return []
    from plangraph.compiler.env_spaces import env_spaces

    spaces = env_spaces(env, getattr(params, "wrappers", ()))
    if spaces is None:
        return [f"{indent}env spaces: unknown at compile time (env {_inline(env)})"]
    obs = spaces.observation
    out = _pack(
        "env spaces: ",
        [f"observation {_space_text(obs)}", f"action {_space_text(spaces.action)}"],
        indent,
        width,
    )
    if obs.kind != "Box":
        return out
    model = policy.resolved_model(obs.shape)
    items = [f"{k}={_inline(_json(v))}" for k, v in model]
    how = "" if policy.model is not None else f" (default for observations {list(obs.shape)})"
    return out + _pack(f"model{how}: ", items, indent, width)


def _space_text(space: Any) -> str:
    """``Box(shape=[4], float32)`` (bounds left out: they can be long), else the space."""
    if space.kind == "Box":
        return f"Box(shape={list(space.shape)}, {space.dtype})"
    return " ".join(space.text.split())[:80]


def _pack(head: str, items: list[str], indent: str, width: int) -> list[str]:
    """``head`` then ``items`` joined by ", ", wrapped between items (never inside one)."""
    if not items:
        return []
    lines: list[str] = []
    cur = indent + head
    cont = indent + "  "
    fresh = True
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if not fresh and len(cur) + 1 + len(piece) > width:
            lines.append(cur)
            cur, fresh = cont, True
        cur += piece if fresh else " " + piece
        fresh = False
    lines.append(cur)
    return lines


def _inline(v: Any) -> str:
    """Compact one-line JSON: ``[64, 64]``, ``"CartPole-v1"``, ``null``."""
    return json.dumps(v, separators=(", ", ": "), sort_keys=True)


def _short(v: Any) -> str:
    s = dump_json(v).replace("\n", " ")
    s = " ".join(s.split())
    return s if len(s) <= 60 else s[:57] + "..."
