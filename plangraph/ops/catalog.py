"""The built-in operators (RLlib Flow vocabulary) and resource kinds.

Each operator's ``Params`` docstring is its documentation (``plangraph ops NAME``); field
descriptions give units. Semantics follow ``shared/reference/rllib_flow_semantics.md``
except where DESIGN.md deviates (``AverageGradients`` averages).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from plangraph.ir.types import ANY, PortType, join
from plangraph.ops.registry import (
    OpParams,
    ResourceKind,
    make_signature,
    register_resource_kind,
    register_signature,
)
from plangraph.ops.resources import ReplayBufferParams, WorkerSetParams

__all__ = [
    "ApplyGradientsParams",
    "AverageGradientsParams",
    "BatchParams",
    "ComputeGradientsParams",
    "ConcatBatchesParams",
    "ConcurrentlyParams",
    "DuplicateParams",
    "FlattenParams",
    "LocalReplayParams",
    "ParallelRolloutsParams",
    "ResourceRef",
    "StandardMetricsReportingParams",
    "StoreToReplayParams",
    "TrainOneStepParams",
    "UnionParams",
    "UpdateTargetParams",
    "WaitUntilTimestepsElapsedParams",
]

ResourceRef = Annotated[
    str,
    Field(
        pattern=r"^@[A-Za-z_][A-Za-z0-9_.\-]*$",
        description='Reference to a declared resource, "@id".',
    ),
]

_WORKERS_DESC = 'The WorkerSet resource (learner policy + rollout workers), "@id".'


# -- sources ------------------------------------------------------------------------------


class ParallelRolloutsParams(OpParams):
    """Sample batches from the rollout workers.

    Syncs the learner weights to the workers first, then streams ``SampleBatch`` items and
    adds each item's env steps to counter ``num_env_steps_sampled``.
    ``bulk_sync``: one fragment from every worker per item, concatenated (a barrier);
    ``async``: one worker's fragment per item, in completion order. With
    ``num_workers == 0`` the local worker samples and ``mode`` makes no difference.
    (RLlib's ``raw`` mode hands out the sharded iterator itself; the IR has no port type
    for sharded streams, so it is not offered.)
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)
    mode: Literal["bulk_sync", "async"] = Field(
        "bulk_sync", description="bulk_sync: all workers per item; async: as each finishes."
    )
    num_async: int = Field(
        1, ge=1, description="Sample requests in flight per worker (async mode only)."
    )


class LocalReplayParams(OpParams):
    """Replay batches from a replay buffer resource.

    Yields a not-ready marker (so a ``Concurrently`` moves on) until the buffer holds
    ``learning_starts`` env steps, then one sampled batch of ``batch_size`` env steps per
    item (with ``batch_indexes``, and IS ``weights`` for prioritized buffers).
    """

    buffer: ResourceRef = Field(description='The ReplayBuffer resource to read, "@id".')
    batch_size: int = Field(ge=1, description="Env steps per replayed batch.")


# -- combine ------------------------------------------------------------------------------


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


class BatchParams(OpParams):
    """Group ``n`` consecutive items into one list: ``T -> list[T]`` (``stream.batch(n)``)."""

    n: int = Field(ge=1, description="Items per emitted list.")


class FlattenParams(OpParams):
    """Emit the items of each list one by one: ``list[T] -> T`` (``stream.flatten()``)."""


class WaitUntilTimestepsElapsedParams(OpParams):
    """Filter: drop items until counter ``num_env_steps_sampled`` reaches ``target``."""

    target: int = Field(ge=0, description="Env steps sampled before items pass.")


# -- train --------------------------------------------------------------------------------


class TrainOneStepParams(OpParams):
    """Update the learner policy on a batch, then broadcast weights to the rollout workers.

    ``num_sgd_iter == 1`` and ``sgd_minibatch_size == 0``: exactly one optimizer step on the
    whole batch (A2C). Otherwise ``num_sgd_iter`` epochs over shuffled minibatches of
    ``sgd_minibatch_size`` rows (PPO); stats are the last epoch's mean. Adds the batch's
    env steps once to counter ``num_env_steps_trained``.

    The broadcast follows every update by default. A replay plan that runs ``k`` updates
    between two rollout rounds (DQN: round-robin weight ``k``) may set
    ``update_workers_every=k``: the workers then receive the weights once, after the last
    update of the round, which is what their next rollout would have used anyway.
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)
    num_sgd_iter: int = Field(1, ge=1, description="Epochs over each train batch.")
    sgd_minibatch_size: int = Field(
        0, ge=0, description="Rows (env steps) per minibatch; 0 = the whole batch."
    )
    update_workers_every: int = Field(
        1,
        ge=1,
        description=(
            "Broadcast the weights after every n-th update (1: after each update). Rollouts "
            "that run between two broadcasts use weights up to n - 1 updates old."
        ),
    )


class ComputeGradientsParams(OpParams):
    """Compute the learner's gradients on a batch without applying them.

    Emits ``GradInfo``: the gradient arrays, the learner stats, and the batch's env steps.
    Touches no counter.
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)


