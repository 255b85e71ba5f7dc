"""Where a plan's rollout workers would go on a known cluster: Ray's placement strategies
replayed over the nodes' resources (``Capacity.nodes``), before anything starts.

Used by the "capacity" check (an unplaceable request is a located diagnostic, PG187) and
by ``plangraph explain --address`` (each worker's expected node). It follows Ray's
documented semantics, not its scheduler's code: ``PACK`` fills one node before the next,
``SPREAD`` puts each bundle on the node holding the fewest so far, ``STRICT_SPREAD`` on a
node of its own; without a placement group (``None``) each actor goes where it fits, as
``SPREAD`` would. Nodes are taken in the order given (the cluster's, by node id), free
resources shrink as bundles are placed, and worker sets are placed one after the other.
Ray's ``SPREAD`` and default scheduling are best effort, so a running cluster may choose
other nodes among those that fit; whether a request fits at all is exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from plangraph.compiler.capacity import NodeCapacity

__all__ = ["Placement", "fits", "place_bundles"]


@dataclass(frozen=True)
class Placement:
    """``nodes[i]``: the index (into the cluster's nodes) of worker ``i + 1``'s node, or
    ``None`` for a worker that fits nowhere; ``problem``: why not all were placed."""

    nodes: tuple[int | None, ...]
    problem: str | None = None


def fits(bundle: Mapping[str, float], free: Mapping[str, float]) -> bool:
    """Whether ``bundle`` fits in ``free`` (every resource it asks for, Ray's names)."""
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in bundle.items())


def place_bundles(
    bundle: Mapping[str, float],
    count: int,
    strategy: str | None,
    nodes: Sequence[NodeCapacity],
    free: list[dict[str, float]] | None = None,
) -> Placement:
    """Place ``count`` copies of ``bundle`` with ``strategy`` (``"PACK"``, ``"SPREAD"``,
    ``"STRICT_SPREAD"`` or ``None``) on ``nodes``.

    Args:
        free: each node's free resources, updated in place (pass the same list to place
            several worker sets one after the other); default: all of each node.
    """
    if free is None:
        free = [n.amounts for n in nodes]
    chosen: list[int | None] = []
    counts = [0] * len(nodes)
    for _ in range(count):
        ok = [i for i in range(len(nodes)) if fits(bundle, free[i])]
        if strategy == "STRICT_SPREAD":
            ok = [i for i in ok if counts[i] == 0]
        if not ok:
            chosen.append(None)
            continue
        if strategy == "PACK":
            # The node already holding the most (then the first): fill one node at a time.
            pick = max(ok, key=lambda i: (counts[i], -i))
        else:
            pick = min(ok, key=lambda i: (counts[i], i))
        counts[pick] += 1
        for k, v in bundle.items():
            free[pick][k] = free[pick].get(k, 0.0) - v
        chosen.append(pick)
    missing = sum(1 for c in chosen if c is None)
    if not missing:
        return Placement(tuple(chosen))
    holders = [i for i, n in enumerate(nodes) if fits(bundle, n.amounts)]
    if not holders:
        problem = "no node can hold one"
    elif strategy == "STRICT_SPREAD" and count > len(holders):
        problem = (
            f"STRICT_SPREAD needs a node per worker, and only {len(holders)} node"
            f"{'s' * (len(holders) != 1)} can hold one"
        )
    else:
        problem = f"{missing} of them find no node with room left"
    return Placement(tuple(chosen), problem)
