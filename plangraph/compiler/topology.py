"""The analysis graph: the plan's one dataflow topology and the queries on it.

Every question about who feeds whom (a node's users, its ancestors, the topological
order, the ops upstream of a node) is answered here, from one adjacency, so the checks,
the compiled plan, the renderer and the lowering never rebuild it.

The checks of an acyclic plan need only reachability and Kahn's order, which walk plain
dictionaries here; ``graph`` (a ``networkx.DiGraph``, for callers and for the strongly
connected components of a cyclic plan) is built on first use. Importing networkx takes
about 0.2 s, a third of ``plangraph validate``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Topology", "reachable"]


def reachable(adjacency: Mapping[str, Iterable[str]], start: str) -> set[str]:
    """Every node reached from ``start`` by one edge or more of ``adjacency``
    (``{node: its neighbours}``); ``start`` itself only when it lies on a cycle."""
    seen: set[str] = set()
    stack = list(adjacency.get(start, ()))
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(adjacency.get(n, ()))
    return seen


@dataclass
class Topology:
    """The dataflow graph of one plan, with declaration order for deterministic answers.

    Nodes are node ids with attribute ``op`` (and ``type`` once types are inferred); one
    edge ``src -> dst`` per pair, with attributes ``index`` (the last input port of
    ``dst`` reading ``src``), ``ports`` (every such port, ascending) and, once types are
    inferred, ``type``. An input naming no node is not an edge. ``order``: the
    topological order (filled by the "cycles" check; empty before it ran); ``cyclic``:
    the nodes on a cycle. ``graph``: the same as a ``networkx.DiGraph``.

    Filled in by the checks "graph", "cycles" and "types"; read-only afterwards.
    """

    order: tuple[str, ...] = ()
    cyclic: frozenset[str] = frozenset()
    _rank: dict[str, int] = field(default_factory=dict, repr=False)
    _nodes: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _succ: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict, repr=False)
    _pred: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict, repr=False)
    _graph: nx.DiGraph | None = field(default=None, repr=False)

    @classmethod
    def build(cls, nodes: Mapping[str, tuple[str, Sequence[str]]]) -> Topology:
        """The graph of ``nodes`` (``{id: (op, input ids in port order)}``, in declaration
        order). Inputs that name no node are left out (the "graph" check reports them)."""
        topo = cls()
        for rank, (nid, (op, _inputs)) in enumerate(nodes.items()):
            topo._nodes[nid] = {"op": op}
            topo._succ[nid] = {}
            topo._pred[nid] = {}
            topo._rank[nid] = rank
        for nid, (_op, inputs) in nodes.items():
            for i, src in enumerate(inputs):
                if src not in nodes:
                    continue
                data = topo._succ[src].get(nid)
                if data is not None:
                    data["index"] = i
                    data["ports"] = (*data["ports"], i)
                else:
                    data = {"index": i, "ports": (i,)}
                    topo._succ[src][nid] = data
                    topo._pred[nid][src] = data
        return topo

    # -- the graph ------------------------------------------------------------------------

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[str]:
        """Node ids in declaration order."""
        return iter(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def has_edge(self, src: str, dst: str) -> bool:
        return dst in self._succ.get(src, {})

    def successors(self, node_id: str) -> Iterator[str]:
        """The nodes reading ``node_id`` (each once), in the order their edges were made."""
        return iter(self._succ[node_id])

    def in_degree(self, node_id: str) -> int:
        """How many distinct nodes ``node_id`` reads."""
        return len(self._pred[node_id])

    def set_edge_type(self, src: str, dst: str, port_type: Any) -> None:
        """Record the type of the stream on edge ``src -> dst`` (the "types" check)."""
        self._succ[src][dst]["type"] = port_type
        self._graph = None

    def set_node_types(self, types: Mapping[str, Any]) -> None:
        """Record every node's output type (``None`` where unknown)."""
        for nid, attrs in self._nodes.items():
            attrs["type"] = types.get(nid)
        self._graph = None

    @property
    def graph(self) -> nx.DiGraph:
        """The topology as a ``networkx.DiGraph`` (node attributes ``op``, ``type``; edge
        attributes ``index``, ``ports``, ``type``), built on first use."""
        if self._graph is None:
            import networkx as nx

            g = nx.DiGraph()
            g.add_nodes_from((n, dict(a)) for n, a in self._nodes.items())
            g.add_edges_from(
                (u, v, dict(d)) for u, targets in self._succ.items() for v, d in targets.items()
            )
            self._graph = g
        return self._graph

    # -- order ----------------------------------------------------------------------------

    def rank(self, node_id: str) -> int:
        """Declaration index of ``node_id`` (0 for the first node of the plan)."""
        return self._rank[node_id]

    def declaration_order(self) -> tuple[str, ...]:
        """Node ids as the plan declares them."""
        return tuple(self._rank)

    def sort(self, node_ids: Iterable[str]) -> tuple[str, ...]:
        """``node_ids`` in declaration order (the tie-break of every query here)."""
        return tuple(sorted(node_ids, key=self._rank.__getitem__))

    def _kahn(self) -> list[str]:
        """The nodes Kahn's algorithm takes, ties broken by declaration order: every node
        but those on or after a cycle."""
        indeg = {n: len(p) for n, p in self._pred.items()}
        heap = [(self._rank[n], n) for n, d in indeg.items() if d == 0]
        heapq.heapify(heap)
        order: list[str] = []
        while heap:
            _, n = heapq.heappop(heap)
            order.append(n)
            for m in self._succ[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    heapq.heappush(heap, (self._rank[m], m))
        return order

    def kahn_order(self) -> tuple[str, ...]:
        """Kahn's algorithm, ties broken by declaration order; nodes on or after a cycle
        go last, in declaration order."""
        order = self._kahn()
        done = set(order)
        return (*order, *(n for n in self._rank if n not in done))

    def is_acyclic(self) -> bool:
        """No cycle (a self-loop counts): Kahn's algorithm takes every node."""
        return len(self._kahn()) == len(self._nodes)

    def topological_order(self) -> tuple[str, ...]:
        """Every node id, inputs before users (see :meth:`kahn_order`); the order the
        "cycles" check recorded, or declaration order if it did not run."""
        if not self.order:
            return self.declaration_order()
        seen = set(self.order)
        return (*self.order, *(n for n in self._rank if n not in seen))

    # -- neighbourhoods -------------------------------------------------------------------

    def users(self, node_id: str) -> tuple[str, ...]:
        """Ids of the nodes reading ``node_id``'s stream, in declaration order, one entry
        per input port (a node reading it twice appears twice). ``()`` for an unknown id."""
        if node_id not in self._nodes:
            return ()
        out: list[str] = []
        for v in self.sort(self._succ[node_id]):
            out += [v] * len(self._succ[node_id][v]["ports"])
        return tuple(out)

    def predecessors_map(self) -> dict[str, set[str]]:
        """``{node: the nodes it reads}``, a copy to extend (``check_reachability``)."""
        return {n: set(p) for n, p in self._pred.items()}

    def ancestors(self, node_id: str) -> frozenset[str]:
        """Every node with a path to ``node_id``, never ``node_id`` itself (not even on a
        cycle). Empty for an unknown id."""
        if node_id not in self._nodes:
            return frozenset()
        return frozenset(reachable(self._pred, node_id) - {node_id})

    def descendants(self, node_id: str) -> frozenset[str]:
        """Every node ``node_id`` has a path to, never ``node_id`` itself."""
        if node_id not in self._nodes:
            return frozenset()
        return frozenset(reachable(self._succ, node_id) - {node_id})

    def upstream(self, node_id: str, where: Callable[[str], bool] | None = None) -> tuple[str, ...]:
        """The ancestors of ``node_id`` for which ``where(id)`` holds (all without it), in
        topological order."""
        anc = self.ancestors(node_id)
        return tuple(
            n for n in self.topological_order() if n in anc and (where is None or where(n))
        )

    def merges_driving(self, a: str, b: str, is_merge: Callable[[str], bool]) -> bool:
        """Whether some node with two or more inputs that ``is_merge`` accepts is
        downstream of (or is) both ``a`` and ``b``: the node that drives both branches."""
        common = (self.descendants(a) | {a}) & (self.descendants(b) | {b})
        return any(self.in_degree(n) >= 2 and is_merge(n) for n in common)
