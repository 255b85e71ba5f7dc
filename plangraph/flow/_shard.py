"""The actor side of ``ParallelIterator``: shard pipelines run inside arbitrary actors.

The driver never needs the actor class to know about plangraph (a rollout worker cannot
import the runtime). With transforms chained on a ``ParallelIterator``, it sends
:func:`shard_init` and then :func:`shard_next` through Ray's built-in
``actor.__ray_call__.remote(fn, *args)``, which runs ``fn(actor_instance, *args)`` in the
actor. The built pipeline is a ``LocalIterator`` (with its own metrics context, local to the
actor) kept on the instance under :data:`SHARD_ATTR`, keyed by the ``ParallelIterator``:
initialising the same key again resets the chain (as RLlib's ``par_iter_init`` did); the
actor's own state (e.g. an env mid-episode) is untouched.

This module is imported inside actor processes; keep it free of driver-only imports.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from plangraph.flow import deadlines
from plangraph.flow.errors import OperatorTimeoutError
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import SharedMetrics
from plangraph.flow.sentinel import END_OF_STREAM, NOT_READY

__all__ = [
    "END_OF_STREAM",
    "SHARD_ATTR",
    "IteratorShard",
    "RemoteTransform",
    "shard_drop",
    "shard_init",
    "shard_next",
]

SHARD_ATTR = "_plangraph_shard_pipelines"


@dataclass(frozen=True)
class RemoteTransform:
    """One transform of a ``ParallelIterator`` chain, applied to each shard's stream."""

    kind: Literal["for_each", "for_each_actor", "filter", "batch", "flatten", "transform"]
    fn: Callable[..., Any] | None = None
    n: int = 0
    name: str | None = None

    def apply(self, it: LocalIterator[Any], instance: Any = None) -> LocalIterator[Any]:
        """``it`` with this transform after it; ``instance``: the actor instance it runs
        in (``for_each_actor`` calls ``fn(instance, item)``)."""
        if self.kind == "for_each":
            assert self.fn is not None
            return it.for_each(self.fn, self.name)
        if self.kind == "for_each_actor":
            assert self.fn is not None
            return it.for_each(_ActorBound(self.fn, instance), self.name)
        if self.kind == "filter":
            assert self.fn is not None
            return it.filter(self.fn, self.name)
        if self.kind == "batch":
            return it.batch(self.n)
        if self.kind == "flatten":
            return it.flatten()
        assert self.fn is not None
        return it.transform(self.fn, self.name)


class _ActorBound:
    """``fn(instance, item)`` as a one-argument map, for ``for_each_actor``."""

    def __init__(self, fn: Callable[[Any, Any], Any], instance: Any) -> None:
        self.fn = fn
        self.instance = instance

    def __call__(self, item: Any) -> Any:
        return self.fn(self.instance, item)


def shard_init(
    instance: Any,
    key: str,
    method: str,
    transforms: tuple[RemoteTransform, ...],
    source_name: str,
) -> bool:
    """Build (or rebuild) the shard pipeline ``key`` on ``instance``: repeated calls of
    ``instance.<method>()`` followed by ``transforms``. Runs in the actor."""
    bound: Callable[[], Any] = getattr(instance, method)

    def base(timeout: float | None) -> Iterator[Any]:
        while True:
            try:
                item = bound()
            except StopIteration:
                return
            if item is END_OF_STREAM:
                return
            yield item

    it: LocalIterator[Any] = LocalIterator(base, SharedMetrics(), name=source_name)
    for transform in transforms:
        it = transform.apply(it, instance)
    pipelines: dict[str, LocalIterator[Any]] | None = getattr(instance, SHARD_ATTR, None)
    if pipelines is None:
        pipelines = {}
        setattr(instance, SHARD_ATTR, pipelines)
    pipelines[key] = it
    return True


_RETRY_MIN_S = 0.0005
_RETRY_MAX_S = 0.02


def shard_next(instance: Any, key: str) -> Any:
    """The next item of shard pipeline ``key``, or ``END_OF_STREAM``. Runs in the actor.

    A shard call is a blocking request, so a ``NOT_READY`` from the pipeline (an operator
    asking to be retried) is retried here with a short growing sleep rather than returned,
    for at most ``deadlines.REPLY_DEADLINE_S`` seconds (the driver gives up on the call
    then too); past it raises ``OperatorTimeoutError`` naming the pipeline's last node.
    """
    pipelines: dict[str, LocalIterator[Any]] = getattr(instance, SHARD_ATTR, {})
    it = pipelines.get(key)
    if it is None:
        raise RuntimeError(
            f"shard pipeline {key!r} is not initialised on this actor "
            f"({type(instance).__name__}); was the actor restarted? Rebuild the iterator."
        )
    delay = _RETRY_MIN_S
    deadline_s = deadlines.REPLY_DEADLINE_S
    until = time.monotonic() + deadline_s
    while True:
        item = next(it, END_OF_STREAM)
        if item is not NOT_READY:
            return item
        if time.monotonic() > until:
            raise OperatorTimeoutError(
                it.name,
                f"OperatorTimeoutError: the shard pipeline {key!r} on this "
                f"{type(instance).__name__} actor yielded only NOT_READY for {deadline_s:g} s "
                "(deadlines.REPLY_DEADLINE_S): an operator in it keeps asking to be called "
                "again; what is it waiting for, and can it come while the actor retries?",
            )
        time.sleep(delay)
        delay = min(2 * delay, _RETRY_MAX_S)


def shard_drop(instance: Any, key: str) -> None:
    """Forget shard pipeline ``key`` on ``instance``. Runs in the actor."""
    getattr(instance, SHARD_ATTR, {}).pop(key, None)


class IteratorShard:
    """A toy shard actor over one iterable (``ParallelIterator.from_iterators``/``from_items``).

    ``source`` is an iterable or a zero-argument callable returning one (generator objects
    cannot be pickled; pass the generator function). ``next_item()`` returns the next element
    or ``END_OF_STREAM``; ``repeat=True`` restarts the source forever.
    """

    def __init__(self, source: Iterable[Any] | Callable[[], Iterable[Any]], repeat: bool) -> None:
        self._source = source
        self._repeat = repeat
        self._it = self._make()

    def _make(self) -> Iterator[Any]:
        return iter(self._source() if callable(self._source) else self._source)

    def next_item(self) -> Any:
        restarted = False
        while True:
            item = next(self._it, END_OF_STREAM)
            if item is not END_OF_STREAM or not self._repeat or restarted:
                return item  # an empty source ends even with repeat=True
            restarted = True
            fresh = self._make()
            if fresh is self._it:
                raise ValueError(
                    "repeat=True needs a re-iterable source or a callable returning a fresh "
                    "iterator, got a one-shot iterator"
                )
            self._it = fresh
