"""Built-in combine operators: reshape a stream (concatenate, group, flatten, filter).

Implementations: ``plangraph/runtime/ops/combine.py``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams

__all__ = [
    "Batch",
    "BatchParams",
    "ConcatBatches",
    "ConcatBatchesParams",
    "Flatten",
    "FlattenParams",
    "StandardizeFields",
    "StandardizeFieldsParams",
    "WaitUntilTimestepsElapsed",
    "WaitUntilTimestepsElapsedParams",
]


class ConcatBatchesParams(OpParams):
    """Concatenate batches until at least ``min_batch_size`` env steps are collected.

    A flat-map (use with ``.combine``): emits nothing until the running count reaches
    ``min_batch_size``, then one concatenated batch; batches are never split, so an output
    may exceed ``min_batch_size`` by up to one input batch.
    """

    min_batch_size: int = Field(ge=1, description="Env steps per emitted batch (at least).")
    count_steps_by: Literal["env_steps"] = Field(
        "env_steps", description="What is counted: env steps (single-agent plans)."
    )


ConcatBatches = register_op(
    "ConcatBatches",
    category="combine",
    apply="combine",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=ConcatBatchesParams,
    builtin=True,
)


class BatchParams(OpParams):
    """Group ``n`` consecutive items into one list: ``T -> list[T]`` (``stream.batch(n)``)."""

    n: int = Field(ge=1, description="Items per emitted list.")


Batch = register_op(
    "Batch",
    category="combine",
    apply="stream",
    inputs=["T"],
    output="list[T]",
    params=BatchParams,
    builtin=True,
)


class FlattenParams(OpParams):
    """Emit the items of each list one by one: ``list[T] -> T`` (``stream.flatten()``)."""


Flatten = register_op(
    "Flatten",
    category="combine",
    apply="stream",
    inputs=["list[T]"],
    output="T",
    params=FlattenParams,
    builtin=True,
)


class WaitUntilTimestepsElapsedParams(OpParams):
    """Filter: drop items until counter ``num_env_steps_sampled`` reaches ``target``."""

    target: int = Field(ge=0, description="Env steps sampled before items pass.")


WaitUntilTimestepsElapsed = register_op(
    "WaitUntilTimestepsElapsed",
    category="combine",
    apply="filter",
    inputs=["T"],
    output="T",
    params=WaitUntilTimestepsElapsedParams,
    builtin=True,
)


class StandardizeFieldsParams(OpParams):
    """Standardise columns of each batch: ``x' = (x - mean) / max(std, 1e-4)`` over its rows.

    RLlib's ``StandardizeFields`` (``rllib/execution``), typically after ``ConcatBatches``
    so that the advantages are standardised per train batch. Declared pure: it may run on
    the rollout workers when it reads a rollout source directly (pass
    ``worker-side-maps``), but only where each item is one worker's fragment (async
    rollouts): it is not row-wise, so a bulk-sync round of several workers keeps it on the
    driver. Float columns keep their dtype; a constant column becomes 0.
    """

    fields: tuple[Annotated[str, Field(min_length=1)], ...] = Field(
        ("advantages",),
        min_length=1,
        description="Columns to standardise (each numeric, [B] or [B, ...]).",
    )


StandardizeFields = register_op(
    "StandardizeFields",
    category="combine",
    apply="for_each",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=StandardizeFieldsParams,
    pure=True,
    builtin=True,
)
