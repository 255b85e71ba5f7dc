"""ParallelIterator over real Ray actors: gathers, goldens of the union semantics with Ray
sources, laziness, error surfacing, dead actors, and the idle union not spinning.

Ordering is pinned with events (a signal actor), never with wall-clock speed; timeouts here
are only hang guards.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import ray

import plangraph
from plangraph.flow import deadlines
from plangraph.flow._shard import SHARD_ATTR, RemoteTransform, shard_init, shard_next
from plangraph.flow.concurrency import concurrently
from plangraph.flow.errors import OperatorError, OperatorTimeoutError
from plangraph.flow.iterators import ParallelIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import NOT_READY, ready_items
from plangraph.flow.watchdog import PlanStalledError, Watchdog

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(120)]


@ray.remote(num_cpus=0)
class Signal:
    """An event other actors can block on (async actor: waiters do not block senders)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    async def send(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()

    async def reset(self) -> None:
        self._event = asyncio.Event()


@ray.remote(num_cpus=0)
class Toy:
    """A toy shard actor: ``sample()`` returns ``f"{prefix}{i}"`` for i = 0, 1, ...

    ``gate``: a Signal every call waits on; ``limit``: end the stream after that many items
    (``StopIteration``); ``die_at``: the process exits on that call; ``fail_at``: that call
    raises ``ValueError``. ``reset`` reconfigures a pooled actor for the next test.
    """

    def __init__(self, prefix: str = "x", **behaviour: Any) -> None:
        self.reset(prefix, **behaviour)

    def reset(
        self,
        prefix: str,
        gate: Any = None,
        limit: int | None = None,
        die_at: int | None = None,
        fail_at: int | None = None,
    ) -> None:
        self.prefix = prefix
        self.gate = gate
        self.limit = limit
        self.die_at = die_at
        self.fail_at = fail_at
        self.calls = 0
        self.__dict__.pop(SHARD_ATTR, None)

    def sample(self) -> str:
        i = self.calls
        self.calls += 1
        if self.gate is not None:
            ray.get(self.gate.wait.remote())
        if self.limit is not None and i >= self.limit:
            raise StopIteration
        if self.die_at is not None and i == self.die_at:
            os._exit(1)
        if self.fail_at is not None and i == self.fail_at:
            raise ValueError(f"sample {i} is corrupt")
        return f"{self.prefix}{i}"

    def num_calls(self) -> int:
        return self.calls

    def has_pipelines(self) -> bool:
        return hasattr(self, SHARD_ATTR)


# Starting an actor costs a Python process; tests reuse a small pool, reset per use.
@pytest.fixture(scope="module")
def _pool(ray_session: None) -> list[Any]:
    return [Toy.remote() for _ in range(3)]


@pytest.fixture(scope="module")
def _signal(ray_session: None) -> Any:
    return Signal.remote()


@pytest.fixture
def gate(_signal: Any, _pool: list[Any]) -> Iterator[Any]:
    ray.get(_signal.reset.remote())
    yield _signal
    # Release whatever still waits on it and let the pooled actors drain the requests a
    # gather left in flight, before the next test re-arms the signal.
    ray.get(_signal.send.remote())
    ray.get([actor.num_calls.remote() for actor in _pool])


@pytest.fixture
def toy(_pool: list[Any], gate: Any) -> Callable[..., Any]:
    """``toy(i, prefix, **behaviour)``: pooled actor ``i``, reset (after its queued calls)."""

    def make(i: int, prefix: str, **behaviour: Any) -> Any:
        ray.get(_pool[i].reset.remote(prefix, **behaviour))
        return _pool[i]

    return make


def test_parallel_iterator_is_lazy_until_first_pull(toy: Callable[..., Any]) -> None:
    actor = toy(0, "a")
    flow = (
        ParallelIterator.from_actors([actor])
        .for_each(lambda x: x.upper(), name="upper")
        .gather_async()
        .for_each(lambda x: x + "!", name="bang")
    )
    merged = concurrently([flow, ParallelIterator.from_actors([actor]).gather_sync()])
    assert ray.get(actor.num_calls.remote()) == 0
    assert not ray.get(actor.has_pipelines.remote())
    assert next(merged) == "A0!"
    assert ray.get(actor.has_pipelines.remote())


def test_gather_sync_and_batch_across_shards_in_actor_order(toy: Callable[..., Any]) -> None:
    par = ParallelIterator.from_actors([toy(0, "a", limit=3), toy(1, "b", limit=1)])
    assert list(par.batch_across_shards()) == [["a0", "b0"], ["a1"], ["a2"]]
    par = ParallelIterator.from_actors([toy(0, "a", limit=2), toy(1, "b", limit=2)])
    assert list(par.gather_sync()) == ["a0", "b0", "a1", "b1"]


def test_from_items_deals_round_robin_and_from_iterators_repeats() -> None:
    par = ParallelIterator.from_items(["x0", "y0", "x1", "y1", "x2"], num_shards=2)
    assert list(par.gather_sync()) == ["x0", "y0", "x1", "y1", "x2"]
    par = ParallelIterator.from_iterators([lambda: iter([1, 2])], repeat=True)
    assert par.gather_sync().take(5) == [1, 2, 1, 2, 1]


def test_round_robin_union_of_ray_sources_alternates(toy: Callable[..., Any]) -> None:
    a = ParallelIterator.from_actors([toy(0, "a", limit=3)]).gather_sync()
    b = ParallelIterator.from_actors([toy(1, "b", limit=3)]).gather_sync()
    assert list(concurrently([a, b], "round_robin")) == ["a0", "b0", "a1", "b1", "a2", "b2"]


def test_output_indexes_emit_only_b_while_a_is_consumed(toy: Callable[..., Any]) -> None:
    a_actor = toy(0, "a")
    a = ParallelIterator.from_actors([a_actor]).gather_sync()
    b = ParallelIterator.from_actors([toy(1, "b", limit=3)]).gather_sync()
    out = list(concurrently([a, b], "round_robin", output_indexes=[1]))
    assert out == ["b0", "b1", "b2"]
    # A was pulled once per round, including the round that found B exhausted.
    assert ray.get(a_actor.num_calls.remote()) == 4


def test_fractional_weights_with_ray_sources_average_the_weight(toy: Callable[..., Any]) -> None:
    a = ParallelIterator.from_actors([toy(0, "a")]).gather_sync()
    b = ParallelIterator.from_actors([toy(1, "b")]).gather_sync()
    items = concurrently([a, b], weights=[1, 2.5], seed=3).take(1400)
    per_round: list[int] = []
    for item in items:
        if item.startswith("a"):
            per_round.append(0)
        else:
            per_round[-1] += 1
    per_round = per_round[:-1]  # take() may cut the last round
    assert set(per_round) == {2, 3}
    assert sum(per_round) / len(per_round) == pytest.approx(2.5, abs=0.12)
    b_items = [x for x in items if x.startswith("b")]
    assert b_items == [f"b{i}" for i in range(len(b_items))]


def test_star_input_that_is_never_ready_does_not_block_the_union(
    toy: Callable[..., Any], gate: Any
) -> None:
    stuck = toy(2, "s", gate=gate)  # the gate opens only after the test
    starred = ParallelIterator.from_actors([stuck]).gather_async()
    a = ParallelIterator.from_actors([toy(0, "a", limit=3)]).gather_sync()
    merged = concurrently([a, starred], weights=[1, "*"], output_indexes=[0])
    assert list(merged) == ["a0", "a1", "a2"]
    merged = concurrently(
        [ParallelIterator.from_actors([toy(0, "b")]).gather_sync(), starred], weights=[1, "*"]
    )
    assert merged.take(3) == ["b0", "b1", "b2"]


def test_gather_async_yields_in_completion_order_and_names_the_actor(
    toy: Callable[..., Any], gate: Any
) -> None:
    slow, fast = toy(0, "slow", gate=gate), toy(1, "fast")
    tagged = ParallelIterator.from_actors([slow, fast]).gather_async(num_async=2)
    tagged = tagged.zip_with_source_actor()
    first = [next(tagged) for _ in range(3)]
    assert first == [(fast, "fast0"), (fast, "fast1"), (fast, "fast2")]
    ray.get(gate.send.remote())
    seen: list[tuple[Any, str]] = []
    while len([x for _, x in seen if x.startswith("slow")]) < 2:
        seen.append(next(tagged))
    slow_seen = [(a, x) for a, x in seen if x.startswith("slow")]
    assert slow_seen == [(slow, "slow0"), (slow, "slow1")]
    fast_items = [x for _, x in first + seen if x.startswith("fast")]
    assert fast_items == [f"fast{i}" for i in range(len(fast_items))]
    assert all(a == fast for a, x in seen if x.startswith("fast"))


def test_gather_async_delivers_every_item_of_finite_shards_once(toy: Callable[..., Any]) -> None:
    par = ParallelIterator.from_actors([toy(0, "a", limit=10), toy(1, "b", limit=7)])
    out = list(par.gather_async(num_async=3))
    assert sorted(out) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(7)])
    with pytest.raises(ValueError, match="num_async"):
        par.gather_async(num_async=0)


