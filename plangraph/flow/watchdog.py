"""The idle watchdog: a blocking consumer that gets nothing for too long raises instead of
hanging.

A plan can run forever without producing anything: a ``LocalReplay`` that never reaches
``learning_starts`` while its ``Concurrently`` only emits the replay branch keeps the
rollouts going (counters grow) and the output silent. The blocking end of the flow (the
sink, through :func:`plangraph.flow.sentinel.ready_items`) arms a :class:`Watchdog`;
while the sink pulls, the loops that can run without handing it an item (a union's
rounds, the sink's own idle waits) call :func:`check_watchdog`, and sources that yield
``NOT_READY`` for a reason of their own say so with :func:`note_waiting`. When no item
reached the sink for ``max_idle_s`` seconds, :class:`PlanStalledError` names the starved
node, what it waits for and what the ``describe`` callback of the sink reports (counters).

Nothing here runs unless a watchdog is armed (RLlib Flow has none: the default of the
sink's ``max_idle_s`` is 0, off). The state is thread-local: the sink pulls in the
driver's thread, and a watchdog never fires from another flow's thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from plangraph.flow.errors import OperatorError

__all__ = ["PlanStalledError", "Watchdog", "check_watchdog", "note_waiting"]


class PlanStalledError(OperatorError):
    """No item reached the sink for ``max_idle_s`` seconds while the flow kept running.

    ``node_id`` is the starved node (the last source that said why it was not ready, else
    the sink); ``sink`` the node that waited; ``waiting`` what each not-ready node said.
    """

    def __init__(
        self, node_id: str, detail: str, sink: str = "", waiting: dict[str, str] | None = None
    ) -> None:
        self.sink = sink
        self.waiting = dict(waiting or {})
        super().__init__(node_id, detail)

    def __reduce__(self) -> tuple[type[PlanStalledError], tuple[object, ...]]:  # type: ignore[override]
        return (type(self), (self.node_id, self.detail, self.sink, self.waiting))


_state = threading.local()


class Watchdog:
    """Raises :class:`PlanStalledError` when ``sink`` got no item for ``max_idle_s`` s.

    Args:
        sink: plan node id of the blocking consumer.
        max_idle_s: seconds without an item before raising (> 0).
        describe: called once when it fires; returns extra lines for the message (e.g.
            the counters and how they moved while the sink waited).
        on_progress: called at every :meth:`progress` (e.g. to snapshot those counters).

    Raises:
        ValueError: ``max_idle_s <= 0``.
    """

    def __init__(
        self,
        sink: str,
        max_idle_s: float,
        describe: Callable[[], str],
        on_progress: Callable[[], None] | None = None,
    ) -> None:
        if not max_idle_s > 0:
            raise ValueError(f"Watchdog: max_idle_s must be > 0 s, got {max_idle_s!r}")
        self.sink = sink
        self.max_idle_s = float(max_idle_s)
        self.describe = describe
        self.on_progress = on_progress
        self._waiting: dict[str, Callable[[], str]] = {}
        self._deadline = time.monotonic() + self.max_idle_s

    def progress(self) -> None:
        """An item reached the sink (or the sink's consumer pulled again): restart the clock
        and forget which nodes were waiting."""
        self._deadline = time.monotonic() + self.max_idle_s
        self._waiting.clear()
        if self.on_progress is not None:
            self.on_progress()

    def waiting(self, node_id: str, why: Callable[[], str]) -> None:
        """Record that ``node_id`` yielded ``NOT_READY``; ``why()`` is called only if the
        watchdog fires."""
        self._waiting.pop(node_id, None)  # keep the most recent last
        self._waiting[node_id] = why

    def check(self) -> None:
        """Raise :class:`PlanStalledError` if the deadline passed."""
        if time.monotonic() <= self._deadline:
            return
        waiting = {node: _safe(why) for node, why in self._waiting.items()}
        starved = next(reversed(waiting), self.sink) if waiting else self.sink
        lines = [
            f"PlanStalledError: no item reached plan node {self.sink!r} for "
            f"{self.max_idle_s:g} s (max_idle_s) while the flow kept running"
        ]
        lines += [f"  {node!r} is not ready: {why}" for node, why in waiting.items()]
        if not waiting:
            lines.append("  no upstream node said why it held items back")
        extra = _safe(self.describe)
        if extra:
            lines.append(extra)
        lines.append(
            "Hint: a node that can never produce (a replay buffer that never reaches "
            "learning_starts, a Concurrently whose output_indexes only name a starved "
            "branch) stalls the plan; if the plan is merely slow, raise max_idle_s "
            "(0 turns the watchdog off)."
        )
        raise PlanStalledError(starved, "\n".join(lines), self.sink, waiting)

    @contextmanager
    def armed(self) -> Iterator[None]:
        """Make this the current thread's watchdog while the sink pulls (nests)."""
        previous = getattr(_state, "watchdog", None)
        _state.watchdog = self
        try:
            yield
        finally:
            _state.watchdog = previous


def _safe(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except Exception as exc:  # a broken description must not hide the stall itself
        return f"(description failed: {type(exc).__name__}: {exc})"


def check_watchdog() -> None:
    """Raise :class:`PlanStalledError` if the current thread's armed watchdog expired; a
    thread-local read when none is armed. Called by loops that may run without yielding
    to the sink (a union's rounds)."""
    watchdog = getattr(_state, "watchdog", None)
    if watchdog is not None:
        watchdog.check()


def note_waiting(node_id: str, why: Callable[[], str]) -> None:
    """Tell the armed watchdog (if any) that ``node_id`` is yielding ``NOT_READY`` and why
    (``why()`` is evaluated only when it fires)."""
    watchdog = getattr(_state, "watchdog", None)
    if watchdog is not None:
        watchdog.waiting(node_id, why)
