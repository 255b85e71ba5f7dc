"""``ParallelIterator``: a sharded stream over Ray actors, one shard per actor (reference 2.4).

The shard stream of an actor is repeated calls of ``actor.<method>()`` (``sample`` for a
rollout worker). Transforms chained on a ``ParallelIterator`` run inside the actors (see
``_shard.py``); the sequencing operators turn it into a driver-side ``LocalIterator``:

* :meth:`ParallelIterator.batch_across_shards`: a barrier; each round requests one item
  from every shard and yields the list in actor order. The next round is requested only
  when the consumer pulls again (after it has, e.g., broadcast new weights).
* :meth:`ParallelIterator.gather_sync`: the same, flattened (``a0 b0 a1 b1 ...``).
* :meth:`ParallelIterator.gather_async`: ``num_async`` requests in flight per actor, items
  in completion order, each re-requested as soon as it arrives; ``current_actor`` of the
  metrics context names the actor that produced the item.

Without chained transforms a request is a plain ``actor.<method>.remote()``, so a gather
costs what a hand-written ``ray.get``/``ray.wait`` loop does. Nothing is sent to an actor
before the first pull of the gathered iterator.

Failures: a task error surfaces as ``OperatorError`` naming the operator (inside the actor)
or the source; a dead actor raises ``OperatorError`` (cause: ``RayActorError``) at once, or,
with ``on_actor_failure``, is replaced by the actor that callback returns.

Deadlines (``plangraph.flow.deadlines``): a shard whose oldest request has had no reply for
``reply_deadline_s`` seconds (default ``REPLY_DEADLINE_S``; counted from the request, or from
the shard's previous reply when requests queue behind one another) raises
``OperatorTimeoutError`` naming the source, the shard and its actor, whether the gather
blocks or yields ``NOT_READY`` to a union, and in ``gather_async`` even while the other
shards keep answering. A blocking gather also lets the sink's idle watchdog fire while it
waits.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeAlias, TypeVar

import ray
from ray.exceptions import RayActorError, RayError, RayTaskError

from plangraph.flow import deadlines
from plangraph.flow._shard import (
    END_OF_STREAM,
    IteratorShard,
    RemoteTransform,
    shard_init,
    shard_next,
)
from plangraph.flow.errors import OperatorError, OperatorTimeoutError, _one_line
from plangraph.flow.local import LocalIterator, node_name
from plangraph.flow.metrics import get_metrics, phase
from plangraph.flow.sentinel import NOT_READY, note_pending

__all__ = ["ActorFailureHook", "ParallelIterator"]

T = TypeVar("T")
U = TypeVar("U")

ActorHandle: TypeAlias = Any
ActorFailureHook: TypeAlias = Callable[[int, ActorHandle, RayActorError], ActorHandle | None]
"""``on_actor_failure(shard_index, dead_actor, error)``: return a replacement actor (its
shard restarts on it) or ``None`` to drop the shard; raise to abort the flow."""


class ParallelIterator(Generic[T]):
    """A lazy sharded stream of ``T``; one shard per actor. Not iterable: gather it first.

    Args:
        actors: the shard actors (any Ray actor handles exposing ``method``).
        method: the zero-argument actor method whose repeated calls form a shard's stream.
            It ends the shard by raising ``StopIteration`` or returning ``END_OF_STREAM``.
        name: plan node id of the source, used in error messages.
    """

    def __init__(
        self,
        actors: Sequence[ActorHandle],
        method: str = "sample",
        name: str | None = None,
        *,
        _transforms: tuple[RemoteTransform, ...] = (),
    ) -> None:
        actors = list(actors)
        if not actors:
            raise ValueError(f"ParallelIterator {name or ''}: needs at least one actor".strip())
        for i, actor in enumerate(actors):
            if not isinstance(actor, ray.actor.ActorHandle):
                raise TypeError(f"actors[{i}] is a {type(actor).__name__}, not a Ray actor handle")
            if not hasattr(actor, method):
                raise ValueError(
                    f"actors[{i}] ({actor!r}) has no method {method!r}; pass method= the "
                    "actor method that returns one item per call"
                )
        self.actors: list[ActorHandle] = actors
        self.method = method
        self.name = name or f"from_actors[shards={len(actors)}]"
        self.transforms = _transforms
        # Identifies this transform chain's pipeline on the actors; a new gather of the same
        # ParallelIterator re-initialises (resets) it, as RLlib's par_iter_init did.
        self._key = f"{self.name}/{uuid.uuid4().hex}"

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_actors(
        cls, actors: Sequence[ActorHandle], method: str = "sample", name: str | None = None
    ) -> ParallelIterator[Any]:
        """Shards over existing actors: the stream of shard ``i`` is ``actors[i].<method>()``
        called repeatedly. No remote call happens here."""
        return cls(actors, method, name)

    @classmethod
    def from_iterators(
        cls,
        generators: Sequence[Iterable[Any] | Callable[[], Iterable[Any]]],
        repeat: bool = False,
        name: str | None = None,
    ) -> ParallelIterator[Any]:
        """One new (zero-CPU) shard actor per iterable, or per zero-argument callable
        returning one (generators cannot be pickled: pass the generator function).

        Creates the actors now (that is the only eager remote work); their items are only
        requested on the first pull of a gather.
        """
        remote_cls = ray.remote(num_cpus=0)(IteratorShard)
        actors = [remote_cls.remote(g, repeat) for g in generators]
        return cls(actors, "next_item", name or f"from_iterators[shards={len(actors)}]")

    @classmethod
    def from_items(
        cls,
        items: Sequence[Any],
        num_shards: int = 2,
        repeat: bool = False,
        name: str | None = None,
    ) -> ParallelIterator[Any]:
        """Deal ``items`` round-robin into ``num_shards`` shard actors."""
        if num_shards < 1:
            raise ValueError(f"from_items: num_shards must be >= 1, got {num_shards}")
        shards = [list(items[i::num_shards]) for i in range(num_shards)]
        return cls.from_iterators(shards, repeat, name or f"from_items[shards={num_shards}]")

    def num_shards(self) -> int:
        return len(self.actors)

    def __iter__(self) -> Iterator[T]:
        raise TypeError(
            f"{self!r} is not iterable: call gather_sync(), gather_async() or "
            "batch_across_shards() to get a LocalIterator"
        )

    def __repr__(self) -> str:
        return f"ParallelIterator[{self.name}]"

    # -- transforms (run on the actors) -------------------------------------------------

    def _then(self, transform: RemoteTransform) -> ParallelIterator[Any]:
        return ParallelIterator(
            self.actors, self.method, self.name, _transforms=(*self.transforms, transform)
        )

    def for_each(self, fn: Callable[[T], U], name: str | None = None) -> ParallelIterator[U]:
        """Map each item inside its shard actor (``fn`` is pickled and shipped there);
        ``NOT_READY`` results are retried in the actor. Errors name ``name``."""
        return self._then(RemoteTransform("for_each", fn, name=node_name(fn, name)))

    def for_each_actor(
        self, fn: Callable[[Any, T], U], name: str | None = None
    ) -> ParallelIterator[U]:
        """Map each item inside its shard actor with ``fn(actor_instance, item)``: the
        actor's own object (a ``RolloutWorker``: its policy, envs, ``index``, state kept on
        it between items), as RLlib's ``for_each`` on ``ParallelRollouts(mode="raw")`` used
        ``get_global_worker()``. ``fn`` is pickled and shipped; errors name ``name``."""
        return self._then(RemoteTransform("for_each_actor", fn, name=node_name(fn, name)))

    def filter(self, fn: Callable[[T], bool], name: str | None = None) -> ParallelIterator[T]:
        """Keep items for which ``fn(item)`` is true, inside the shard actors."""
        return self._then(RemoteTransform("filter", fn, name=node_name(fn, name)))

    def batch(self, n: int) -> ParallelIterator[list[T]]:
        """Group ``n`` items of each shard into a list, inside the actors."""
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"batch(n): n must be a positive int, got {n!r}")
        return self._then(RemoteTransform("batch", n=n))

    def flatten(self) -> ParallelIterator[Any]:
        """Yield each element of each list item, inside the actors."""
        return self._then(RemoteTransform("flatten"))

    def combine(
        self, fn: Callable[[T], Iterable[U]], name: str | None = None
    ) -> ParallelIterator[U]:
        """Flat-map inside the actors (``for_each(fn).flatten()``)."""
        return self.for_each(fn, name).flatten()

    def transform(
        self, fn: Callable[[Iterator[T]], Iterable[U]], name: str | None = None
    ) -> ParallelIterator[U]:
        """Generator-to-generator transform of each shard's stream, inside the actors."""
        return self._then(RemoteTransform("transform", fn, name=node_name(fn, name)))

    # -- sequencing (gather into the driver) --------------------------------------------

    def batch_across_shards(
        self,
        *,
        on_actor_failure: ActorFailureHook | None = None,
        reply_deadline_s: float | None = None,
    ) -> LocalIterator[list[T]]:
        """A barrier: each item is the list of one item from every live shard, in actor
        order. Finished shards drop out; the stream ends when none remain.

        ``reply_deadline_s``: seconds a shard may take to answer a request before
        ``OperatorTimeoutError`` (default ``deadlines.REPLY_DEADLINE_S``; module doc)."""

        def base(timeout: float | None) -> Iterator[Any]:
            shards = _ShardSet(self, on_actor_failure, reply_deadline_s)
            live = shards.start()
            refs: list[Any] | None = None
            while live:
                if refs is None:
                    refs = [s.submit() for s in live]
                # Waiting for the actors (without fetching) and fetching their results are
                # timed apart: the profile tells sampling from object-store transfers.
                with phase("sampling"):
                    if timeout is None:
                        shards.wait(refs, len(refs), live, fetch_local=False)
                        waiting: list[Any] = []
                    else:
                        _, waiting = ray.wait(
                            refs, num_returns=len(refs), timeout=timeout, fetch_local=False
                        )
                if waiting:
                    shards.check_deadline(live)
                    note_pending(waiting)
                    yield NOT_READY
                    continue
                try:
                    with phase("object_store"):
                        values = ray.get(refs)
                except RayError:
                    values = [shards.resolve(s, ref) for s, ref in zip(live, refs, strict=True)]
                refs = None
                for shard in live:
                    shard.issued.clear()  # don't pin this round's results in memory
                if any(v is END_OF_STREAM or v is _GONE for v in values):
                    live = [
                        s
                        for s, v in zip(live, values, strict=True)
                        if v is not END_OF_STREAM and v is not _GONE
                    ]
                    values = [v for v in values if v is not END_OF_STREAM and v is not _GONE]
                    shards.check_alive(live)
                if values:
                    yield values

        return LocalIterator(base, name=self.name)

    def gather_sync(
        self,
        *,
        on_actor_failure: ActorFailureHook | None = None,
        reply_deadline_s: float | None = None,
    ) -> LocalIterator[T]:
        """One item from every shard per round, in actor order: ``a0 b0 a1 b1 ...``."""
        return self.batch_across_shards(
            on_actor_failure=on_actor_failure, reply_deadline_s=reply_deadline_s
        ).flatten()

    def gather_async(
        self,
        num_async: int = 1,
        *,
        on_actor_failure: ActorFailureHook | None = None,
        reply_deadline_s: float | None = None,
    ) -> LocalIterator[T]:
        """Items in completion order, ``num_async`` requests in flight per actor.

        Each round takes every result that is ready (one zero-timeout ``ray.wait``), else
        blocks for one (or, when driven non-blocking by a union, yields ``NOT_READY``); while
        the zero-timeout poll keeps finding nothing, the blocking wait comes first. Each
        result is re-requested from its actor at once; ``get_metrics().current_actor`` is
        that actor while the item flows downstream. Raises ``ValueError`` if
        ``num_async < 1``. ``reply_deadline_s``: as for :meth:`batch_across_shards`.
        """
        if not isinstance(num_async, int) or num_async < 1:
            raise ValueError(f"gather_async: num_async must be an int >= 1, got {num_async!r}")

        def base(timeout: float | None) -> Iterator[Any]:
            shards = _ShardSet(self, on_actor_failure, reply_deadline_s)
            live = shards.start()
            pending: dict[Any, _Shard] = {}
            for shard in live:
                for _ in range(num_async):
                    pending[shard.submit()] = shard
            poll, rounds_without_poll = True, 0
            while pending:
                # Other shards' replies must not hide one that stopped answering.
                shards.check_deadline(live)
                refs = list(pending)
                ready: list[Any] = []
                if poll or timeout is not None or rounds_without_poll >= _REPOLL_EVERY:
                    # Take every result that is ready in one call (RLlib's batched wait).
                    with phase("sampling"):
                        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                    poll, rounds_without_poll = bool(ready), 0
                else:
                    # The last poll found nothing: the consumer outpaces the actors, so a
                    # poll per round would only add a call; re-check now and then.
                    rounds_without_poll += 1
                if not ready and timeout != 0:
                    # Block for one result. A shard actor runs its calls in order, so waiting
                    # on each shard's oldest request keeps every shard's items in order
                    # (ray.wait may return any one of several ready refs).
                    heads = [s.head() for s in live if s.live and s.issued]
                    with phase("sampling"):
                        if timeout is None:
                            ready = shards.wait(heads or refs, 1, live)
                        else:
                            ready, _ = ray.wait(heads or refs, num_returns=1, timeout=timeout)
                if not ready:
                    note_pending(refs)
                    yield NOT_READY
                    continue
                if len(ready) > 1:
                    in_ready = set(ready)
                    ready = [ref for ref in pending if ref in in_ready]  # submission order
                try:
                    with phase("object_store"):
                        values = ray.get(ready)
                except RayError:
                    values = [_get_or_error(ref) for ref in ready]
                out: list[tuple[_Shard, Any, Any]] = []
                for ref, value in zip(ready, values, strict=True):
                    shard = pending.pop(ref)
                    # Stale: issued to an actor that has since been replaced or dropped.
                    stale = ref not in shard.issued
                    shard.answered(ref)
                    if isinstance(value, _Failed):
                        if stale or not shard.live:
                            continue
                        if shards.handle(shard, value.error) == "replaced":
                            for _ in range(num_async):
                                pending[shard.submit()] = shard
                        else:
                            shard.live = False
                            shards.check_alive([s for s in live if s.live])
                        continue
                    if value is END_OF_STREAM:
                        shard.live = False
                        continue
                    if shard.live and not stale:
                        pending[shard.submit()] = shard
                    out.append((shard, ref, value))
                for shard, ref, value in out:
                    metrics = get_metrics()
                    metrics.current_actor = shard.actor
                    # Without chained transforms the ref holds exactly this item.
                    metrics.current_ref = None if self.transforms else (ref, value)
                    yield value

        return LocalIterator(base, name=self.name)


