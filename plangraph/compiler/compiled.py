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
from pathlib import Path
from typing import Any

import networkx as nx
from pydantic import BaseModel

from plangraph.compiler.diagnostics import Diagnostic
from plangraph.compiler.topology import Topology
from plangraph.ir.plan import Plan, dump_json
from plangraph.ir.source import Location
from plangraph.ir.types import PortType
from plangraph.ops.registry import OpSignature, all_resource_kinds
from plangraph.text import brief

__all__ = ["REPLAY_KIND", "CompiledNode", "CompiledPlan", "CompiledResource", "PassRecord"]

REPLAY_KIND = "ReplayBuffer"
"""The resource kind whose sampled batches :attr:`CompiledNode.replay_sources` tracks."""


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


@dataclass(frozen=True)
class PassRecord:
    """One check that ran: its name, what it checks, and how many diagnostics it raised."""

    name: str
    doc: str
    diagnostics: int


@dataclass(frozen=True, eq=False)
class CompiledPlan:
    """A plan after analysis (see docs/CONTRACTS.md).

    ``nodes`` are in topological order (inputs before users; nodes on or after a cycle
    last, in declaration order).
    ``ok`` is True when no diagnostic is an error. ``topology`` is the analysis graph;
    ``graph`` its ``networkx.DiGraph`` with node attributes ``op``, ``type`` and edge
    attributes ``index`` (input port), ``ports`` and ``type``. The queries below take a
    node id of the plan and raise ``KeyError`` for any other.
    """

    plan: Plan
    config: dict[str, Any]
    output: str
    nodes: dict[str, CompiledNode]
    resources: dict[str, CompiledResource]
    topology: Topology
    diagnostics: tuple[Diagnostic, ...]
    pass_records: tuple[PassRecord, ...] = ()

    @property
    def graph(self) -> nx.DiGraph:
        """The dataflow graph (the topology's ``networkx.DiGraph``)."""
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
        """Names of the checks that ran, in order."""
        return tuple(p.name for p in self.pass_records)

    @property
    def output_type(self) -> PortType | None:
        n = self.nodes.get(self.output)
        return n.output_type if n else None

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

    def explain(self, resource_notes: Mapping[str, Sequence[str]] | None = None) -> str:
        """A readable account: the checks run, the typed nodes in order, resources (with
        what their kind notes, e.g. replay shards, per-worker exploration, plus
        ``resource_notes[id]`` lines a caller adds, e.g. memory estimates), diagnostics."""
        lines = [
            f"plan {brief(self.plan.name)}: {_count(len(self.nodes), 'node')}, "
            f"{_count(len(self.resources), 'resource')}, output {brief(self.output)} "
            f"({self.output_type or '?'})",
            "",
            "checks run:",
        ]
        w = max((len(p.name) for p in self.pass_records), default=0)
        for i, p in enumerate(self.pass_records, 1):
            found = f"  [{p.diagnostics} found]" if p.diagnostics else ""
            lines.append(f"  {i:2d}. {p.name:<{w}}  {p.doc}{found}")
        lines += ["", "nodes (topological order; they run in the driver unless marked):"]
        wid = max((len(n) for n in self.nodes), default=0)
        wop = max((len(n.op) for n in self.nodes.values()), default=0)
        for n in self.nodes.values():
            ins = ", ".join(str(x) if x is not None else "?" for x in n.input_types)
            sig = f"({ins}) -> {n.output_type or '?'}"
            where = (
                "  [on rollout workers]"
                if n.signature and n.signature.placement == "actors"
                else ""
            )
            lines.append(f"  {n.id:<{wid}}  {n.op:<{wop}}  {sig}{where}")
            if n.inputs:
                lines.append(f"  {'':<{wid}}    inputs: {', '.join(n.inputs)}")
            if n.replay_sources:
                lines.append(f"  {'':<{wid}}    replayed from: {', '.join(n.replay_sources)}")
            params = _json(n.params) if n.params is not None else n.raw_params
            if params:
                text = ", ".join(f"{k}={_short(v)}" for k, v in params.items())
                lines.append(f"  {'':<{wid}}    params: {text}")
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
                kind = kinds.get(r.kind)
                if kind is not None and kind.notes is not None and r.params is not None:
                    lines += ["      " + x for x in kind.notes(r.params)]
                lines += ["      " + x for x in (resource_notes or {}).get(r.id, ())]
        lines += ["", "diagnostics:" if self.diagnostics else "diagnostics: none"]
        for d in self.diagnostics:
            lines += ["  " + x for x in d.format().splitlines()]
        return "\n".join(lines) + "\n"

    # -- delegation to other layers (imported lazily: they may pull in ray/graphviz) ------

    def to_dot(self, rankdir: str = "TB") -> str:
        from plangraph import render

        return render.to_dot(self, rankdir=rankdir)

    def render(self, path: str | Path, rankdir: str = "TB") -> Path:
        from plangraph import render

        return render.render(self, path, rankdir=rankdir)

    def _repr_svg_(self) -> str:
        """SVG for Jupyter: rendered by ``plangraph.render`` into a temporary file."""
        import tempfile

        from plangraph import render

        with tempfile.TemporaryDirectory() as tmp:
            out = render.render(self, Path(tmp) / "plan.svg")
            return Path(out).read_text(encoding="utf-8")

    def build(self, **kwargs: Any) -> Any:
        """Lower to runtime iterators on Ray; returns an ``Algorithm``.

        Raises :class:`~plangraph.compiler.diagnostics.PlanValidationError` if the plan
        has errors.
        """
        if not self.ok:
            from plangraph.compiler.diagnostics import PlanValidationError

            raise PlanValidationError(self.diagnostics, self)
        from plangraph import runtime

        return runtime.build(self, **kwargs)


_WHERE = {
    "LearnerThread": " (a thread in the driver)",
    "ReplayActors": " (sharded over Ray actors)",
}
"""Where a resource of each kind lives, when not in the driver's dataflow itself."""


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


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
    if defaults:
        out += _pack("defaults used: ", defaults, indent, width)
    return out


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
