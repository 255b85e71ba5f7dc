"""Implementations of the built-in sink operators (``plangraph/ops/builtin/sink.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import ready_items
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import SAMPLED, TARGET_UPDATES, TRAINED
from plangraph.runtime.implementations import register_lowering


@register_lowering("StandardMetricsReporting")
def _standard_metrics_reporting(
    node: Any, inputs: list[Any], ctx: BuildContext
) -> LocalIterator[Any]:
    p = node.params

    def report(items: Iterator[Any]) -> Iterator[dict[str, Any]]:
        started = time.monotonic()
        metrics = get_metrics()
        sampled_at_start = metrics.counters[SAMPLED]
        episodes_at_start = ctx.episodes.total
        # The sink is the blocking end of the flow: wait (not spin) while upstream is idle.
        for _item in ready_items(items):
            metrics = get_metrics()
            elapsed = time.monotonic() - started
            steps = metrics.counters[SAMPLED] - sampled_at_start
            if elapsed < p.min_iter_time_s or steps < p.min_env_steps_per_iter:
                continue
            ctx.iteration += 1
            ctx.time_total_s += elapsed
            yield _result(ctx, metrics, elapsed, steps, ctx.episodes.total - episodes_at_start)
            started = time.monotonic()
            sampled_at_start = metrics.counters[SAMPLED]
            episodes_at_start = ctx.episodes.total

    return inputs[0].transform(report, name=node.id)


def _result(
    ctx: BuildContext, metrics: Any, elapsed: float, steps: int, episodes: int
) -> dict[str, Any]:
    """One iteration's result dict (keys documented in the README)."""
    counters = {k: int(v) for k, v in sorted(metrics.counters.items())}
    result: dict[str, Any] = {
        "iteration": ctx.iteration,
        "time_this_iter_s": elapsed,
        "time_total_s": ctx.time_total_s,
        "timestamp": time.time(),
        SAMPLED: counters.get(SAMPLED, 0),
        TRAINED: counters.get(TRAINED, 0),
        TARGET_UPDATES: counters.get(TARGET_UPDATES, 0),
        "num_env_steps_sampled_this_iter": steps,
        "env_steps_per_s": steps / elapsed if elapsed > 0 else 0.0,
        "env_steps_per_s_total": (
            counters.get(SAMPLED, 0) / ctx.time_total_s if ctx.time_total_s > 0 else 0.0
        ),
        "episodes_this_iter": episodes,
        "episodes_total": ctx.episodes.total,
        "counters": counters,
        "timers": {k: t.mean for k, t in sorted(metrics.timers.items())},
        "learner": dict(metrics.info.get("learner", {})),
    }
    result.update(ctx.episodes.stats())
    return result