def test_remote_transforms_run_on_the_actors_with_their_own_metrics(
    toy: Callable[..., Any],
) -> None:
    def tag(x: str) -> tuple[str, int, int]:
        ctx = get_metrics()
        ctx.counters["seen"] += 1
        return (x, os.getpid(), ctx.counters["seen"])

    par = ParallelIterator.from_actors([toy(0, "a", limit=4), toy(1, "b", limit=4)])
    flow = par.filter(lambda x: x[1] != "0", "skip0").for_each(tag, name="tag").batch(2).flatten()
    out = list(flow.gather_sync())
    assert [x for x, _, _ in out] == ["a1", "b1", "a2", "b2", "a3", "b3"]
    assert os.getpid() not in {pid for _, pid, _ in out}
    # Each shard counts in its own actor-local context.
    assert [n for _, _, n in out] == [1, 1, 2, 2, 3, 3]


def test_a_second_gather_resets_the_remote_chain_but_not_the_actor(
    toy: Callable[..., Any],
) -> None:
    actor = toy(0, "a")
    par = ParallelIterator.from_actors([actor]).batch(2)
    first = par.gather_sync()
    assert next(first) == ["a0", "a1"]
    second = par.gather_sync()
    assert next(second) == ["a2", "a3"]


def test_parallel_iterator_misuse_gives_clear_errors(toy: Callable[..., Any]) -> None:
    par = ParallelIterator.from_actors([toy(0, "a")])
    with pytest.raises(TypeError, match="gather"):
        iter(par)
    with pytest.raises(TypeError, match="gather a ParallelIterator first"):
        concurrently([par.gather_sync(), par])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no method 'learn'"):
        ParallelIterator.from_actors([toy(0, "b")], method="learn")
    with pytest.raises(ValueError, match="at least one actor"):
        ParallelIterator.from_actors([])


