"""Union / Concurrently semantics over local iterators (the Ray-backed goldens live in
test_runtime_parallel.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from plangraph.flow.concurrency import RotationState, concurrently, union
from plangraph.flow.errors import OperatorError
from plangraph.flow.iterators import NOT_READY, LocalIterator
from plangraph.flow.metrics import get_metrics


def letters(prefix: str, n: int | None = None, start: int = 0) -> LocalIterator[str]:
    def gen() -> Iterator[str]:
        i = start
        while n is None or i < n:
            yield f"{prefix}{i}"
            i += 1

    return LocalIterator.from_iterable(gen, name=prefix)


def never_ready() -> LocalIterator[object]:
    def gen() -> Iterator[object]:
        while True:
            yield NOT_READY

    return LocalIterator.from_iterable(gen, name="never")


def test_round_robin_alternates_and_drops_finished_inputs() -> None:
    out = list(concurrently([letters("a", 3), letters("b", 1)], "round_robin"))
    assert out == ["a0", "b0", "a1", "a2"]


def test_output_indexes_emit_only_selected_inputs_but_drive_all() -> None:
    consumed: list[str] = []
    a = letters("a", 3).for_each(lambda x: consumed.append(x) or x)
    out = list(concurrently([a, letters("b", 3)], "round_robin", output_indexes=[1]))
    assert out == ["b0", "b1", "b2"]
    assert consumed == ["a0", "a1", "a2"]


def test_union_ends_when_all_output_inputs_finished() -> None:
    # RLlib 1.0.1 kept driving the infinite input forever, emitting nothing.
    out = list(concurrently([letters("a"), letters("b", 2)], output_indexes=[1]))
    assert out == ["b0", "b1"]


def test_fractional_weights_pull_on_average_the_weight_per_round() -> None:
    merged = concurrently([letters("a"), letters("b")], weights=[1, 2.5], seed=7)
    items = merged.take(3500)
    rounds: list[int] = []
    for item in items:
        if item.startswith("a"):
            rounds.append(0)
        else:
            rounds[-1] += 1
    rounds = rounds[:-1]  # the last round may be cut by take()
    assert set(rounds) == {2, 3}
    assert sum(rounds) / len(rounds) == pytest.approx(2.5, abs=0.05)
    # Seeded: the same seed gives the same interleaving.
    again = concurrently([letters("a"), letters("b")], weights=[1, 2.5], seed=7).take(3500)
    assert again == items


def test_star_weight_input_that_is_never_ready_does_not_block() -> None:
    merged = concurrently([letters("a", 3), never_ready()], weights=[1, "*"])
    assert merged.take(3) == ["a0", "a1", "a2"]
    merged = concurrently([letters("a", 3), never_ready()], weights=[1, "*"], output_indexes=[0])
    assert list(merged) == ["a0", "a1", "a2"]


def test_star_weight_takes_whatever_is_ready() -> None:
    def bursts() -> Iterator[object]:
        i = 0
        while True:
            for _ in range(3):
                yield f"s{i}"
                i += 1
            yield NOT_READY

    star = LocalIterator.from_iterable(bursts, name="star")
    out = concurrently([letters("a"), star], weights=[1, "*"]).take(8)
    assert out == ["a0", "s0", "s1", "s2", "a1", "s3", "s4", "s5"]


def test_async_mode_polls_inputs_and_skips_idle_ones() -> None:
    def sometimes() -> Iterator[object]:
        yield NOT_READY
        yield "x0"
        yield NOT_READY
        yield NOT_READY
        yield "x1"

    out = list(concurrently([LocalIterator.from_iterable(sometimes), letters("b", 4)], "async"))
    assert sorted(out) == ["b0", "b1", "b2", "b3", "x0", "x1"]
    assert out.index("b0") < out.index("x0")


def test_async_union_waits_without_spinning_when_all_inputs_are_local_idle() -> None:
    """Every input idle and nothing Ray can wait on: the union backs off (short sleeps)."""
    released = threading.Event()

    def gated() -> Iterator[object]:
        while not released.is_set():
            yield NOT_READY
        yield "go"

    merged = concurrently([LocalIterator.from_iterable(gated), never_ready()], "async")
    result: list[object] = []
    cpu: list[float] = []

    def consume() -> None:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        result.append(next(merged))
        cpu.append((time.thread_time() - cpu0) / (time.perf_counter() - wall0))

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    time.sleep(0.5)  # the window over which CPU is measured, not a speed assertion
    released.set()
    consumer.join(timeout=30)
    assert result == ["go"], "the union handed the consumer thread nothing within 30 s"
    # A hot spin would use ~100% of a core in the consumer thread.
    assert cpu[0] < 0.3


def test_nested_non_blocking_union_passes_sentinels_up() -> None:
    inner = concurrently([never_ready(), letters("x", 2)], "async")
    assert sorted(concurrently([inner, letters("y", 2)], "async").take(4)) == [
        "x0",
        "x1",
        "y0",
        "y1",
    ]
    inner = concurrently([never_ready(), letters("x", 2)], "async")
    outer = concurrently([inner, letters("y", 2)], "async", output_indexes=[1])
    assert list(outer) == ["y0", "y1"]
    inner = concurrently([never_ready(), letters("x", 2)], "async", output_indexes=[1])
    outer = concurrently([inner, letters("y", 3)], "async")
    assert sorted(outer) == ["x0", "x1", "y0", "y1", "y2"]


def test_duplicate_children_in_a_union_each_see_every_item() -> None:
    left, right = letters("a", 4).duplicate(2)
    out = list(concurrently([left.for_each(lambda x: "L" + x), right], "async"))
    assert sorted(out) == sorted([f"La{i}" for i in range(4)] + [f"a{i}" for i in range(4)])


def test_union_merges_the_metrics_of_its_inputs() -> None:
    def count(key: str):
        def op(x: str) -> str:
            get_metrics().counters[key] += 1
            return x

        return op

    a = letters("a", 2).for_each(count("a"))
    b = letters("b", 3).for_each(count("b"))
    merged = concurrently([a, b])
    assert len(list(merged)) == 5
    ctx = merged.shared_metrics.get()
    assert dict(ctx.counters) == {"a": 2, "b": 3}
    # The inputs' cells were re-pointed at the merged context too.
    assert a.shared_metrics.get() is ctx is b.shared_metrics.get()


def test_validation_errors() -> None:
    a, b = letters("a", 1), letters("b", 1)
    with pytest.raises(ValueError, match="at least 2"):
        concurrently([a])
    with pytest.raises(ValueError, match="unknown mode"):
        concurrently([a, b], mode="parallel")
    with pytest.raises(ValueError, match="round_robin"):
        concurrently([a, b], mode="async", weights=[1, 1])
    with pytest.raises(ValueError, match='all weights are "\\*"'):
        concurrently([a, b], weights=["*", "*"])
    with pytest.raises(ValueError, match="one weight per input"):
        concurrently([a, b], weights=[1])
    with pytest.raises(ValueError, match="positive number"):
        concurrently([a, b], weights=[1, 0])
    with pytest.raises(ValueError, match="out of range"):
        concurrently([a, b], output_indexes=[2])
    with pytest.raises(TypeError, match="not a LocalIterator"):
        union([a, [1, 2]])  # type: ignore[list-item]


@pytest.mark.parametrize("cut", [1, 4, 7, 11])
def test_a_restored_rotation_state_continues_the_interrupted_round(cut: int) -> None:
    weights = [1.5, 2.5, "*"]

    def build(state: RotationState, starts: tuple[int, int, int] = (0, 0, 0)) -> LocalIterator:
        inputs = [letters(p, start=s) for p, s in zip("abc", starts, strict=True)]
        return concurrently(inputs, weights=weights, seed=3, state=state)

    straight = build(RotationState(3)).take(30)
    first = RotationState(3)
    head = build(first).take(cut)
    saved = first.get_state()
    # Plain data only: what a checkpoint can hold without pickle.
    assert json.loads(json.dumps(saved)) == saved
    # The inputs are resumed where the first run left them (each is a counter).
    starts = tuple(sum(item[0] == p for item in head) for p in "abc")
    resumed = RotationState(0)
    resumed.set_state(saved)
    assert head + build(resumed, starts).take(30 - cut) == straight  # type: ignore[arg-type]


def test_a_rotation_state_of_another_union_is_refused() -> None:
    state = RotationState()
    concurrently([letters("a"), letters("b"), letters("c")], state=state).take(2)
    small = concurrently([letters("a"), letters("b")], state=state)
    with pytest.raises(OperatorError, match="the union has 2"):
        small.take(1)