class AverageGradientsParams(OpParams):
    """Combine a list of ``GradInfo`` into one: the element-wise **mean** of the gradients
    and the **sum** of their env steps.

    Deliberate deviation from RLlib 1.x, which summed the gradients: a mean keeps the
    step size independent of the number of microbatches (DESIGN.md).
    """


class ApplyGradientsParams(OpParams):
    """One optimizer step with the given gradients, then (by default) a weight broadcast.

    Adds the gradients' env steps to counter ``num_env_steps_trained``.
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)
    update_workers: bool = Field(
        True, description="Broadcast the new weights to every rollout worker after the step."
    )


class UpdateTargetParams(OpParams):
    """Sync the DQN target network with the online network every ``freq`` env steps.

    Fires each time the chosen counter (``num_env_steps_sampled`` or
    ``num_env_steps_trained``) passes a multiple of ``freq``; ``freq == 0`` syncs after
    every item. Counts syncs in ``num_target_updates``. Passes its input through.
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)
    freq: int = Field(500, ge=0, description="Env steps between target-network syncs.")
    unit: Literal["sampled", "trained"] = Field(
        "sampled", description="Which env-step counter `freq` is measured in."
    )


# -- replay -------------------------------------------------------------------------------


class StoreToReplayParams(OpParams):
    """Add each batch to a replay buffer resource and pass it through unchanged."""

    buffer: ResourceRef = Field(description='The ReplayBuffer resource to write, "@id".')


# -- merge --------------------------------------------------------------------------------

Weight = Annotated[float, Field(gt=0)] | Literal["*"]


