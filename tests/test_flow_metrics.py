"""MetricsContext, Timer and SharedMetrics (reference 2.8)."""

from __future__ import annotations

import pickle

import pytest

from plangraph.flow.iterators import LocalIterator
from plangraph.flow.metrics import (
    MetricsContext,
    SharedMetrics,
    Timer,
    get_metrics,
    metrics_context,
)


def test_timer_means_over_a_window_of_ten() -> None:
    timer = Timer()
    assert timer.mean == 0.0 and timer.mean_throughput == 0.0
    for seconds in range(1, 13):  # 1..12: the window keeps 3..12
        timer.push(float(seconds))
    assert timer.mean == pytest.approx(7.5)
    assert timer.count == 12 and timer.total_time == pytest.approx(78.0)
    timer.push_units_processed(150.0)
    assert timer.has_units_processed()
    assert timer.mean_throughput == pytest.approx(150.0 / 75.0)


def test_timer_context_manager_times_and_rejects_nesting() -> None:
    timer = Timer()
    with timer:
        with pytest.raises(RuntimeError, match="nested"):
            timer.__enter__()
    assert timer.count == 1 and timer.mean >= 0.0


def test_counters_default_to_zero_and_timers_appear_on_access() -> None:
    ctx = MetricsContext()
    assert ctx.counters["num_env_steps_sampled"] == 0
    ctx.counters["num_env_steps_sampled"] += 200
    ctx.timers["learn"].push(0.5)
    assert ctx.timers["learn"].mean == 0.5
    assert ctx.current_actor is None


def test_save_restore_round_trip_keeps_counters_and_info_and_resets_timers() -> None:
    ctx = MetricsContext()
    ctx.counters["num_env_steps_sampled"] = 1200
    ctx.counters["num_env_steps_trained"] = 800
    ctx.info["learner"] = {"default_policy": {"loss": 0.25}}
    ctx.timers["learn"].push(1.0)
    state = pickle.loads(pickle.dumps(ctx.save()))
    assert state["timers"] is None

    ctx.info["learner"]["default_policy"]["loss"] = 9.0  # the checkpoint is a copy
    fresh = MetricsContext()
    fresh.timers["sample"].push(3.0)
    fresh.counters["stale"] = 5
    fresh.restore(state)
    assert dict(fresh.counters) == {"num_env_steps_sampled": 1200, "num_env_steps_trained": 800}
    assert fresh.info == {"learner": {"default_policy": {"loss": 0.25}}}
    assert dict(fresh.timers) == {}
    with pytest.raises(ValueError, match="lacks"):
        fresh.restore({"counters": {}})


def test_shared_metrics_set_repoints_all_parents() -> None:
    a, b = SharedMetrics(), SharedMetrics()
    a.get().counters["x"] = 2
    b.get().counters["x"] = 3
    b.get().info["k"] = "v"
    merged = SharedMetrics(parents=[a, b, a])
    ctx = merged.get()
    assert a.get() is ctx is b.get()
    assert ctx.counters["x"] == 5 and ctx.info == {"k": "v"}
    external = MetricsContext()
    merged.set(external)
    assert a.get() is external is b.get()


def test_get_metrics_outside_and_inside_a_context() -> None:
    with pytest.raises(ValueError, match="outside an operator call"):
        get_metrics()
    ctx = MetricsContext()
    with metrics_context(ctx):
        assert get_metrics() is ctx
        inner = MetricsContext()
        with metrics_context(inner):
            assert get_metrics() is inner
        assert get_metrics() is ctx
    with pytest.raises(ValueError):
        get_metrics()


def test_an_external_context_can_be_plugged_into_a_built_flow() -> None:
    """The algorithm owns one MetricsContext (checkpointed); it re-points the flow at it."""

    def count(x: int) -> int:
        LocalIterator.get_metrics().counters["num_env_steps_sampled"] += x
        return x

    flow = LocalIterator.from_iterable([10, 20]).for_each(count)
    owned = MetricsContext()
    flow.shared_metrics.set(owned)
    assert flow.take(2) == [10, 20]
    assert owned.counters["num_env_steps_sampled"] == 30
