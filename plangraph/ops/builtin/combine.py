"""Built-in combine operators: reshape a stream (concatenate, group, flatten, filter).

Implementations: ``plangraph/runtime/ops/combine.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field

from plangraph.ir.types import ANY, PortType, list_of
from plangraph.ops.builtin._shared import (
    WORKERS_WRITE,
    PolicyIds,
    ResourceRef,
    policies_field,
    same_as_input,
    workers_field,
)
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_BATCH, MAX_IN_FLIGHT, MAX_SHARDS, MAX_WINDOW

__all__ = [
    "AggregateBatches",
    "AggregateBatchesParams",
    "Batch",
    "BatchParams",
    "ConcatBatches",
    "ConcatBatchesParams",
    "Flatten",
    "FlattenParams",
    "GatherShards",
    "GatherShardsParams",
    "MAMLInnerAdaptation",
    "MAMLInnerAdaptationParams",
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


class AggregateBatchesParams(OpParams):
    """``ConcatBatches`` run on aggregation actors near the rollout workers (IMPALA's tree
    aggregation, RLlib 1.x ``num_aggregation_workers``: ``rllib/execution/tree_agg.py``).

    Reads an ``async`` ``ParallelRollouts`` directly (its only reader) and takes its place
    at run time: ``num_aggregation_workers`` actors (0 CPUs each) share the source's
    rollout workers round-robin (aggregator ``i`` owns workers ``i``, ``i + n``, ...). Each
    aggregator keeps the source's ``num_async`` sample requests in flight per owned worker,
    fetches the fragments itself (worker to aggregator through the object store, never
    through the driver), sends each worker the learner's weights after every
    ``max_weight_sync_delay`` of its fragments (per-actor sync, as ``UpdateWorkerWeights``:
    the driver hands each aggregator an object ref of the weights once per learner version,
    and the aggregator passes the ref on), and concatenates fragments in completion order
    until at least ``min_batch_size`` env steps, as ``ConcatBatches``. The driver receives
    whole train batches, in completion order over the aggregators (keeping
    ``max_requests_in_flight_per_aggregator`` requests in flight to each), and adds each one's env
    steps (and completed episodes) to ``num_env_steps_sampled`` when it arrives (so the
    counter lags the workers by the fragments still inside the aggregators) and the
    aggregators' weight syncs to ``num_weight_syncs``. SampleBatch only.

    Limits: a rollout worker that dies stops the run (naming this node); the fragments
    inside the aggregators are not checkpointed (at most one train batch per aggregator
    is lost on restore).
    """

    workers: ResourceRef = workers_field()
    min_batch_size: int = Field(
        ge=1, le=MAX_BATCH, description="Env steps per emitted train batch (at least)."
    )
    num_aggregation_workers: int = Field(
        ge=1,
        le=MAX_SHARDS,
        description="Aggregation actors; at most the worker set's num_workers.",
    )
    max_weight_sync_delay: int = Field(
        1,
        ge=1,
        le=MAX_WINDOW,
        description="Rollout fragments of one worker between two weight syncs to it.",
    )
    max_requests_in_flight_per_aggregator: int = Field(
        2,
        ge=1,
        le=MAX_IN_FLIGHT,
        description=(
            "Train-batch requests the driver keeps in flight per aggregation actor (RLlib's "
            "max_requests_in_flight_per_aggregator_worker); they run one after another."
        ),
    )


AggregateBatches = register_op(
    "AggregateBatches",
    category="combine",
    apply="combine",
    inputs=["SampleBatch"],
    output="SampleBatch",
    params=AggregateBatchesParams,
    resources=WORKERS_WRITE,
    placement="aggregators",
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


class MAMLInnerAdaptationParams(OpParams):
    """Each rollout worker adapts its own copy of the MAML policy to its own task.

    A per-shard operator (``Shard[SampleBatch] -> Shard[AdaptedTask]``): it runs INSIDE
    every rollout worker actor, on each fragment ``D^0`` that worker sampled with the
    meta-policy on the task the driver set (``ParallelRollouts(mode="raw")``). It takes
    ``inner_adaptation_steps`` inner SGD steps of size ``inner_lr`` on the worker's copy
    of the policy, each followed by a fresh fragment ``D^j`` of the adapted policy,
    restores the meta-weights and emits an ``AdaptedTask`` (the task and ``D^0 .. D^k``;
    ``plangraph.rl.meta_adaptation.inner_adaptation``, a ``fn(worker, item)``).
    ``GatherShards`` brings them to the driver and counts them: all their env steps, and
    the episodes of the adapted policy (``D^k``), MAML's objective.
    """


MAMLInnerAdaptation = register_op(
    "MAMLInnerAdaptation",
    category="combine",
    inputs=["Shard[SampleBatch]"],
    output="Shard[AdaptedTask]",
    params=MAMLInnerAdaptationParams,
    placement="shard",
    learns=True,
    builtin=True,
)
