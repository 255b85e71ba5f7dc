"""Implementations of the built-in combine operators (``plangraph/ops/builtin/combine.py``)."""

from __future__ import annotations

from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import SAMPLED
from plangraph.runtime.implementations import register_lowering, timed


@register_lowering("ConcatBatches")
def _concat_batches(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    from plangraph.rl import SampleBatch

    min_size = node.params.min_batch_size
    pending: list[Any] = []
    count = 0

    def concat(batch: Any) -> list[Any]:
        nonlocal count
        pending.append(batch)
        count += batch.env_steps()
        if count < min_size:
            return []
        out = SampleBatch.concat_samples(pending)
        pending.clear()
        count = 0
        return [out]

    return inputs[0].combine(timed(node.id, concat), name=node.id)


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
