"""Implementations of the built-in merge operators (``plangraph/ops/builtin/merge.py``)."""

from __future__ import annotations

from typing import Any

from plangraph.flow.concurrency import RotationState, concurrently
from plangraph.flow.local import LocalIterator
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.implementations import register_lowering


@register_lowering("Concurrently")
def _concurrently(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    p = node.params
    # The rotation (whose turn, how much of it is left, the weight-rounding RNG) is
    # checkpointed, so a restored run continues the interrupted round.
    rotation = RotationState(ctx.seed)
    ctx.register_operator_state(node.id, rotation.get_state, rotation.set_state)
    return concurrently(
        inputs,
        mode=p.mode,
        output_indexes=p.output_indexes,
        weights=p.weights,
        seed=ctx.seed,
        name=node.id,
        state=rotation,
    )


@register_lowering("Union")
def _union(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    mode = "round_robin" if node.params.deterministic else "async"
    rotation = RotationState(ctx.seed)
    ctx.register_operator_state(node.id, rotation.get_state, rotation.set_state)
    return concurrently(inputs, mode=mode, seed=ctx.seed, name=node.id, state=rotation)


@register_lowering("Duplicate")
def _duplicate(node: Any, inputs: list[Any], ctx: BuildContext) -> LocalIterator[Any]:
    return inputs[0]  # the fan-out itself is done by lower_plan for every shared node
