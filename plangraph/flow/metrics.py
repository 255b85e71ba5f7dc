"""The shared metrics context of a dataflow (RLlib Flow ``iter_metrics``, reference 2.8).

One :class:`MetricsContext` belongs to each dataflow: counters (env steps sampled/trained,
target updates, ...), timers (mean over the last 10 samples), an ``info`` dict (learner
stats) and ``current_actor`` (the actor that produced the item being processed, set by
``gather_async``). Operators reach it with :func:`get_metrics` while the iterator runs them;
a union points all its inputs at one merged context.

Deliberate deviation from RLlib 1.0.1: the thread-local "current context" is restored after
each pull, so ``get_metrics()`` outside an operator call raises instead of returning a stale
context of whichever iterator ran last.
"""

from __future__ import annotations

import copy
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from plangraph.flow.profile import PHASES, FlowProfile
from plangraph.flow.timer import Timer

__all__ = [
    "MetricsContext",
    "SharedMetrics",
    "current_profile",
    "get_metrics",
    "metrics_context",
    "phase",
]


class MetricsContext:
    """Counters, timers, info and current actor of one dataflow.

    ``counters``: ``dict[str, int]``, missing keys read as 0 (e.g. ``num_env_steps_sampled``
    in env steps). ``timers``: ``dict[str, Timer]``, created on first access. ``info``:
    free-form dict (e.g. ``info["learner"]`` = learner stats). ``current_actor``: the actor
    handle whose result is being processed, or ``None``. ``current_ref``: ``(object ref,
    item)`` of that result (``gather_async``), so an operator receiving that very item can
    pass the ref on, actor to actor, instead of sending the item again; or ``None``.
    ``profile``: exclusive time per plan node and per phase (``plangraph.flow.profile``).
    """

    def __init__(self) -> None:
        self.counters: defaultdict[str, int] = defaultdict(int)
        self.timers: defaultdict[str, Timer] = defaultdict(Timer)
        self.info: dict[str, Any] = {}
        self.current_actor: Any = None
        self.current_ref: tuple[Any, Any] | None = None
        self.profile = FlowProfile()

    def save(self) -> dict[str, Any]:
        """Checkpoint state: ``{"counters": dict, "info": dict, "timers": None}``.

        Timers and the profile are not persisted (a restored run starts timing afresh).
        """
        return {
            "counters": dict(self.counters),
            "info": copy.deepcopy(self.info),
            "timers": None,
        }

    def restore(self, values: dict[str, Any]) -> None:
        """Refill counters and info from :meth:`save` output and reset all timers and the
        profile.

        Raises ``ValueError`` if ``values`` lacks ``counters`` or ``info``.
        """
        missing = {"counters", "info"} - set(values)
        if missing:
            raise ValueError(
                f"MetricsContext.restore: saved state lacks {sorted(missing)}; "
                "pass the dict returned by MetricsContext.save()"
            )
        self.counters.clear()
        self.counters.update({str(k): int(v) for k, v in values["counters"].items()})
        self.timers.clear()
        self.profile.reset()
        self.info = copy.deepcopy(dict(values["info"]))

    @classmethod
    def merged(cls, contexts: Iterable[MetricsContext]) -> MetricsContext:
        """A fresh context holding the sum of the counters and the union of the info of the
        distinct ``contexts``; timers, the profile and current actor carry over from the
        first that has them. Plans are lazy, so these are normally still empty when a
        union is built."""
        out = cls()
        seen: set[int] = set()
        for ctx in contexts:
            if id(ctx) in seen:
                continue
            if not seen:
                out.profile = ctx.profile
            seen.add(id(ctx))
            for key, value in ctx.counters.items():
                out.counters[key] += value
            for key, value in ctx.info.items():
                out.info.setdefault(key, value)
            for key, timer in ctx.timers.items():
                out.timers.setdefault(key, timer)
            if out.current_actor is None:
                out.current_actor = ctx.current_actor
        return out


class SharedMetrics:
    """An indirection cell to a :class:`MetricsContext`, shared along an iterator chain.

    ``set(ctx)`` re-points this cell and, recursively, every parent cell, which is how a
    union makes all its inputs (and their upstream chains) share one context.
    """

    def __init__(
        self,
        metrics: MetricsContext | None = None,
        parents: Iterable[SharedMetrics] = (),
    ) -> None:
        self.parents = list(parents)
        if metrics is None:
            metrics = MetricsContext.merged(p.get() for p in self.parents)
        self.metrics = metrics
        if self.parents:
            self.set(metrics)

    def get(self) -> MetricsContext:
        return self.metrics

    def set(self, metrics: MetricsContext) -> None:
        self.metrics = metrics
        for parent in self.parents:
            parent.set(metrics)


_current = threading.local()


def get_metrics() -> MetricsContext:
    """The metrics context of the dataflow whose operator is running now.

    Raises ``ValueError`` when called outside an operator call (outside a pull of a
    ``LocalIterator``), where no dataflow is current.
    """
    ctx = getattr(_current, "ctx", None)
    if ctx is None:
        raise ValueError(
            "get_metrics() called outside an operator call: the metrics context is only "
            "available while an iterator runs an operator (for_each/filter/combine or a "
            "source); read it from the iterator's `shared_metrics.get()` instead"
        )
    return ctx


@contextmanager
def metrics_context(ctx: MetricsContext) -> Iterator[MetricsContext]:
    """Make ``ctx`` current for the block and restore the previous context afterwards."""
    prev = getattr(_current, "ctx", None)
    _current.ctx = ctx
    try:
        yield ctx
    finally:
        _current.ctx = prev


def _swap(ctx: MetricsContext | None) -> MetricsContext | None:
    """Fast-path variant of :func:`metrics_context` for the per-item pull loop."""
    prev = getattr(_current, "ctx", None)
    _current.ctx = ctx
    return prev


def current_profile() -> FlowProfile | None:
    """The profile of the flow whose operator is running now; ``None`` outside a pull."""
    ctx = getattr(_current, "ctx", None)
    return None if ctx is None else ctx.profile


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase ``name`` of the current flow's profile (a no-op outside a
    pull; see ``plangraph.flow.profile``).

    Raises ``ValueError`` for a name not in ``plangraph.flow.profile.PHASES``.
    """
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}; expected one of {PHASES}")
    profile = current_profile()
    if profile is None:
        yield
        return
    with profile.phase(name):
        yield
