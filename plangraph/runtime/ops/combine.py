"""Implementations of the built-in combine operators (``plangraph/ops/builtin/combine.py``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import SAMPLED
from plangraph.runtime.implementations import register_lowering, register_map


@register_lowering("ConcatBatches")
def _concat_batches(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import MultiAgentBatch, SampleBatch

    p = node.params
    min_size = p.min_batch_size
    by_agent_steps = p.count_steps_by == "agent_steps"
    counted = set(p.policies)
    pending: list[Any] = []
    count = 0

    def size(batch: Any) -> int:
        if not by_agent_steps:
            return int(batch.env_steps())
        if not isinstance(batch, MultiAgentBatch):
            raise TypeError(
                f"ConcatBatches {node.id!r} counts agent steps but got a "
                f"{type(batch).__name__}; agent steps are counted on MultiAgentBatch items"
            )
        steps = batch.policy_agent_steps()
        return sum(n for pid, n in steps.items() if not counted or pid in counted)

    def concat(batch: Any) -> list[Any]:
        nonlocal count
        pending.append(batch)
        count += size(batch)
        if count < min_size:
            return []
        kind = MultiAgentBatch if isinstance(pending[0], MultiAgentBatch) else SampleBatch
        out = kind.concat_samples(pending)
        pending.clear()
        count = 0
        return [out]

    # The batches not yet emitted are checkpointed (as data): under a union the run can
    # stop while some are pending, and the resumed run must emit the same train batches.
    def get_state() -> dict[str, Any]:
        multi = bool(pending) and isinstance(pending[0], MultiAgentBatch)
        return {"pending": [b.to_data() for b in pending], "count": count, "multi_agent": multi}

    def set_state(state: dict[str, Any]) -> None:
        nonlocal count
        kind = MultiAgentBatch if state.get("multi_agent") else SampleBatch
        pending[:] = [kind.from_data(b) for b in state["pending"]]
        count = int(state["count"])

    ctx.register_operator_state(node.id, get_state, set_state)
    return inputs[0].combine(concat, name=node.id)


@register_lowering("Batch")
def _batch(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].batch(node.params.n)


@register_lowering("Flatten")
def _flatten(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0].flatten()


@register_lowering("WaitUntilTimestepsElapsed")
def _wait_until(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    target = node.params.target
    return inputs[0].filter(lambda _item: get_metrics().counters[SAMPLED] >= target, name=node.id)


@register_map("StandardizeFields")
def _standardize_fields(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    from plangraph.rl.standardize import standardize_fields

    # A module-level function and plain data: picklable, so the rollout workers can run
    # it when the compiler moves the node there (pass worker-side-maps).
    return functools.partial(standardize_fields, fields=tuple(node.params.fields))


@register_map("SelectExperiences")
def _select_experiences(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    keep = tuple(node.params.policies)

    def select(batch: Any) -> Any:
        return batch.select(keep)

    return select


@register_lowering("GatherShards")
def _gather_shards(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.runtime.shards import gather

    p = node.params
    return gather(inputs[0], node.id, ctx, p.mode, p.num_async)
