"""Built-in combine operators: reshape a stream (concatenate, group, flatten, filter).

Implementations: ``plangraph/runtime/ops/combine.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from plangraph.ir.types import ANY, PortType, list_of
from plangraph.ops.builtin._shared import PolicyIds, policies_field, same_as_input
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_BATCH, MAX_IN_FLIGHT

__all__ = [
    "Batch",
    "BatchParams",
    "ConcatBatches",
    "ConcatBatchesParams",
    "Flatten",
    "FlattenParams",
    "GatherShards",
    "GatherShardsParams",
    "SelectExperiences",
    "SelectExperiencesParams",
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

    Multi-agent (``MultiAgentBatch`` in and out, concatenated per policy):
    ``count_steps_by="agent_steps"`` counts the rows (agent steps) of ``policies`` (of
    every policy when empty) instead of env steps, as RLlib's ``count_steps_by``.
    """

    min_batch_size: int = Field(
        ge=1,
        le=MAX_BATCH,
        description="Env steps (or agent steps) per emitted batch (at least).",
    )
    count_steps_by: Literal["env_steps", "agent_steps"] = Field(
        "env_steps",
        description=(
            "What is counted: env steps, or agent steps of `policies` (MultiAgentBatch only)."
        ),
    )
    policies: PolicyIds = policies_field(
        "with count_steps_by=agent_steps, the policies whose agent steps are counted (empty: all)"
    )


ConcatBatches = register_op(
    "ConcatBatches",
    category="combine",
    apply="combine",
    inputs=["SampleBatch | MultiAgentBatch"],
    output="SampleBatch",
    params=ConcatBatchesParams,
    infer_output=same_as_input,
    builtin=True,
)


class SelectExperiencesParams(OpParams):
    """Keep only the listed policies' batches of each ``MultiAgentBatch`` (RLlib's
    ``SelectExperiences``): ``MultiAgentBatch -> MultiAgentBatch``. The env-step count and
    the env episodes are unchanged; the agent steps are those of the kept policies."""

    policies: PolicyIds = Field(
        min_length=1, description="Multi-agent: the policy ids whose rows are kept."
    )


SelectExperiences = register_op(
    "SelectExperiences",
    category="combine",
    apply="for_each",
    inputs=["MultiAgentBatch"],
    output="MultiAgentBatch",
    params=SelectExperiencesParams,
    builtin=True,
)


class BatchParams(OpParams):
    """Group ``n`` consecutive items into one list: ``T -> list[T]`` (``stream.batch(n)``)."""

    n: int = Field(ge=1, le=MAX_BATCH, description="Items per emitted list.")


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


class GatherShardsParams(OpParams):
    """Bring a per-shard stream (``Shard[T]``, on the rollout workers) to the driver.

    ``sync``: a barrier round asks every worker's shard for one item and emits them one
    by one in worker order (RLlib's ``gather_sync``): ``Shard[T] -> T``;
    ``async``: items in completion order, ``num_async`` requests in flight per worker
    (RLlib's ``gather_async``): ``Shard[T] -> T``;
    ``batch``: one list per round, one item of every worker, in worker order (RLlib's
    ``batch_across_shards``): ``Shard[T] -> list[T]``.
    Counts each gathered batch here, as ``ParallelRollouts`` does (env steps into counter
    ``num_env_steps_sampled``, finished episodes into the episode window): a round of
    ``sync`` counts what one ``bulk_sync`` item counts, an ``async`` item what an
    ``async`` one does. A dead rollout worker is replaced like in ``ParallelRollouts``
    (its per-shard operators start afresh on the new actor).
    """

    mode: Literal["sync", "async", "batch"] = Field(
        "sync",
        description=(
            "sync: one item per worker per round, one by one; async: as each finishes; "
            "batch: one list per round."
        ),
    )
    num_async: int = Field(
        1,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="Requests in flight per worker (async mode only).",
    )


def _gathered(types: Sequence[PortType], params: Any) -> PortType:
    """``T`` for ``sync``/``async``, ``list[T]`` for ``batch``, from the input ``Shard[T]``."""
    t = types[0] if types else ANY
    item = t.args[0] if t.is_shard else ANY
    return list_of(item) if params.mode == "batch" else item


GatherShards = register_op(
    "GatherShards",
    category="combine",
    apply="stream",
    inputs=["Shard[T]"],
    output="T",
    params=GatherShardsParams,
    infer_output=_gathered,
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
