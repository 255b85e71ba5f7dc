"""Where a dataflow's wall time goes: exclusive time per stream and time per phase.

A pull-based flow runs in one thread: pulling the output pulls its inputs, which pull
theirs. :meth:`FlowProfile.wrap` marks the boundary of one named stream (a plan node):
the time a pull spends inside it, minus the time spent inside the marked streams it pulls
in turn, is that stream's *exclusive* time. Summed over the streams this is exactly the
time spent inside pulls of the outermost marked stream (``wall_s``), so every second is
attributed to one node and none twice.

A *phase* says what the running stream is doing: waiting on rollout workers
(``sampling``), fetching their results (``object_store``), updating the policy
(``learning``), sending weights (``broadcast``), or waiting on something local such as a
learner thread's queue (``idle``). ``plangraph.flow.metrics.phase`` times a block under a
phase name (through the current flow's profile, :meth:`FlowProfile.phase`), counted
for the phase and for the stream that runs it; time in nested marked streams is theirs,
not the phase's. Whatever a stream does outside a phase is "other" work.

The profile lives in the flow's :class:`~plangraph.flow.metrics.MetricsContext`
(``ctx.profile``). Not thread-safe: only the thread that pulls the flow records.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from plangraph.flow.timer import Timer

__all__ = ["PHASES", "FlowProfile", "NodeTotals"]

PHASES: tuple[str, ...] = ("sampling", "object_store", "learning", "broadcast", "idle")
"""Phase names, in the order reports list them (time in no phase is "other")."""

_clock = time.perf_counter


@dataclass
class NodeTotals:
    """What one marked stream did since the profile started.

    Attributes:
        seconds: exclusive wall time inside its pulls (s).
        items: real items it emitted (``NOT_READY`` excluded).
        pulls: pulls answered, sentinels included.
        phases: seconds of its exclusive time spent in each phase (s).
    """

    seconds: float = 0.0
    items: int = 0
    pulls: int = 0
    phases: dict[str, float] = field(default_factory=dict)


class _Frame:
    __slots__ = ("child", "node", "phase", "start")

    def __init__(self, node: str, phase_name: str | None) -> None:
        self.node = node
        self.phase = phase_name
        self.child = 0.0  # seconds spent in nested marked streams
        self.start = _clock()


class FlowProfile:
    """Exclusive time, items and phases per marked stream of one flow.

    Attributes:
        nodes: ``NodeTotals`` by stream (plan node) id, in first-pulled order.
        phases: seconds per phase over all streams (s).
        wall_s: seconds spent inside pulls of outermost marked streams (s); the sum of
            every ``nodes[...].seconds``.
    """

    def __init__(self) -> None:
        self.nodes: dict[str, NodeTotals] = {}
        self.phases: dict[str, float] = {}
        self.wall_s = 0.0
        self._stack: list[_Frame] = []
        self._since_item: dict[str, float] = {}

    def reset(self) -> None:
        """Forget everything recorded (a restored run starts timing afresh)."""
        self.nodes.clear()
        self.phases.clear()
        self.wall_s = 0.0
        self._since_item.clear()

    def wrap(
        self, node_id: str, it: Iterator[Any], timers: Mapping[str, Timer], not_ready: object
    ) -> Iterator[Any]:
        """``it`` with each pull timed as stream ``node_id``.

        Each real item (anything but the ``not_ready`` marker) also pushes the stream's
        exclusive seconds since its previous item to ``timers[node_id]`` (so a timer's
        mean is seconds per item emitted).
        """
        totals = self._totals(node_id)
        stack = self._stack
        while True:
            frame = _Frame(node_id, None)
            stack.append(frame)
            try:
                item = next(it)
            except StopIteration:
                self._close(stack.pop(), totals)
                return
            except BaseException:
                self._close(stack.pop(), totals)
                raise
            self._count(node_id, totals, self._close(stack.pop(), totals), item, timers, not_ready)
            yield item

    def call(
        self,
        node_id: str,
        fn: Callable[[Any], Any],
        item: Any,
        timers: Mapping[str, Timer],
        not_ready: object,
    ) -> Any:
        """``fn(item)`` timed as one pull of stream ``node_id``, as :meth:`wrap` times a
        pull: for a node whose work runs inside another stream's pull (the steps of a
        fused stage, pass ``map-fusion``), so that it keeps its own totals, timer and
        phases."""
        totals = self._totals(node_id)
        frame = _Frame(node_id, None)
        self._stack.append(frame)
        try:
            out = fn(item)
        finally:
            exclusive = self._close(self._stack.pop(), totals)
        self._count(node_id, totals, exclusive, out, timers, not_ready)
        return out

    def _totals(self, node_id: str) -> NodeTotals:
        totals = self.nodes.get(node_id)
        if totals is None:
            totals = self.nodes[node_id] = NodeTotals()
        return totals

    def _count(
        self,
        node_id: str,
        totals: NodeTotals,
        exclusive: float,
        item: Any,
        timers: Mapping[str, Timer],
        not_ready: object,
    ) -> None:
        totals.pulls += 1
        pending = self._since_item.get(node_id, 0.0) + exclusive
        if item is not_ready:
            self._since_item[node_id] = pending
        else:
            totals.items += 1
            self._since_item[node_id] = 0.0
            timers[node_id].push(pending)

    def _close(self, frame: _Frame, totals: NodeTotals) -> float:
        elapsed = _clock() - frame.start
        exclusive = elapsed - frame.child
        totals.seconds += exclusive
        if self._stack:
            self._stack[-1].child += elapsed
        else:
            self.wall_s += elapsed
        return exclusive

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the block as phase ``name`` of the stream that runs it (see module doc)."""
        stack = self._stack
        owner = next((f.node for f in reversed(stack) if f.phase is None), None)
        frame = _Frame(owner or "", name)
        stack.append(frame)
        try:
            yield
        finally:
            stack.pop()
            seconds = _clock() - frame.start - frame.child
            self.phases[name] = self.phases.get(name, 0.0) + seconds
            if owner is not None:
                node_phases = self.nodes[owner].phases
                node_phases[name] = node_phases.get(name, 0.0) + seconds
            # Nested streams' time stays theirs: the enclosing frame discounts it, the
            # phase's own time stays in the enclosing stream's exclusive time.
            if stack:
                stack[-1].child += frame.child

    def snapshot(self) -> dict[str, Any]:
        """Plain data: ``{"wall_s", "phases": {name: s}, "nodes": {id: {"seconds",
        "items", "pulls", "phases"}}}`` (phases and node ids sorted)."""
        return {
            "wall_s": self.wall_s,
            "phases": {k: self.phases[k] for k in sorted(self.phases)},
            "nodes": {
                nid: {
                    "seconds": t.seconds,
                    "items": t.items,
                    "pulls": t.pulls,
                    "phases": {k: t.phases[k] for k in sorted(t.phases)},
                }
                for nid, t in sorted(self.nodes.items())
            },
        }
