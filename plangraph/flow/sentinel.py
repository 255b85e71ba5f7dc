"""The not-ready protocol: the ``NOT_READY`` sentinel and the idle-wait hints behind it.

A stream that cannot produce an item right now *yields* ``NOT_READY`` (it is never raised);
every built-in transform passes it through untouched and a union moves on to its next
input (RLlib Flow's ``_NextValueNotReady``, reference section 2.1).

RLlib Flow's async union spun on the CPU when every input was idle (ray-project/ray#16162).
Here a source that yields ``NOT_READY`` because it waits on Ray object refs *notes* those
refs with :func:`note_pending`; a union whose inputs were all idle for a whole round then
blocks in ``ray.wait`` on them instead of spinning. A source that notes nothing is waiting
on something local (a sibling of a ``duplicate``, a queue fed by a thread, a replay buffer
below ``learning_starts``) and the union falls back to a short, growing sleep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar

if TYPE_CHECKING:
    from plangraph.flow.watchdog import Watchdog

__all__ = [
    "END_OF_STREAM",
    "NOT_READY",
    "EndOfStreamType",
    "IdleWaiter",
    "NotReadyType",
    "PendingNote",
    "note_local_wait",
    "note_pending",
    "ready_items",
]

T = TypeVar("T")


class _Sentinel:
    """A process-wide singleton marker, named ``_name``, that unpickles as itself.

    Markers cross process boundaries inside Ray results, and the pull loops compare them
    with ``is``; ``__reduce__`` returning a string means "the module-level global of that
    name", so an unpickled marker is the very same object.
    """

    _name: ClassVar[str]
    _instance: ClassVar[_Sentinel | None] = None

    def __new__(cls) -> Any:
        if cls.__dict__.get("_instance") is None:  # one instance per subclass
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


class NotReadyType(_Sentinel):
    """Type of the ``NOT_READY`` singleton: yielded by a stream with no item right now."""

    _name = "NOT_READY"


NOT_READY: Final[NotReadyType] = NotReadyType()


class EndOfStreamType(_Sentinel):
    """Type of the ``END_OF_STREAM`` singleton: returned (not raised) where a stream ends.

    ``next(it, END_OF_STREAM)`` in the pull loops, and the value a shard call returns when
    its stream is exhausted: returning a marker avoids the ``StopIteration`` task errors
    Ray would log as "unhandled" (ray-project/ray#11849).
    """

    _name = "END_OF_STREAM"


END_OF_STREAM: Final[EndOfStreamType] = EndOfStreamType()


class PendingNote:
    """What the pulls of one union input were waiting on when they yielded ``NOT_READY``.

    ``refs``: Ray object refs whose completion may let the input progress.
    ``local``: True if some source was waiting on something other than Ray refs.
    """

    __slots__ = ("local", "refs")

    def __init__(self) -> None:
        self.refs: list[Any] = []
        self.local = False

    @property
    def ray_waitable(self) -> bool:
        """True when waiting on ``refs`` alone cannot miss progress."""
        return bool(self.refs) and not self.local


_state = threading.local()


def _stack() -> list[PendingNote]:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


def push_note() -> PendingNote:
    """Start collecting notes for one pull (used by unions around ``next(input)``)."""
    note = PendingNote()
    _stack().append(note)
    return note


def pop_note() -> None:
    """Stop collecting for the pull started by the matching :func:`push_note`."""
    _stack().pop()


def note_pending(refs: Iterable[Any]) -> None:
    """Record that the current pull yields ``NOT_READY`` until one of ``refs`` completes.

    A no-op when no union is collecting (e.g. a non-blocking source pulled directly).
    """
    stack = getattr(_state, "stack", None)
    if stack:
        stack[-1].refs.extend(refs)


def note_local_wait() -> None:
    """Record that the current pull waits on something Ray cannot signal (see module doc)."""
    stack = getattr(_state, "stack", None)
    if stack:
        stack[-1].local = True


class IdleWaiter:
    """Blocks a consumer whose inputs all yielded ``NOT_READY``, instead of spinning.

    If every idle input waits on Ray refs, it blocks in ``ray.wait`` until one completes (a
    failed task or dead actor also completes its refs, so this never hangs; a
    ``RAY_WAIT_GUARD_S`` timeout re-polls anyway). Otherwise something local may make
    progress at any time, so it sleeps (or waits on the refs it has) for a delay growing from
    ``MIN_DELAY_S`` to ``MAX_DELAY_S``; :meth:`reset` after progress.
    """

    MIN_DELAY_S = 0.0005
    MAX_DELAY_S = 0.02
    RAY_WAIT_GUARD_S = 1.0

    def __init__(self) -> None:
        self._delay = self.MIN_DELAY_S

    def reset(self) -> None:
        self._delay = self.MIN_DELAY_S

    def wait(self, note: PendingNote) -> None:
        from plangraph.flow.metrics import phase

        refs = list(dict.fromkeys(note.refs))  # ray.wait rejects duplicates
        if refs and not note.local:
            import ray

            # Only gathers note refs: this waits on rollout workers.
            with phase("sampling"):
                ray.wait(refs, num_returns=1, timeout=self.RAY_WAIT_GUARD_S)
            return
        delay = self._delay
        self._delay = min(2 * delay, self.MAX_DELAY_S)
        if refs:
            import ray

            # Rollouts are pending: waiting on them, re-checking the local waits now and then.
            with phase("sampling"):
                ray.wait(refs, num_returns=1, timeout=delay)
        else:
            with phase("idle"):  # a learner thread's queue, a replay buffer, a sibling
                time.sleep(delay)


def ready_items(it: Iterator[T], watchdog: Watchdog | None = None) -> Iterator[T]:
    """The real items of ``it``: while it yields ``NOT_READY``, wait (on the Ray refs its
    sources report, else with a short growing sleep) instead of spinning.

    For *blocking* consumers only (a run loop, a sink at the output, ``take``); inside a
    non-blocking flow pass the sentinel on instead, so a union can move to another input.

    ``watchdog`` (``plangraph.flow.watchdog``): armed while ``it`` is pulled; its clock
    restarts at every item and whenever the consumer asks for the next one (time spent
    by the consumer between pulls never counts). Raises its ``PlanStalledError`` when no
    item came for its ``max_idle_s``.
    """
    if watchdog is None:
        yield from _ready_items(it)
        return
    waiter = IdleWaiter()
    watchdog.progress()
    while True:
        with watchdog.armed():
            note = push_note()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                pop_note()
            if item is NOT_READY:
                watchdog.check()
                waiter.wait(note)
                continue
        waiter.reset()
        watchdog.progress()
        yield item
        watchdog.progress()


def _ready_items(it: Iterator[T]) -> Iterator[T]:
    waiter = IdleWaiter()
    while True:
        note = push_note()
        try:
            item = next(it)
        except StopIteration:
            return
        finally:
            pop_note()
        if item is NOT_READY:
            waiter.wait(note)
            continue
        waiter.reset()
        yield item