def test_remote_operator_error_names_the_node_and_keeps_the_remote_traceback(
    toy: Callable[..., Any],
) -> None:
    def postprocess(x: str) -> int:
        return 1 // (int(x[1:]) - 1)

    flow = ParallelIterator.from_actors([toy(0, "a")]).for_each(postprocess, "gae")
    flow_it = flow.gather_sync()
    assert next(flow_it) == -1
    with pytest.raises(OperatorError) as info:
        next(flow_it)
    err = info.value
    assert err.node_id == "gae"
    assert err.detail.startswith("ZeroDivisionError")
    assert "postprocess" in err.traceback_text
    assert "Toy" in (err.actor or "")
    assert "plan node 'gae'" in str(err)


def test_actor_method_error_names_the_source(toy: Callable[..., Any]) -> None:
    flow = ParallelIterator.from_actors([toy(0, "a", fail_at=1)], name="rollouts")
    flow_it = flow.gather_async()
    assert next(flow_it) == "a0"
    with pytest.raises(OperatorError) as info:
        next(flow_it)
    assert info.value.node_id == "rollouts"
    assert "sample 1 is corrupt" in info.value.traceback_text
    assert isinstance(info.value.__cause__, ray.exceptions.RayTaskError)


def test_dead_actor_raises_promptly_instead_of_hanging(toy: Callable[..., Any]) -> None:
    flow = ParallelIterator.from_actors([Toy.remote("a", die_at=1), toy(0, "b")])
    flow_it = flow.gather_sync()
    assert [next(flow_it), next(flow_it)] == ["a0", "b0"]
    with pytest.raises(OperatorError, match="actor died") as info:
        next(flow_it)
    assert isinstance(info.value.__cause__, ray.exceptions.RayActorError)


