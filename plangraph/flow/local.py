"""``LocalIterator``: a lazy, pull-based stream consumed in the driver (reference 2.5).

Nothing runs until the first ``next()``: the base iterable is created then and each transform
is applied to it in order. Every transform returns a *new* ``LocalIterator`` sharing the base
and the metrics cell; consuming two branches of one iterator builds the base twice (for a
gather: re-initialises the shard pipelines), so branch with :meth:`LocalIterator.duplicate`.

Sentinel protocol (reference 2.1, 9.2): ``NOT_READY`` is yielded, never raised; every
built-in transform passes it through, and ``for_each`` calls the operator again with the
*same* item when the operator itself returns ``NOT_READY`` (back-pressure, e.g. ``Enqueue``).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from plangraph.flow.errors import OperatorError
from plangraph.flow.metrics import MetricsContext, SharedMetrics, _swap, get_metrics
from plangraph.flow.sentinel import END_OF_STREAM, NOT_READY, note_local_wait, ready_items
from plangraph.flow.watchdog import check_watchdog, note_waiting

__all__ = ["BaseIterator", "LocalIterator", "Transform"]

T = TypeVar("T")
U = TypeVar("U")

BaseIterator = Callable[[float | None], Iterable[Any]]
"""Builds the source iterable; gets the timeout (``None`` blocks, ``0`` never blocks)."""
Transform = Callable[[Iterator[Any]], Iterator[Any]]
"""Maps the upstream Python iterator to the downstream one."""


def node_name(fn: object, name: str | None) -> str:
    """The plan node id used in error messages: ``name`` or the callable's qualified name."""
    if name is not None:
        return name
    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)


def _guard(node: str, it: Iterator[Any]) -> Iterator[Any]:
    """Re-raise errors of a source or generator transform as ``OperatorError(node)``."""
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except OperatorError:
            raise
        except Exception as exc:
            raise OperatorError.from_exception(node, exc) from exc
        yield item