_REPOLL_EVERY = 8
"""While zero-timeout polls of ``gather_async`` find nothing, poll only every this many
rounds (each poll is a Ray call, ~0.1 ms)."""


class _Shard:
    """Driver-side state of one shard of a running gather."""

    __slots__ = ("actor", "index", "issued", "live", "submit_fn", "waiting_since")

    def __init__(self, index: int, actor: ActorHandle) -> None:
        self.index = index
        self.actor = actor
        self.live = True
        self.issued: dict[Any, None] = {}  # in-flight refs to the current actor, oldest first
        self.submit_fn: Callable[[], Any] = lambda: None
        # When the oldest request in `issued` started waiting (time.monotonic()): its
        # submission, or the previous reply when it was queued behind that one.
        self.waiting_since = 0.0

    def submit(self) -> Any:
        ref = self.submit_fn()
        if not self.issued:
            self.waiting_since = time.monotonic()
        self.issued[ref] = None
        return ref

    def answered(self, ref: Any) -> None:
        """``ref``'s reply arrived: the next request's clock starts now."""
        if ref in self.issued:
            del self.issued[ref]
            self.waiting_since = time.monotonic()

    def head(self) -> Any:
        """The oldest request in flight (``issued`` must not be empty)."""
        return next(iter(self.issued))


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: RayError) -> None:
        self.error = error