@pytest.mark.parametrize("gather", ["sync", "async1", "async2"])
def test_on_actor_failure_replaces_the_dead_actor(toy: Callable[..., Any], gather: str) -> None:
    replaced: list[int] = []

    def restart(index: int, dead: Any, error: Exception) -> Any:
        assert isinstance(error, ray.exceptions.RayActorError)
        replaced.append(index)
        return toy(2, "new", limit=2)

    par = ParallelIterator.from_actors([Toy.remote("a", die_at=1), toy(0, "b", limit=3)])
    flow = par.for_each(lambda x: x.upper(), name="upper")
    if gather == "sync":
        items = list(flow.gather_sync(on_actor_failure=restart))
        assert items == ["A0", "B0", "NEW0", "B1", "NEW1", "B2"]
    else:
        num_async = int(gather[-1])
        items = list(flow.gather_async(num_async=num_async, on_actor_failure=restart))
        assert [x for x in items if x.startswith("NEW")] == ["NEW0", "NEW1"]
        expected = ["A0", "B0", "B1", "B2", "NEW0", "NEW1"]
        if num_async > 1 and "A0" not in items:
            # With a second request in flight, Ray may drop the reply of the call that ran
            # just before the process died; that is Ray's behaviour, not the runtime's.
            expected.remove("A0")
        assert sorted(items) == expected
    assert replaced == [0]


def test_on_actor_failure_can_drop_the_shard(toy: Callable[..., Any]) -> None:
    par = ParallelIterator.from_actors([Toy.remote("a", die_at=1), toy(0, "b", limit=3)])
    assert list(par.gather_sync(on_actor_failure=lambda i, a, e: None)) == [
        "a0",
        "b0",
        "b1",
        "b2",
    ]


def test_duplicate_of_a_gather_keeps_buffering_bounded(toy: Callable[..., Any]) -> None:
    pulled: list[str] = []
    source = ParallelIterator.from_actors([toy(0, "a")]).gather_sync()
    left, right = source.for_each(lambda x: pulled.append(x) or x).duplicate(2)
    lefts: list[str] = []
    rights: list[str] = []
    merged = concurrently(
        [left.for_each(lambda x: lefts.append(x) or x), right.for_each(rights.append)],
        "round_robin",
        weights=[3, 1],
        output_indexes=[0],
    )
    for _ in range(20):
        next(merged)
        # The left child is pulled 3x as often but can never run more than 1 item ahead.
        assert len(pulled) - min(len(lefts), len(rights)) <= 1
    assert lefts[: len(rights)] == rights == [f"a{i}" for i in range(len(rights))]
    assert len(rights) >= 19


def test_idle_async_union_over_actors_blocks_on_ray_instead_of_spinning(
    toy: Callable[..., Any], gate: Any
) -> None:
    a = ParallelIterator.from_actors([toy(0, "a", gate=gate)]).gather_async()
    b = ParallelIterator.from_actors([toy(1, "b", gate=gate)]).gather_async()
    merged = concurrently([a, b], "async")
    result: list[str] = []
    cpu_share: list[float] = []

    def consume() -> None:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        result.append(next(merged))
        cpu_share.append((time.thread_time() - cpu0) / (time.perf_counter() - wall0))

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    time.sleep(1.0)  # the window over which CPU is measured, not a speed assertion
    ray.get(gate.send.remote())
    consumer.join(timeout=60)
    assert result, "the union handed the consumer thread nothing within 60 s of the gate"
    assert result[0] in {"a0", "b0"}
    # A hot spin would keep the consumer thread on a core for the whole window.
    assert cpu_share[0] < 0.2


# -- deadlines ---------------------------------------------------------------------------


