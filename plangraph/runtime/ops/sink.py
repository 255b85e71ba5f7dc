"""Implementations of the built-in sink operators (``plangraph/ops/builtin/sink.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.sentinel import ready_items
from plangraph.flow.watchdog import Watchdog
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.implementations import register_lowering
from plangraph.runtime.result import Result
from plangraph.runtime.run_state import RunState


@register_lowering("StandardMetricsReporting")
def _standard_metrics_reporting(
    node: Any, inputs: list[Any], ctx: BuildContext
) -> LocalIterator[Any]:
    p = node.params
    state = ctx.run_state

    def report(items: Iterator[Any]) -> Iterator[Result]:
        # An iteration is timed from when the driver asks for a result, so the driver's
        # logging and checkpointing between iterations never count as training time.
        start = state.begin_iteration()
        watchdog = _watchdog(node.id, p.max_idle_s, state) if p.max_idle_s > 0 else None
        # The sink is the blocking end of the flow: wait (not spin) while upstream is idle.
        for _item in ready_items(items, watchdog):
            elapsed_s, steps = state.iteration_progress(start)
            if elapsed_s < p.min_iter_time_s or steps < p.min_env_steps_per_iter:
                continue
            result = state.end_iteration(start, elapsed_s)
            if p.policies and "policies" in result:  # the listed policies only
                result["policies"] = {
                    pid: v for pid, v in result["policies"].items() if pid in p.policies
                }
            yield result
            start = state.begin_iteration()

    return inputs[0].transform(report, name=node.id)


def _watchdog(sink: str, max_idle_s: float, state: RunState) -> Watchdog:
    """The sink's idle watchdog; when it fires it reports the counters and how much each
    moved since the last item reached the sink (growing counters: upstream is running)."""
    since: dict[str, int] = {}

    def snapshot() -> None:
        since.clear()
        since.update(state.counters)

    def describe() -> str:
        now = {k: int(v) for k, v in sorted(state.counters.items())}
        moved = ", ".join(f"{k} {since.get(k, 0)} -> {v}" for k, v in now.items()) or "none"
        return f"  counters since the last item reached {sink!r}: {moved}"

    return Watchdog(sink, max_idle_s, describe, on_progress=snapshot)
