"""What changed between two compiled plans: ``diff_plans(a, b) -> PlanDiff``.

Both sides are :class:`~plangraph.compiler.plan_view.PlanView` s, i.e. plans *as compiled*:
params and config are compared with ``${config}`` references resolved and defaults filled
in, so ``"${train_batch_size}"`` on both sides still differs when the config behind it does,
and a default written out equals the default left unsaid. Nodes and resources are matched
by id (ids are what a plan's edges and ``"@id"`` references name).

A :class:`PlanDiff` holds, in a deterministic order:

* the plan name and output node, when they differ;
* config keys added, removed and changed (values as resolved, overrides applied);
* nodes added (in ``b``'s order), removed (in ``a``'s), and changed: another op
  (re-typed), other inputs (re-wired), another inferred output type, params changed (one
  :class:`ValueChange` per leaf, nested params such as a policy as dotted names);
* dataflow edges ``src -> dst`` at input ``port`` added, removed, and kept with another
  port type; resource uses (a node reading or writing ``@id``) added and removed;
* resources added, removed and changed (kind, params).

:meth:`PlanDiff.to_dict` is the ``--format json`` form (sorted keys when dumped; lists in
a stable order); ``plangraph.compiler.diff_text`` writes the text form and
``plangraph.diagram.diff`` the diagram. Imports networkx only (no ray, no torch).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from plangraph.compiler.plan_view import PlanView

__all__ = [
    "ABSENT",
    "DataEdge",
    "NodeChange",
    "PlanDiff",
    "ResourceChange",
    "ResourceUse",
    "ValueChange",
    "diff_plans",
    "diff_values",
    "same_value",
]

ADDED, REMOVED, CHANGED, UNCHANGED = "added", "removed", "changed", "unchanged"
"""The status of a node, resource or edge in a diff."""


class _Absent:
    """The value of a key one side does not have (distinct from JSON ``null``)."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Any = _Absent()


def _canonical(value: Any) -> str:
    # JSON text, keys sorted: 1, 1.0 and true are three different values, as in the file.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same value (``1 != 1.0 != true``; key order ignored)."""
    return _canonical(a) == _canonical(b)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")  # RFC 6901


@dataclass(frozen=True)
class ValueChange:
    """One leaf that differs: ``path`` from the params (or config) root, the value in ``a``
    and in ``b`` (:data:`ABSENT` where that side has no such key)."""

    path: tuple[str, ...]
    a: Any = ABSENT
    b: Any = ABSENT

    @property
    def status(self) -> str:
        """``"added"`` (only in ``b``), ``"removed"`` (only in ``a``) or ``"changed"``."""
        if self.a is ABSENT:
            return ADDED
        return REMOVED if self.b is ABSENT else CHANGED

    @property
    def name(self) -> str:
        """The dotted name, e.g. ``policy.lr``."""
        return ".".join(self.path)

    def pointer(self, base: str) -> str:
        """The JSON pointer under ``base``: ``/resources/workers/params`` + ``/policy/lr``."""
        return base + "".join("/" + _escape(p) for p in self.path)

    def sides(self) -> dict[str, Any]:
        """``{"a": ..., "b": ...}`` without the side that lacks the key."""
        return {k: v for k, v in (("a", self.a), ("b", self.b)) if v is not ABSENT}


def diff_values(
    a: Mapping[str, Any], b: Mapping[str, Any], path: tuple[str, ...] = ()
) -> tuple[ValueChange, ...]:
    """Every leaf of ``a`` and ``b`` that differs, objects compared key by key (``a``'s key
    order, then the keys only ``b`` has); arrays are leaves, compared whole."""
    out: list[ValueChange] = []
    for key in [*a, *(k for k in b if k not in a)]:
        here = (*path, key)
        if key not in b:
            out.append(ValueChange(here, a=a[key]))
        elif key not in a:
            out.append(ValueChange(here, b=b[key]))
        elif isinstance(a[key], Mapping) and isinstance(b[key], Mapping):
            out.extend(diff_values(a[key], b[key], here))
        elif not same_value(a[key], b[key]):
            out.append(ValueChange(here, a[key], b[key]))
    return tuple(out)


@dataclass(frozen=True, order=True)
class DataEdge:
    """Items of ``src`` flowing into input ``port`` of ``dst``."""

    dst: str
    port: int
    src: str

    def to_dict(self, type_: Any) -> dict[str, Any]:
        return {"from": self.src, "to": self.dst, "port": self.port, "type": type_}