def _pull_until_raised(flow: Iterator[Any], what: str, guard_s: float = 60.0) -> None:
    """Pull ``flow`` until it raises (the caller's ``pytest.raises`` catches it); fail if
    it still yields after ``guard_s`` seconds (a hang guard, not a speed assertion)."""
    stop = time.monotonic() + guard_s
    while time.monotonic() < stop:
        next(flow)
    pytest.fail(f"{what} did not fire within {guard_s:g} s")


def test_a_call_that_never_returns_hits_the_reply_deadline_naming_the_shard(
    toy: Callable[..., Any], gate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 1's ``sample()`` never returns (its gate stays shut): the blocking gather
    raises at the module's deadline, naming the source, the shard, its actor and the call,
    instead of waiting for ever."""
    monkeypatch.setattr(deadlines, "REPLY_DEADLINE_S", 1.0)
    par = ParallelIterator.from_actors([toy(0, "a"), toy(1, "s", gate=gate)], name="rollouts")
    with pytest.raises(OperatorTimeoutError) as info:
        _pull_until_raised(iter(par.gather_sync()), "the reply deadline")
    err = info.value
    assert err.node_id == "rollouts"
    assert "shard 1 did not answer sample() within 1 s" in err.detail
    assert "ray status" in err.detail and "REPLY_DEADLINE_S" in err.detail
    assert "Toy" in (err.actor or "")
    assert isinstance(err, plangraph.WaitTimeoutError) and isinstance(err, TimeoutError)


def test_gather_async_does_not_let_busy_shards_hide_a_silent_one(
    toy: Callable[..., Any], gate: Any
) -> None:
    """Shard 0 keeps answering, shard 1 never does: the deadline still fires (given as a
    parameter here), naming shard 1 only."""
    par = ParallelIterator.from_actors([toy(0, "a"), toy(1, "s", gate=gate)], name="rollouts")
    with pytest.raises(OperatorTimeoutError, match=r"shard 1 did not answer sample\(\) within 1 s"):
        _pull_until_raised(iter(par.gather_async(reply_deadline_s=1.0)), "the reply deadline")


def test_the_reply_deadline_holds_inside_a_non_blocking_union(
    toy: Callable[..., Any], gate: Any
) -> None:
    """A gather that yields ``NOT_READY`` to an async union (never blocking itself) checks
    its deadline too."""
    silent = ParallelIterator.from_actors([toy(1, "s", gate=gate)], name="silent")
    busy = ParallelIterator.from_actors([toy(0, "a")]).gather_async()
    merged = concurrently([busy, silent.gather_async(reply_deadline_s=1.0)], "async")
    with pytest.raises(OperatorTimeoutError) as info:
        _pull_until_raised(iter(merged), "the reply deadline")
    assert info.value.node_id == "silent"


def test_the_idle_watchdog_fires_while_a_gather_blocks_on_an_actor(
    toy: Callable[..., Any], gate: Any
) -> None:
    """The sink's ``max_idle_s`` is a deadline for a source blocked in ``ray.wait`` too,
    and its message says which shard the gather waits for."""
    flow = ParallelIterator.from_actors([toy(0, "s", gate=gate)], name="rollouts").gather_sync()
    watchdog = Watchdog("metrics", 1.0, describe=lambda: "")
    with pytest.raises(PlanStalledError) as info:
        next(ready_items(iter(flow), watchdog))
    assert info.value.node_id == "rollouts"
    assert "waiting for sample() of shard 0" in str(info.value)


def test_a_shard_pipeline_that_is_never_ready_gives_up_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inside an actor, a pipeline whose operator keeps returning ``NOT_READY`` is retried
    only until the deadline (run in-process here: ``shard_next`` is what the actor runs)."""

    class Source:
        def sample(self) -> str:
            return "x"

    instance = Source()
    wait = RemoteTransform("for_each", lambda x: NOT_READY, name="wait_forever")
    shard_init(instance, "key", "sample", (wait,), "src")
    monkeypatch.setattr(deadlines, "REPLY_DEADLINE_S", 0.2)
    with pytest.raises(OperatorTimeoutError, match=r"yielded only NOT_READY for 0\.2 s") as info:
        shard_next(instance, "key")
    assert info.value.node_id == "wait_forever"