class LocalIterator(Generic[T]):
    """A lazy stream of ``T`` pulled in the driver.

    Args:
        base_iterator: called once, on the first pull, with ``timeout``; returns the source
            iterable. A function so the iterator stays cheap and serialisable until built.
        shared_metrics: the dataflow's metrics cell (a fresh one if omitted).
        local_transforms: applied in order to the source iterator when building.
        timeout: ``None`` = sources block; ``0`` = sources yield ``NOT_READY`` instead of
            waiting (set by a union for its non-blocking inputs).
        name: plan node id of the source, used in error messages.
    """

    def __init__(
        self,
        base_iterator: BaseIterator,
        shared_metrics: SharedMetrics | None = None,
        local_transforms: Sequence[Transform] = (),
        timeout: float | None = None,
        name: str | None = None,
    ) -> None:
        self.base_iterator = base_iterator
        self.shared_metrics = shared_metrics if shared_metrics is not None else SharedMetrics()
        self.local_transforms: tuple[Transform, ...] = tuple(local_transforms)
        self.timeout = timeout
        self.name = name or "LocalIterator"
        self._source_name = self.name
        self._built: Iterator[Any] | None = None

    # -- construction -------------------------------------------------------------------

    @staticmethod
    def from_iterable(
        source: Iterable[T] | Callable[[], Iterable[T]],
        name: str = "from_iterable",
        repeat: bool = False,
    ) -> LocalIterator[T]:
        """A local source over ``source`` (an iterable, or a zero-argument callable returning
        one, e.g. a generator function). ``repeat=True`` restarts it forever when exhausted."""

        def make() -> Iterator[T]:
            return iter(source() if callable(source) else source)

        def base(timeout: float | None) -> Iterator[T]:
            it = make()
            while True:
                yield from it
                if not repeat:
                    return
                fresh = make()
                if fresh is it:
                    raise ValueError(
                        f"{name}: repeat=True needs a re-iterable source or a callable "
                        "returning a fresh iterator, got a one-shot iterator"
                    )
                it = fresh

        return LocalIterator(base, name=name)

    @staticmethod
    def get_metrics() -> MetricsContext:
        """The current dataflow's metrics context; ``ValueError`` outside an operator call."""
        return get_metrics()

    def _copy(
        self,
        transforms: tuple[Transform, ...] | None = None,
        *,
        timeout: float | str | None = "same",
        shared_metrics: SharedMetrics | None = None,
        name: str | None = None,
    ) -> LocalIterator[Any]:
        out: LocalIterator[Any] = LocalIterator(
            self.base_iterator,
            shared_metrics if shared_metrics is not None else self.shared_metrics,
            self.local_transforms if transforms is None else transforms,
            self.timeout if timeout == "same" else timeout,  # type: ignore[arg-type]
            name or self.name,
        )
        out._source_name = self._source_name
        return out

    def _then(self, transform: Transform, name: str | None = None) -> LocalIterator[Any]:
        return self._copy((*self.local_transforms, transform), name=name)

    # -- iteration ----------------------------------------------------------------------

    def _build(self) -> Iterator[Any]:
        it: Iterator[Any] = _guard(self._source_name, iter(self.base_iterator(self.timeout)))
        for transform in self.local_transforms:
            it = transform(it)
        self._built = it
        return it

    def __iter__(self) -> LocalIterator[T]:
        return self

    def __next__(self) -> T:
        # The dataflow's context is current for the whole pull, so operators and sources
        # reach it with get_metrics(); the previous one is restored afterwards.
        prev = _swap(self.shared_metrics.metrics)
        try:
            built = self._built if self._built is not None else self._build()
            return next(built)
        finally:
            _swap(prev)

    def __repr__(self) -> str:
        return f"LocalIterator[{self.name}]"

    # -- transforms ---------------------------------------------------------------------

    def for_each(self, fn: Callable[[T], U], name: str | None = None) -> LocalIterator[U]:
        """Map each item with ``fn`` (runs in the driver, in order).

        ``name`` is the plan node id named by errors. If ``fn`` returns ``NOT_READY`` it is
        yielded and ``fn`` gets the same item again on the next pull. If ``fn`` has an
        ``_on_fetch_start()`` method it is called before the upstream pull of each new item
        (not again while sentinels flow), e.g. to time waits. Errors raised by ``fn`` surface
        as :class:`OperatorError` naming ``name``.
        """
        node = node_name(fn, name)
        on_fetch_start: Callable[[], Any] | None = getattr(fn, "_on_fetch_start", None)

        def call(item: Any) -> Any:
            try:
                return fn(item)
            except OperatorError:
                raise
            except Exception as exc:
                raise OperatorError.from_exception(node, exc) from exc

        def apply_for_each(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if item is NOT_READY:
                    yield item
                    continue
                result = call(item)
                while result is NOT_READY:
                    yield result
                    result = call(item)
                yield result

        def apply_for_each_hooked(it: Iterator[Any]) -> Iterator[Any]:
            assert on_fetch_start is not None
            while True:
                try:
                    on_fetch_start()
                except Exception as exc:
                    raise OperatorError.from_exception(node, exc) from exc
                item = next(it, END_OF_STREAM)
                while item is NOT_READY:
                    yield item
                    item = next(it, END_OF_STREAM)
                if item is END_OF_STREAM:
                    return
                result = call(item)
                while result is NOT_READY:
                    yield result
                    result = call(item)
                yield result

        return self._then(apply_for_each if on_fetch_start is None else apply_for_each_hooked, node)

    def filter(self, fn: Callable[[T], bool], name: str | None = None) -> LocalIterator[T]:
        """Keep the items for which ``fn(item)`` is true (sentinels always pass)."""
        node = node_name(fn, name)

        def apply_filter(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if item is NOT_READY:
                    yield item
                    continue
                try:
                    keep = fn(item)
                except OperatorError:
                    raise
                except Exception as exc:
                    raise OperatorError.from_exception(node, exc) from exc
                if keep:
                    yield item
                else:
                    # A filter that drops every item keeps the flow busy without the
                    # sink getting anything: the sink's idle deadline must still count.
                    note_waiting(node, lambda: "dropped every item since the sink's last one")
                    check_watchdog()

        return self._then(apply_filter, node)

    def batch(self, n: int) -> LocalIterator[list[T]]:
        """Group ``n`` items into a list; a shorter final list at the end of the stream."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"batch(n): n must be a positive int, got {n!r}")

        def apply_batch(it: Iterator[Any]) -> Iterator[Any]:
            buf: list[Any] = []
            for item in it:
                if item is NOT_READY:
                    yield item
                    continue
                buf.append(item)
                if len(buf) >= n:
                    yield buf
                    buf = []
            if buf:
                yield buf

        return self._then(apply_batch)

    def flatten(self) -> LocalIterator[Any]:
        """Yield each element of each (iterable) item."""

        def apply_flatten(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if item is NOT_READY:
                    yield item
                else:
                    yield from item

        return self._then(apply_flatten)

    def combine(self, fn: Callable[[T], Iterable[U]], name: str | None = None) -> LocalIterator[U]:
        """Flat-map: ``fn`` returns a list of 0..k outputs per item (``for_each`` + ``flatten``)."""
        return self.for_each(fn, name).flatten()

    def transform(
        self, fn: Callable[[Iterator[T]], Iterable[U]], name: str | None = None
    ) -> LocalIterator[U]:
        """Wrap the whole upstream iterator with ``fn`` (generator to generator).

        ``fn`` sees sentinels and must pass them through itself.
        """
        node = node_name(fn, name)
        return self._then(lambda it: _guard(node, iter(fn(it))), node)

    def profiled(self, node_id: str) -> LocalIterator[T]:
        """This stream with its pulls timed as stream ``node_id`` in the flow's profile
        (``plangraph.flow.profile``): exclusive seconds, items and phases, and the
        seconds per item in timer ``node_id``. Items pass unchanged."""

        def apply_profile(it: Iterator[Any]) -> Iterator[Any]:
            ctx = get_metrics()  # built inside a pull: the flow's context is current
            return ctx.profile.wrap(node_id, it, ctx.timers, NOT_READY)

        return self._then(apply_profile, self.name)

    def zip_with_source_actor(self) -> LocalIterator[tuple[Any, T]]:
        """Map each item to ``(current_actor, item)``; only meaningful downstream of a
        ``gather_async`` in the same flow. Raises ``OperatorError`` if no actor is known."""
        node = f"{self.name}.zip_with_source_actor"

        def apply_zip(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if item is NOT_READY:
                    yield item
                    continue
                actor = get_metrics().current_actor
                if actor is None:
                    raise OperatorError(
                        node,
                        "ValueError: could not identify the source actor of the item; "
                        "zip_with_source_actor must follow a gather_async in the same flow",
                    )
                yield (actor, item)

        return self._then(apply_zip, node)

    def duplicate(self, n: int) -> list[LocalIterator[T]]:
        """Split this stream into ``n`` children that each see every item (fan-out).

        Buffering is bounded: a child that is ahead of its slowest sibling yields
        ``NOT_READY`` instead of pulling more, so at most one item per child is buffered.
        Meant to be consumed inside a union (``Concurrently``), which handles the sentinels.
        Children share this iterator's metrics cell. ``n < 2`` raises ``ValueError``.
        """
        if not isinstance(n, int) or n < 2:
            raise ValueError(f"duplicate(n): n must be an int >= 2, got {n!r}")
        queues: list[deque[Any]] = [deque() for _ in range(n)]
        parent: list[LocalIterator[T]] = []

        def child_base(i: int) -> BaseIterator:
            def base(timeout: float | None) -> Iterator[Any]:
                queue = queues[i]
                while True:
                    if len(queue) < max(len(q) for q in queues):
                        # Ahead of a sibling: wait for it rather than buffer more.
                        note_local_wait()
                        yield NOT_READY
                        continue
                    if not queue:
                        if not parent:
                            parent.append(self._copy(timeout=timeout))
                        item = next(parent[0], END_OF_STREAM)
                        if item is END_OF_STREAM:
                            return
                        if item is NOT_READY:
                            yield item
                            continue
                        for q in queues:
                            q.append(item)
                    yield queue.popleft()

            return base

        children = []
        for i in range(n):
            child: LocalIterator[T] = LocalIterator(
                child_base(i), self.shared_metrics, name=f"{self.name}.duplicate[{i}]"
            )
            child._source_name = self._source_name
            children.append(child)
        return children

    # -- consumption --------------------------------------------------------------------

    def take(self, n: int) -> list[T]:
        """Pull and return the next ``n`` real items (fewer if the stream ends).

        ``NOT_READY`` is skipped, waiting on what the sources report they wait on (no busy
        loop; see :func:`plangraph.flow.sentinel.ready_items`), so this also works on
        non-blocking streams.
        """
        return list(itertools.islice(ready_items(self), n))

    def show(self, n: int = 20) -> None:
        """Print the next ``n`` items (debugging)."""
        for item in self.take(n):
            print(item)
