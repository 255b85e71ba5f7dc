"""The analysis graph: the plan's one dataflow topology and the queries on it.

Every question about who feeds whom (a node's users, its ancestors, the topological
order, the ops upstream of a node) is answered here, from one ``networkx.DiGraph``, so
the checks, the compiled plan, the renderer and the lowering never rebuild it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

__all__ = ["Topology"]


@dataclass
class Topology:
    """The dataflow graph of one plan, with declaration order for deterministic answers.

    ``graph``: a ``networkx.DiGraph`` over node ids; node attribute ``op``; one edge
    ``src -> dst`` per pair, with attributes ``index`` (the last input port of ``dst``
    reading ``src``), ``ports`` (every such port, ascending) and, once types are inferred,
    ``type``. An input naming no node is not an edge. ``order``: the topological order
    (filled by the "cycles" check; empty before it ran); ``cyclic``: the nodes on a cycle.

    Filled in by the checks "graph", "cycles" and "types"; read-only afterwards.
    """

    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    order: tuple[str, ...] = ()
    cyclic: frozenset[str] = frozenset()
    _rank: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, nodes: Mapping[str, tuple[str, Sequence[str]]]) -> Topology:
        """The graph of ``nodes`` (``{id: (op, input ids in port order)}``, in declaration
        order). Inputs that name no node are left out (the "graph" check reports them)."""
        topo = cls()
        g = topo.graph
        for rank, (nid, (op, _inputs)) in enumerate(nodes.items()):
            g.add_node(nid, op=op)
            topo._rank[nid] = rank
        for nid, (_op, inputs) in nodes.items():
            for i, src in enumerate(inputs):
                if src not in nodes:
                    continue
                if g.has_edge(src, nid):
                    data = g.edges[src, nid]
                    data["index"] = i
                    data["ports"] = (*data["ports"], i)
                else:
                    g.add_edge(src, nid, index=i, ports=(i,))
        return topo

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

    def kahn_order(self) -> tuple[str, ...]:
        """Kahn's algorithm, ties broken by declaration order; nodes on or after a cycle
        go last, in declaration order."""
        g = self.graph
        indeg = {n: g.in_degree(n) for n in g}
        heap = [(self._rank[n], n) for n, d in indeg.items() if d == 0]
        heapq.heapify(heap)
        order: list[str] = []
        while heap:
            _, n = heapq.heappop(heap)
            order.append(n)
            for m in g.successors(n):
                indeg[m] -= 1
                if indeg[m] == 0:
                    heapq.heappush(heap, (self._rank[m], m))
        done = set(order)
        return (*order, *(n for n in self._rank if n not in done))

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
        if node_id not in self.graph:
            return ()
        out: list[str] = []
        for v in self.sort(self.graph.successors(node_id)):
            out += [v] * len(self.graph.edges[node_id, v]["ports"])
        return tuple(out)

    def ancestors(self, node_id: str) -> frozenset[str]:
        """Every node with a path to ``node_id``, never ``node_id`` itself (not even on a
        cycle). Empty for an unknown id."""
        if node_id not in self.graph:
            return frozenset()
        return frozenset(nx.ancestors(self.graph, node_id))

    def descendants(self, node_id: str) -> frozenset[str]:
        """Every node ``node_id`` has a path to, never ``node_id`` itself."""
        if node_id not in self.graph:
            return frozenset()
        return frozenset(nx.descendants(self.graph, node_id))

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
        g = self.graph
        common = (self.descendants(a) | {a}) & (self.descendants(b) | {b})
        return any(g.in_degree(n) >= 2 and is_merge(n) for n in common)
