"""Implementations of the built-in replay operators (``plangraph/ops/builtin/replay.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import get_metrics
from plangraph.flow.sentinel import NOT_READY
from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.implementations import register_lowering, timed


@register_lowering("StoreToReplay")
def _store_to_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    buffer = ctx.buffer(node.params.buffer)

    def store(batch: Any) -> Any:
        buffer.add(batch)
        return batch

    return inputs[0].for_each(timed(node.id, store), name=node.id)


@register_lowering("LocalReplay")
def _local_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    buffer = ctx.buffer(p.buffer)
    learning_starts = ctx.compiled.resources[resource_id(p.buffer)].params.learning_starts

    def base(timeout: float | None) -> Iterator[Any]:
        # Not ready (rather than blocking) until learning_starts env steps are stored, so
        # a Concurrently moves on to the branch that fills the buffer.
        while True:
            if len(buffer) < max(1, learning_starts):
                yield NOT_READY
            else:
                with get_metrics().timers[node.id]:
                    batch = buffer.sample(p.batch_size)
                yield batch

    return LocalIterator(base, name=node.id)