@dataclass(frozen=True, order=True)
class ResourceUse:
    """Node ``node`` reading (``access="read"``) or writing resource ``resource``."""

    resource: str
    node: str
    access: str

    def to_dict(self) -> dict[str, str]:
        return {"resource": self.resource, "node": self.node, "access": self.access}


@dataclass(frozen=True)
class NodeChange:
    """A node in both plans that differs; each pair is ``(in a, in b)``, ``None`` when
    that aspect is the same."""

    id: str
    op: tuple[str, str] | None = None
    inputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    output_type: tuple[str | None, str | None] | None = None
    params: tuple[ValueChange, ...] = ()

    @property
    def rewired(self) -> bool:
        return self.inputs is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.op is not None:
            out["op"] = {"a": self.op[0], "b": self.op[1]}
        if self.inputs is not None:
            out["inputs"] = {"a": list(self.inputs[0]), "b": list(self.inputs[1])}
        if self.output_type is not None:
            out["output_type"] = {"a": self.output_type[0], "b": self.output_type[1]}
        if self.params:
            out["params"] = {c.name: c.sides() for c in self.params}
        return out


@dataclass(frozen=True)
class ResourceChange:
    """A resource in both plans that differs (``kind`` ``(a, b)`` or ``None``)."""

    id: str
    kind: tuple[str, str] | None = None
    params: tuple[ValueChange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.kind is not None:
            out["kind"] = {"a": self.kind[0], "b": self.kind[1]}
        if self.params:
            out["params"] = {c.name: c.sides() for c in self.params}
        return out


@dataclass(frozen=True)
class PlanDiff:
    """The changes from plan ``a`` to plan ``b`` (see the module docstring).

    ``order``: every node id of either plan in one dataflow order (inputs first; a node
    only ``a`` has sits where it was). ``a_label``/``b_label``: what the sides were given as
    (a path), for messages.
    """

    a: PlanView
    b: PlanView
    a_label: str
    b_label: str
    name: tuple[str, str] | None = None
    output: tuple[str, str] | None = None
    config: tuple[ValueChange, ...] = ()
    order: tuple[str, ...] = ()
    nodes_added: tuple[str, ...] = ()
    nodes_removed: tuple[str, ...] = ()
    nodes_changed: tuple[NodeChange, ...] = ()
    edges_added: tuple[DataEdge, ...] = ()
    edges_removed: tuple[DataEdge, ...] = ()
    edges_retyped: tuple[DataEdge, ...] = ()
    uses_added: tuple[ResourceUse, ...] = ()
    uses_removed: tuple[ResourceUse, ...] = ()
    resources_added: tuple[str, ...] = ()
    resources_removed: tuple[str, ...] = ()
    resources_changed: tuple[ResourceChange, ...] = ()
    _node_changes: dict[str, NodeChange] = field(default_factory=dict, repr=False)
    _resource_changes: dict[str, ResourceChange] = field(default_factory=dict, repr=False)

    @property
    def identical(self) -> bool:
        """No difference at all (edges and resource uses follow from the nodes)."""
        return not (
            self.name
            or self.output
            or self.config
            or self.nodes_added
            or self.nodes_removed
            or self.nodes_changed
            or self.edges_retyped
            or self.resources_added
            or self.resources_removed
            or self.resources_changed
        )

    def node_status(self, node_id: str) -> str:
        """``"added"``, ``"removed"``, ``"changed"`` or ``"unchanged"``."""
        if node_id in self._node_changes:
            return CHANGED
        if node_id not in self.a.nodes:
            return ADDED
        return REMOVED if node_id not in self.b.nodes else UNCHANGED

    def node_change(self, node_id: str) -> NodeChange | None:
        return self._node_changes.get(node_id)

    def resource_status(self, resource_id: str) -> str:
        if resource_id in self._resource_changes:
            return CHANGED
        if resource_id not in self.a.resources:
            return ADDED
        return REMOVED if resource_id not in self.b.resources else UNCHANGED

    def resource_change(self, resource_id: str) -> ResourceChange | None:
        return self._resource_changes.get(resource_id)

    def resource_order(self) -> tuple[str, ...]:
        """Every resource id of either plan: ``b``'s declaration order, then those only
        ``a`` has."""
        return (*self.b.resources, *(r for r in self.a.resources if r not in self.b.resources))

    def edge_type(self, edge: DataEdge, side: str) -> str | None:
        """The port type of ``edge`` in plan ``side`` (``"a"`` or ``"b"``)."""
        view = self.a if side == "a" else self.b
        node = view.nodes.get(edge.dst)
        return node.input_type(edge.port) if node is not None else None

    def summary(self) -> dict[str, int]:
        """Counts of each kind of change (keys sorted in the JSON form)."""
        both = [n for n in self.b.nodes if n in self.a.nodes]
        res_both = [r for r in self.b.resources if r in self.a.resources]
        return {
            "config_changed": len(self.config),
            "nodes_added": len(self.nodes_added),
            "nodes_removed": len(self.nodes_removed),
            "nodes_changed": len(self.nodes_changed),
            "nodes_rewired": sum(c.rewired for c in self.nodes_changed),
            "nodes_unchanged": len(both) - len(self.nodes_changed),
            "edges_added": len(self.edges_added),
            "edges_removed": len(self.edges_removed),
            "resources_added": len(self.resources_added),
            "resources_removed": len(self.resources_removed),
            "resources_changed": len(self.resources_changed),
            "resources_unchanged": len(res_both) - len(self.resources_changed),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``plangraph diff --format json``): dump with ``sort_keys=True``;
        lists are sorted (edges by head, port, tail), so the text is stable."""
        plan: dict[str, Any] = {}
        if self.name is not None:
            plan["name"] = {"a": self.name[0], "b": self.name[1]}
        if self.output is not None:
            plan["output"] = {"a": self.output[0], "b": self.output[1]}
        config = {
            ADDED: {c.name: c.b for c in self.config if c.status == ADDED},
            REMOVED: {c.name: c.a for c in self.config if c.status == REMOVED},
            CHANGED: {c.name: c.sides() for c in self.config if c.status == CHANGED},
        }
        return {
            "a": {"source": self.a_label, "plan": self.a.name},
            "b": {"source": self.b_label, "plan": self.b.name},
            "identical": self.identical,
            "plan": plan,
            "config": config,
            "nodes": {
                ADDED: {n: _node_dict(self.b, n) for n in self.nodes_added},
                REMOVED: {n: _node_dict(self.a, n) for n in self.nodes_removed},
                CHANGED: {c.id: c.to_dict() for c in self.nodes_changed},
                UNCHANGED: sorted(n for n in self.order if self.node_status(n) == UNCHANGED),
            },
            "edges": {
                ADDED: [e.to_dict(self.edge_type(e, "b")) for e in self.edges_added],
                REMOVED: [e.to_dict(self.edge_type(e, "a")) for e in self.edges_removed],
                "retyped": [
                    e.to_dict({"a": self.edge_type(e, "a"), "b": self.edge_type(e, "b")})
                    for e in self.edges_retyped
                ],
            },
            "resource_uses": {
                ADDED: [u.to_dict() for u in self.uses_added],
                REMOVED: [u.to_dict() for u in self.uses_removed],
            },
            "resources": {
                ADDED: {r: _resource_dict(self.b, r) for r in self.resources_added},
                REMOVED: {r: _resource_dict(self.a, r) for r in self.resources_removed},
                CHANGED: {c.id: c.to_dict() for c in self.resources_changed},
                UNCHANGED: sorted(
                    r for r in self.resource_order() if self.resource_status(r) == UNCHANGED
                ),
            },
            "summary": self.summary(),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text: 2-space indent, sorted keys, trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _node_dict(view: PlanView, node_id: str) -> dict[str, Any]:
    n = view.nodes[node_id]
    return {"op": n.op, "inputs": list(n.inputs), "output_type": n.output_type, "params": n.params}


def _resource_dict(view: PlanView, resource_id: str) -> dict[str, Any]:
    r = view.resources[resource_id]
    return {"kind": r.kind, "params": r.params}


def _edges(view: PlanView) -> set[DataEdge]:
    return {
        DataEdge(dst=nid, port=i, src=src)
        for nid, n in view.nodes.items()
        for i, src in enumerate(n.inputs)
    }


def _uses(view: PlanView) -> set[ResourceUse]:
    out: set[ResourceUse] = set()
    for rid, r in view.resources.items():
        out.update(ResourceUse(rid, nid, "read") for nid in r.readers)
        out.update(ResourceUse(rid, nid, "write") for nid in r.writers)
    return out


def _union_order(a: PlanView, b: PlanView, edges: Iterable[DataEdge]) -> tuple[str, ...]:
    """Every node of either plan, inputs before users where the union of both plans'
    edges allows it (the two plans may order two nodes oppositely); ties in ``b``'s order,
    a node only ``a`` has just before ``b``'s node at its old position."""
    b_pos = {n: i for i, n in enumerate(b.nodes)}
    a_pos = {n: i for i, n in enumerate(a.nodes)}

    def key(n: str) -> tuple[int, int, str]:
        return (b_pos[n], 1, n) if n in b_pos else (a_pos[n], 0, n)

    graph: nx.DiGraph = nx.DiGraph()
    graph.add_nodes_from([*b.nodes, *(n for n in a.nodes if n not in b_pos)])
    # Inputs that name no node cannot occur in a compiled plan without errors; a saved
    # plan.json edited by hand may still have them: they are not nodes to order.
    graph.add_edges_from((e.src, e.dst) for e in edges if e.src in graph and e.dst in graph)
    try:
        return tuple(nx.lexicographical_topological_sort(graph, key=key))
    except nx.NetworkXUnfeasible:  # a cycle through both plans' edges: declaration order
        return tuple(sorted(graph, key=key))


def diff_plans(
    a: PlanView, b: PlanView, *, a_label: str | None = None, b_label: str | None = None
) -> PlanDiff:
    """The changes from ``a`` to ``b`` (see :class:`PlanDiff`); never raises for two valid
    views. ``a_label``/``b_label`` default to the plan names."""
    node_changes: dict[str, NodeChange] = {}
    ea, eb = _edges(a), _edges(b)
    order = _union_order(a, b, ea | eb)
    for nid in order:
        na, nb = a.nodes.get(nid), b.nodes.get(nid)
        if na is None or nb is None:
            continue
        change = NodeChange(
            id=nid,
            op=(na.op, nb.op) if na.op != nb.op else None,
            inputs=(na.inputs, nb.inputs) if na.inputs != nb.inputs else None,
            output_type=(na.output_type, nb.output_type)
            if na.output_type != nb.output_type
            else None,
            params=diff_values(na.params, nb.params),
        )
        if change != NodeChange(id=nid):
            node_changes[nid] = change
    retyped = sorted(
        e for e in ea & eb if a.nodes[e.dst].input_type(e.port) != b.nodes[e.dst].input_type(e.port)
    )
    resource_changes: dict[str, ResourceChange] = {}
    for rid in (*b.resources, *(r for r in a.resources if r not in b.resources)):
        ra, rb = a.resources.get(rid), b.resources.get(rid)
        if ra is None or rb is None:
            continue
        rc = ResourceChange(
            id=rid,
            kind=(ra.kind, rb.kind) if ra.kind != rb.kind else None,
            params=diff_values(ra.params, rb.params),
        )
        if rc != ResourceChange(id=rid):
            resource_changes[rid] = rc
    ua, ub = _uses(a), _uses(b)
    return PlanDiff(
        a=a,
        b=b,
        a_label=a_label if a_label is not None else a.name,
        b_label=b_label if b_label is not None else b.name,
        name=(a.name, b.name) if a.name != b.name else None,
        output=(a.output, b.output) if a.output != b.output else None,
        # A run's saved plan has every param written out and no config: only the resolved
        # params (compared below) say what changed, so its missing config is no change.
        config=diff_values(a.config, b.config) if a.config and b.config else (),
        order=order,
        nodes_added=tuple(n for n in b.nodes if n not in a.nodes),
        nodes_removed=tuple(n for n in a.nodes if n not in b.nodes),
        nodes_changed=tuple(node_changes.values()),
        edges_added=tuple(sorted(eb - ea)),
        edges_removed=tuple(sorted(ea - eb)),
        edges_retyped=tuple(retyped),
        uses_added=tuple(sorted(ub - ua)),
        uses_removed=tuple(sorted(ua - ub)),
        resources_added=tuple(r for r in b.resources if r not in a.resources),
        resources_removed=tuple(r for r in a.resources if r not in b.resources),
        resources_changed=tuple(resource_changes.values()),
        _node_changes=node_changes,
        _resource_changes=resource_changes,
    )
