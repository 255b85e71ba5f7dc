"""Implementations of the built-in replay operators (``plangraph/ops/builtin/replay.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from plangraph.flow.local import LocalIterator
from plangraph.flow.sentinel import NOT_READY
from plangraph.flow.watchdog import note_waiting
from plangraph.runtime.build_context import BuildContext, resource_id
from plangraph.runtime.implementations import register_lowering, register_map


@register_map("StoreToReplay")
def _store_to_replay(node: Any, ctx: BuildContext) -> Callable[[Any], Any]:
    buffer = ctx.buffer(node.params.buffer)

    def store(batch: Any) -> Any:
        buffer.add(batch)
        return batch

    return store


@register_lowering("LocalReplay")
def _local_replay(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    buffer = ctx.buffer(p.buffer)
    rid = resource_id(p.buffer)
    learning_starts = ctx.compiled.resources[rid].params.learning_starts
    needed = max(1, learning_starts)

    def why() -> str:
        # Only evaluated when the sink's idle watchdog fires.
        text = (
            f"LocalReplay: buffer {rid!r} holds {len(buffer)} env steps, fewer than "
            f"learning_starts={learning_starts}"
        )
        if buffer.capacity < needed:
            text += (
                f"; its capacity ({buffer.capacity} env steps) is below learning_starts, so "
                "it never will (raise capacity or lower learning_starts)"
            )
        else:
            text += " (is its writer, StoreToReplay, driven and fed?)"
        return text

    def base(timeout: float | None) -> Iterator[Any]:
        # Not ready (rather than blocking) until learning_starts env steps are stored, so
        # a Concurrently moves on to the branch that fills the buffer.
        while True:
            if len(buffer) < needed:
                note_waiting(node.id, why)
                yield NOT_READY
            else:
                yield buffer.sample(p.batch_size)

    return LocalIterator(base, name=node.id)