class _Gone:
    __slots__ = ()


_GONE: Any = _Gone()


def _get_or_error(ref: Any) -> Any:
    try:
        return ray.get(ref)
    except RayError as exc:
        return _Failed(exc)


def _pending_heads(shards: list[_Shard]) -> list[_Shard]:
    """Those of ``shards`` (each with requests in flight) whose oldest request has no
    reply yet (one zero-timeout ``ray.wait``)."""
    if not shards:
        return []
    heads = [s.head() for s in shards]
    _, pending = ray.wait(heads, num_returns=len(heads), timeout=0, fetch_local=False)
    still = set(pending)
    return [s for s, head in zip(shards, heads, strict=True) if head in still]


class _ShardSet:
    """The shards of one running gather: initialisation, request binding, failures and
    the reply deadline (``deadline_s`` seconds per request; module doc)."""

    def __init__(
        self,
        source: ParallelIterator[Any],
        on_failure: ActorFailureHook | None,
        deadline_s: float | None = None,
    ) -> None:
        self.source = source
        self.on_failure = on_failure
        self.shards = [_Shard(i, a) for i, a in enumerate(source.actors)]
        self.dropped = 0  # shards removed because their actor died and was not replaced
        # Read when the gather starts (its first pull), so the module constant can change.
        self.deadline_s = deadlines.REPLY_DEADLINE_S if deadline_s is None else deadline_s

    def start(self) -> list[_Shard]:
        """Initialise the shard pipelines (only with transforms) and bind the requests."""
        if self.source.transforms:
            refs = [self._init_ref(s) for s in self.shards]
            self._wait_init(refs, self.shards)
            try:
                ray.get(refs)
            except RayError:
                for shard, ref in zip(self.shards, refs, strict=True):
                    while True:
                        value = _get_or_error(ref)
                        if not isinstance(value, _Failed):
                            break
                        if self.handle(shard, value.error, init=True) != "replaced":
                            shard.live = False
                            break
                        ref = self._init_ref(shard)
                        self._wait_init([ref], [shard])
        for shard in self.shards:
            self._bind(shard)
        live = [s for s in self.shards if s.live]
        self.check_alive(live)
        return live

    def _init_ref(self, shard: _Shard) -> Any:
        src = self.source
        return shard.actor.__ray_call__.remote(
            shard_init, src._key, src.method, src.transforms, src.name
        )

    def _wait_init(self, refs: list[Any], shards: list[_Shard]) -> None:
        """Wait (at most the deadline) until the ``shard_init`` calls ``refs`` of ``shards``
        have answered."""
        deadlines.wait_all(
            refs,
            lambda late, _s: self.timeout_error(
                [shards[i] for i in late], "shard_init (building its pipeline)"
            ),
            deadline_s=self.deadline_s,
        )

    def _bind(self, shard: _Shard) -> None:
        if self.source.transforms:
            shard.submit_fn = functools.partial(
                shard.actor.__ray_call__.remote, shard_next, self.source._key
            )
        else:
            shard.submit_fn = getattr(shard.actor, self.source.method).remote

    def resolve(self, shard: _Shard, ref: Any) -> Any:
        """The value of ``ref``, retried on a replacement actor; ``_GONE`` if the shard ended
        or was dropped."""
        while True:
            self.wait([ref], 1, [shard])  # a retry's ref may still be pending
            value = _get_or_error(ref)
            if not isinstance(value, _Failed):
                shard.answered(ref)
                return value
            if self.handle(shard, value.error) != "replaced":
                shard.live = False
                return _GONE
            ref = shard.submit()

    # -- deadlines ----------------------------------------------------------------------

    def wait(
        self, refs: list[Any], num_returns: int, shards: list[_Shard], *, fetch_local: bool = True
    ) -> list[Any]:
        """Block until ``num_returns`` of ``refs`` (requests of ``shards``) are ready and
        return those; raises ``OperatorTimeoutError`` when the oldest request of one of
        ``shards`` passes the deadline first, ``PlanStalledError`` when the sink's idle
        watchdog fires."""
        starts = [s.waiting_since for s in shards if s.live and s.issued]
        until = (min(starts) if starts else time.monotonic()) + self.deadline_s

        def expired(pending: list[Any]) -> BaseException:
            still = set(pending)
            waiting = [s for s in shards if s.live and any(r in still for r in s.issued)]
            now = time.monotonic()
            late = [s for s in waiting if now - s.waiting_since >= self.deadline_s]
            return self.timeout_error(late or waiting)

        return deadlines.wait_refs(
            refs,
            num_returns,
            until,
            expired,
            fetch_local=fetch_local,
            note=(self.source.name, lambda: self.describe_waiting(shards)),
        )

    def late(self, shards: list[_Shard]) -> list[_Shard]:
        """The live ``shards`` whose oldest request has had no reply for the deadline."""
        now = time.monotonic()
        return _pending_heads(
            [s for s in shards if s.live and s.issued and now - s.waiting_since >= self.deadline_s]
        )

    def check_deadline(self, shards: list[_Shard]) -> None:
        """Raise ``OperatorTimeoutError`` if one of ``shards`` is late (for a gather that
        yields ``NOT_READY`` instead of blocking)."""
        late = self.late(shards)
        if late:
            raise self.timeout_error(late)

    def timeout_error(self, late: list[_Shard], call: str | None = None) -> OperatorTimeoutError:
        """The error for shards ``late`` not answering ``call`` (default: the source
        method) within the deadline."""
        src = self.source
        which = ", ".join(f"shard {s.index}" for s in late) or "a replaced shard actor"
        text = deadlines.not_answered(
            which,
            call or f"{src.method}()",
            self.deadline_s,
            "the actor stuck inside that call (an env step that never returns, a deadlock)",
            "reply_deadline_s of the gather",
        )
        return OperatorTimeoutError(
            src.name,
            f"OperatorTimeoutError: {text}",
            actor=", ".join(repr(s.actor) for s in late) or None,
        )

    def describe_waiting(self, shards: list[_Shard]) -> str:
        """What this gather waits for, for the idle watchdog's message."""
        now = time.monotonic()
        waiting = _pending_heads([s for s in shards if s.live and s.issued])
        if not waiting:
            return "its last wait on the shard actors ended (they answered)"
        parts = [
            f"shard {s.index} ({s.actor!r}) for {now - s.waiting_since:.0f} s" for s in waiting
        ]
        return f"waiting for {self.source.method}() of " + ", ".join(parts)

    # -- failures -----------------------------------------------------------------------

    def handle(self, shard: _Shard, error: RayError, init: bool = False) -> str:
        """Decide what a failed request means: ``"end"`` (the shard finished),
        ``"replaced"`` or ``"dropped"`` (actor died, per ``on_failure``); raises
        ``OperatorError`` for everything else."""
        where = f"shard {shard.index} {shard.actor!r}"
        if isinstance(error, RayTaskError):
            cause = getattr(error, "cause", None)
            if isinstance(cause, StopIteration) and not init:
                return "end"
            if isinstance(cause, OperatorError):
                # A deadline inside the actor (shard_next) stays a timeout at the driver.
                cls = (
                    OperatorTimeoutError
                    if isinstance(cause, OperatorTimeoutError)
                    else OperatorError
                )
                raise cls(cause.node_id, cause.detail, cause.traceback_text, where) from error
            detail = _one_line(cause) if isinstance(cause, BaseException) else str(error)
            raise OperatorError(self.source.name, detail, str(error), where) from error
        if isinstance(error, RayActorError):
            if self.on_failure is None:
                raise OperatorError(
                    self.source.name,
                    f"{type(error).__name__}: the shard actor died; pass on_actor_failure= "
                    "to replace failed actors",
                    str(error),
                    where,
                ) from error
            replacement = self.on_failure(shard.index, shard.actor, error)
            if replacement is None:
                self.dropped += 1
                return "dropped"
            shard.actor = replacement
            shard.issued = {}
            if not init and self.source.transforms:
                ref = self._init_ref(shard)
                self._wait_init([ref], [shard])
                try:
                    ray.get(ref)
                except RayError as exc:
                    raise OperatorError(
                        self.source.name,
                        f"{_one_line(exc)} (initialising the replacement actor)",
                        str(exc),
                        where,
                    ) from exc
            self._bind(shard)
            return "replaced"
        raise OperatorError(self.source.name, _one_line(error), str(error), where) from error

    def check_alive(self, live: list[_Shard]) -> None:
        """Raise if every shard is gone because its actor died (rather than finished)."""
        if not live and self.dropped == len(self.shards):
            raise OperatorError(
                self.source.name,
                f"RuntimeError: all {len(self.shards)} shard actors failed and none was "
                "replaced (on_actor_failure returned None)",
            )