class ConcurrentlyParams(OpParams):
    """Drive several branches from one stream, e.g. DQN's store and replay/train branches.

    Inputs are pulled in their ``inputs`` order. ``round_robin``: a deterministic rotation,
    taking ``weights[i]`` items from input ``i`` per round (fractions rounded at random,
    ``"*"``: as many as are ready, up to 100, never blocking); ``async``: items as they
    become ready. Only the items of inputs listed in ``output_indexes`` are emitted; every
    input is still driven. Output type: the union of the emitted inputs' types.
    """

    mode: Literal["round_robin", "async"] = Field(
        "round_robin", description="round_robin: fixed rotation; async: as items are ready."
    )
    output_indexes: tuple[Annotated[int, Field(ge=0)], ...] | None = Field(
        None, description="Input positions whose items are emitted (default: all)."
    )
    weights: tuple[Weight, ...] | None = Field(
        None,
        description='Items per round from each input (positive numbers or "*"); '
        "round_robin only; one per input.",
    )

    @field_validator("output_indexes")
    @classmethod
    def _indexes(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is not None:
            if not v:
                raise ValueError("output_indexes must name at least one input")
            if len(set(v)) != len(v):
                raise ValueError("output_indexes must not repeat an index")
        return v

    @model_validator(mode="after")
    def _weights(self) -> ConcurrentlyParams:
        if self.weights is not None:
            if self.mode != "round_robin":
                raise ValueError("weights are only allowed with mode 'round_robin'")
            if all(w == "*" for w in self.weights):
                raise ValueError('at least one weight must be a number, not "*"')
        return self


def _check_concurrently(params: ConcurrentlyParams, n: int) -> list[tuple[str, str]]:
    errs: list[tuple[str, str]] = []
    if params.output_indexes is not None:
        bad = [i for i in params.output_indexes if i >= n]
        if bad:
            errs.append(
                (
                    "output_indexes",
                    f"output_indexes {list(bad)} out of range for {n} inputs (valid: 0..{n - 1})",
                )
            )
    if params.weights is not None and len(params.weights) != n:
        errs.append(
            ("weights", f"weights has {len(params.weights)} entries but the node has {n} inputs")
        )
    return errs


def _concurrently_output(types: Sequence[PortType], params: ConcurrentlyParams) -> PortType:
    if not types:
        return ANY
    idx = params.output_indexes
    chosen = [types[i] for i in idx if i < len(types)] if idx is not None else list(types)
    return join(chosen) if chosen else ANY


class UnionParams(OpParams):
    """Merge streams into one (``a.union(b, ...)``): every input is driven.

    ``deterministic``: take one item from each input in turn; otherwise items as they
    become ready. Output type: the union of the input types.
    """

    deterministic: bool = Field(False, description="Rotate inputs instead of as-ready.")


class DuplicateParams(OpParams):
    """Fan a stream out to several consumers (``stream.duplicate(n)``).

    Each consumer sees every item; a consumer that runs ahead waits (not-ready marker)
    until the others catch up, so memory stays bounded. A stream consumed by more than one
    node must go through a Duplicate.
    """


# -- sink ---------------------------------------------------------------------------------


class StandardMetricsReportingParams(OpParams):
    """Turn a training stream into one ``Result`` per training iteration.

    Pulls items until at least ``min_env_steps_per_iter`` env steps were sampled *and*
    ``min_iter_time_s`` seconds have passed since the last result (both 0: one item, one
    iteration), then reports episode return/length over the last ``metrics_window``
    completed episodes, counters, timers and learner stats.
    """

    workers: ResourceRef = Field("@workers", description=_WORKERS_DESC)
    min_iter_time_s: float = Field(0.0, ge=0, description="Seconds per iteration, at least.")
    min_env_steps_per_iter: int = Field(
        0,
        ge=0,
        description="Env steps sampled per iteration, at least (RLlib timesteps_per_iteration).",
    )
    metrics_window: int = Field(
        100, ge=1, description="Completed episodes averaged into episode_return_mean etc."
    )


# -- registration -------------------------------------------------------------------------

_W = {"workers": ("WorkerSet", "read")}
_WW = {"workers": ("WorkerSet", "write")}


def _register_builtins() -> None:
    register_resource_kind(
        ResourceKind(
            "WorkerSet",
            WorkerSetParams,
            doc=(WorkerSetParams.__doc__ or "").strip(),
        )
    )
    register_resource_kind(
        ResourceKind(
            "ReplayBuffer",
            ReplayBufferParams,
            doc=(ReplayBufferParams.__doc__ or "").strip(),
            needs_writer_and_reader=True,
        )
    )
    specs = [
        make_signature(
            "ParallelRollouts",
            category="source",
            apply="source",
            output="SampleBatch",
            params=ParallelRolloutsParams,
            resources=_W,
        ),
        make_signature(
            "ConcatBatches",
            category="combine",
            apply="combine",
            inputs=["SampleBatch"],
            output="SampleBatch",
            params=ConcatBatchesParams,
        ),
        make_signature(
            "TrainOneStep",
            category="train",
            apply="for_each",
            inputs=["SampleBatch"],
            output="TrainInfo",
            params=TrainOneStepParams,
            resources=_WW,
        ),
        make_signature(
            "ComputeGradients",
            category="train",
            apply="for_each",
            inputs=["SampleBatch"],
            output="GradInfo",
            params=ComputeGradientsParams,
            resources=_W,
        ),
        make_signature(
            "Batch",
            category="combine",
            apply="stream",
            inputs=["T"],
            output="list[T]",
            params=BatchParams,
        ),
        make_signature(
            "AverageGradients",
            category="train",
            apply="for_each",
            inputs=["list[GradInfo]"],
            output="GradInfo",
            params=AverageGradientsParams,
        ),
        make_signature(
            "ApplyGradients",
            category="train",
            apply="for_each",
            inputs=["GradInfo"],
            output="TrainInfo",
            params=ApplyGradientsParams,
            resources=_WW,
        ),
        make_signature(
            "StoreToReplay",
            category="replay",
            apply="for_each",
            inputs=["SampleBatch"],
            output="SampleBatch",
            params=StoreToReplayParams,
            resources={"buffer": ("ReplayBuffer", "write")},
        ),
        make_signature(
            "LocalReplay",
            category="replay",
            apply="source",
            output="SampleBatch",
            params=LocalReplayParams,
            resources={"buffer": ("ReplayBuffer", "read")},
        ),
        make_signature(
            "UpdateTarget",
            category="train",
            apply="for_each",
            inputs=["TrainInfo"],
            output="TrainInfo",
            params=UpdateTargetParams,
            resources=_WW,
        ),
        make_signature(
            "Concurrently",
            category="merge",
            apply="stream",
            variadic="Any",
            min_inputs=2,
            output="Any",
            params=ConcurrentlyParams,
            check_params=_check_concurrently,  # type: ignore[arg-type]
            infer_output=_concurrently_output,  # type: ignore[arg-type]
        ),
        make_signature(
            "StandardMetricsReporting",
            category="sink",
            apply="stream",
            inputs=["Any"],
            output="Result",
            params=StandardMetricsReportingParams,
            resources=_W,
        ),
        make_signature(
            "Flatten",
            category="combine",
            apply="stream",
            inputs=["list[T]"],
            output="T",
            params=FlattenParams,
        ),
        make_signature(
            "WaitUntilTimestepsElapsed",
            category="combine",
            apply="filter",
            inputs=["T"],
            output="T",
            params=WaitUntilTimestepsElapsedParams,
        ),
        make_signature(
            "Union",
            category="merge",
            apply="stream",
            variadic="T",
            min_inputs=2,
            output="T",
            params=UnionParams,
        ),
        make_signature(
            "Duplicate",
            category="merge",
            apply="stream",
            inputs=["T"],
            output="T",
            params=DuplicateParams,
        ),
    ]
    for sig in specs:
        register_signature(dataclasses.replace(sig, builtin=True))


_register_builtins()
