"""LocalIterator: laziness, transforms, the sentinel protocol, duplicate, errors (no Ray)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from plangraph.flow.errors import OperatorError
from plangraph.flow.iterators import NOT_READY, LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import ready_items


def counting_source(pulls: list[int], n: int | None = None) -> LocalIterator[int]:
    """A source that records each item it produces in ``pulls`` (infinite if ``n`` is None)."""

    def gen() -> Iterator[int]:
        i = 0
        while n is None or i < n:
            pulls.append(i)
            yield i
            i += 1

    return LocalIterator.from_iterable(gen, name="src")


def test_lazy_until_first_next_and_each_transform_is_a_new_iterator() -> None:
    pulls: list[int] = []
    src = counting_source(pulls, 10)
    mapped = src.for_each(lambda x: x * 2)
    kept = mapped.filter(lambda x: x % 4 == 0)
    assert pulls == []
    assert len({id(src), id(mapped), id(kept)}) == 3
    assert next(kept) == 0
    assert next(kept) == 4
    assert pulls == [0, 1, 2]


def test_transforms_compose() -> None:
    it = LocalIterator.from_iterable(range(7))
    assert it.for_each(lambda x: x + 1).take(3) == [1, 2, 3]
    assert LocalIterator.from_iterable(range(7)).batch(3).take(10) == [[0, 1, 2], [3, 4, 5], [6]]
    assert LocalIterator.from_iterable([[1, 2], [], [3]]).flatten().take(10) == [1, 2, 3]
    assert LocalIterator.from_iterable(range(4)).combine(lambda x: [x] * x).take(10) == [
        1,
        2,
        2,
        3,
        3,
        3,
    ]
    assert LocalIterator.from_iterable(range(3), repeat=True).take(7) == [0, 1, 2, 0, 1, 2, 0]
    with pytest.raises(ValueError, match="positive int"):
        LocalIterator.from_iterable(range(3)).batch(0)


def test_builtin_transforms_pass_the_sentinel_through() -> None:
    items = [1, NOT_READY, 2, NOT_READY, 3]
    base = LocalIterator.from_iterable(items)
    assert list(base.for_each(lambda x: x * 10)) == [10, NOT_READY, 20, NOT_READY, 30]
    assert list(base.filter(lambda x: x != 2)) == [1, NOT_READY, NOT_READY, 3]
    assert list(base.batch(2)) == [NOT_READY, [1, 2], NOT_READY, [3]]
    nested = LocalIterator.from_iterable([[1, 2], NOT_READY, [3]])
    assert list(nested.flatten()) == [1, 2, NOT_READY, 3]


def test_for_each_retries_the_same_item_when_the_operator_is_not_ready() -> None:
    seen: list[int] = []

    def back_pressure(x: int) -> object:
        seen.append(x)
        # Not ready on the first try of every item, like Enqueue on a full queue.
        return NOT_READY if seen.count(x) == 1 else x

    out = list(LocalIterator.from_iterable([1, 2]).for_each(back_pressure))
    assert out == [NOT_READY, 1, NOT_READY, 2]
    assert seen == [1, 1, 2, 2]


def test_on_fetch_start_hook_runs_once_per_new_item() -> None:
    class Timed:
        def __init__(self) -> None:
            self.starts = 0

        def _on_fetch_start(self) -> None:
            self.starts += 1

        def __call__(self, x: int) -> int:
            return x

    op = Timed()
    out = list(LocalIterator.from_iterable([1, NOT_READY, NOT_READY, 2]).for_each(op))
    assert out == [1, NOT_READY, NOT_READY, 2]
    # One start per fetched item, plus the one that finds the end of the stream.
    assert op.starts == 3


def test_duplicate_bounds_buffering_and_delivers_every_item_to_every_child() -> None:
    pulls: list[int] = []
    left, right = counting_source(pulls).duplicate(2)
    assert next(left) == 0
    # The left child is ahead: it gets sentinels and the source is not pulled again.
    assert [next(left) for _ in range(100)] == [NOT_READY] * 100
    assert pulls == [0]
    assert next(right) == 0
    assert next(left) == 1
    assert [next(left) for _ in range(5)] == [NOT_READY] * 5
    assert next(right) == 1
    assert pulls == [0, 1]


def test_duplicate_children_end_when_the_parent_ends() -> None:
    a, b = LocalIterator.from_iterable([1, 2]).duplicate(2)
    assert [next(a), next(b), next(a), next(b)] == [1, 1, 2, 2]
    with pytest.raises(StopIteration):
        next(a)
    with pytest.raises(StopIteration):
        next(b)
    with pytest.raises(ValueError, match=">= 2"):
        LocalIterator.from_iterable([1]).duplicate(1)


def test_duplicate_children_share_the_parent_metrics() -> None:
    src = LocalIterator.from_iterable(range(3))
    a, b = src.duplicate(2)
    assert a.shared_metrics is src.shared_metrics is b.shared_metrics


def test_take_skips_sentinels() -> None:
    it = LocalIterator.from_iterable([NOT_READY, 1, NOT_READY, NOT_READY, 2, 3])
    assert it.take(2) == [1, 2]


def test_operator_error_names_the_node_and_keeps_the_traceback() -> None:
    def exploding_learner(x: int) -> int:
        raise ZeroDivisionError(f"bad batch {x}")

    it = LocalIterator.from_iterable([7]).for_each(exploding_learner, name="train")
    with pytest.raises(OperatorError) as info:
        next(it)
    err = info.value
    assert err.node_id == "train"
    assert err.detail == "ZeroDivisionError: bad batch 7"
    assert "exploding_learner" in err.traceback_text
    assert "plan node 'train'" in str(err)
    assert isinstance(err.__cause__, ZeroDivisionError)


def test_filter_and_source_errors_name_their_nodes() -> None:
    def predicate(x: int) -> bool:
        raise KeyError("advantages")

    with pytest.raises(OperatorError, match="'keep'") as info:
        next(LocalIterator.from_iterable([1]).filter(predicate, name="keep"))
    assert info.value.node_id == "keep"

    def broken_source() -> Iterator[int]:
        yield 1
        raise RuntimeError("env crashed")

    it = LocalIterator.from_iterable(broken_source, name="rollouts").for_each(lambda x: x, "f")
    assert next(it) == 1
    with pytest.raises(OperatorError) as info:
        next(it)
    assert info.value.node_id == "rollouts"
    assert "env crashed" in info.value.traceback_text


def test_upstream_operator_error_is_not_rewrapped_downstream() -> None:
    def fail(x: int) -> int:
        raise ValueError("first")

    it = LocalIterator.from_iterable([1]).for_each(fail, name="a").for_each(lambda x: x, "b")
    with pytest.raises(OperatorError) as info:
        next(it)
    assert info.value.node_id == "a"


def test_zip_with_source_actor_requires_a_source_actor() -> None:
    it = LocalIterator.from_iterable([1]).zip_with_source_actor()
    with pytest.raises(OperatorError, match="source actor"):
        next(it)


def test_metrics_reachable_inside_operators_only() -> None:
    def count(x: int) -> int:
        get_metrics().counters["num_env_steps_sampled"] += x
        return x

    it = LocalIterator.from_iterable([3, 4]).for_each(count)
    assert it.take(2) == [3, 4]
    assert it.shared_metrics.get().counters["num_env_steps_sampled"] == 7
    with pytest.raises(ValueError, match="outside an operator call"):
        get_metrics()


def test_metrics_context_is_restored_after_a_nested_pull() -> None:
    inner = LocalIterator.from_iterable(range(10)).for_each(
        lambda x: get_metrics().counters.__setitem__("inner", x) or x
    )
    seen: list[bool] = []

    def outer_op(x: int) -> int:
        ctx = get_metrics()
        next(inner)  # pulls another dataflow from inside this operator
        seen.append(get_metrics() is ctx)
        return x

    outer = LocalIterator.from_iterable([1, 2]).for_each(outer_op)
    assert outer.take(2) == [1, 2]
    assert seen == [True, True]
    assert "inner" not in outer.shared_metrics.get().counters
    assert inner.shared_metrics.get().counters["inner"] == 1


def test_ready_items_skips_sentinels_for_a_blocking_consumer() -> None:
    it = LocalIterator.from_iterable([NOT_READY, "a", NOT_READY, "b"])
    assert list(ready_items(it)) == ["a", "b"]


def test_the_idle_watchdog_fires_while_a_filter_drops_every_item() -> None:
    """A filter that keeps nothing keeps the flow busy (items arrive, none reach the sink):
    the sink's ``max_idle_s`` still fires, naming the filter."""
    from plangraph.flow.watchdog import PlanStalledError, Watchdog

    def slow_count() -> Iterator[int]:
        n = 0
        while True:
            time.sleep(0.01)
            n += 1
            yield n

    flow = LocalIterator.from_iterable(slow_count(), name="source").filter(
        lambda x: x < 0, name="keep_none"
    )
    watchdog = Watchdog("metrics", 0.3, describe=lambda: "")
    with pytest.raises(PlanStalledError) as info:
        next(ready_items(iter(flow), watchdog))
    assert info.value.node_id == "keep_none"
    assert "dropped every item" in str(info.value)
