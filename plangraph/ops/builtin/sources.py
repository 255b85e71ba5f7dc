"""Built-in source operators: streams that start a plan (RLlib Flow's ``ParallelRollouts``,
``AsyncGradients``).

Implementations: ``plangraph/runtime/ops/sources.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from plangraph.ir.types import SAMPLE_BATCH, PortType, shard_of
from plangraph.ops.builtin._shared import WORKERS_READ, ResourceRef, workers_field
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_IN_FLIGHT

__all__ = [
    "AsyncGradients",
    "AsyncGradientsParams",
    "ParallelRollouts",
    "ParallelRolloutsParams",
    "ReadExperiences",
    "ReadExperiencesParams",
]


class ParallelRolloutsParams(OpParams):
    """Sample batches from the rollout workers.

    Syncs the learner weights to the workers first, then streams ``SampleBatch`` items and
    adds each item's env steps to counter ``num_env_steps_sampled``.
    ``bulk_sync``: one fragment from every worker per item, concatenated (a barrier);
    ``async``: one worker's fragment per item, in completion order;
    ``raw``: the stream stays on the workers, ``Shard[SampleBatch]`` (RLlib's ``raw``
    mode: each worker's own fragments, postprocessed, not gathered), for per-shard
    operators (``placement="shard"``) and then ``GatherShards``, which brings them to the
    driver and counts them there. With ``num_workers == 0`` the local worker samples and
    ``mode`` makes no difference (in ``raw`` mode the local worker is the one shard).
    """

    workers: ResourceRef = workers_field()
    mode: Literal["bulk_sync", "async", "raw"] = Field(
        "bulk_sync",
        description=(
            "bulk_sync: all workers per item; async: as each finishes; raw: per-shard "
            "stream on the workers (Shard[SampleBatch]), to gather with GatherShards."
        ),
    )
    num_async: int = Field(
        1,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="Sample requests in flight per worker (async mode only).",
    )


def _rollouts_output(_types: Sequence[PortType], params: Any) -> PortType:
    """``Shard[SampleBatch]`` in ``raw`` mode, else ``SampleBatch`` (a multi-agent worker
    set's are ``MultiAgentBatch``: the type check swaps the item type)."""
    return shard_of(SAMPLE_BATCH) if params.mode == "raw" else SAMPLE_BATCH


ParallelRollouts = register_op(
    "ParallelRollouts",
    category="source",
    apply="source",
    output="SampleBatch",
    params=ParallelRolloutsParams,
    infer_output=_rollouts_output,
    resources=WORKERS_READ,
    placement="actors",
    builtin=True,
)


class AsyncGradientsParams(OpParams):
    """Gradients computed on the rollout workers, each on its own fresh fragment (A3C).

    Each rollout worker samples one fragment (``num_envs_per_worker`` x
    ``rollout_fragment_length`` env steps), postprocesses it (GAE with its own value head)
    and computes the policy's loss gradients on it with its own copy of the weights; the
    driver receives one ``GradInfo`` per fragment (float32 gradient arrays through the
    object store, the learner stats, the env steps, and the worker it came from) in
    completion order, ``num_async`` requests in flight per worker (Mnih et al. 2016,
    Algorithm S3; RLlib Flow's ``AsyncGradients``). Adds each item's env steps to counter
    ``num_env_steps_sampled`` when it arrives. Pair it with
    ``ApplyGradients(update_workers="source")``, which sends the new weights back to that
    worker alone. With ``num_workers == 0`` the local worker computes them in the driver.
    A dead rollout worker is replaced like in ``ParallelRollouts``.
    """

    workers: ResourceRef = workers_field()
    num_async: int = Field(
        1, ge=1, le=MAX_IN_FLIGHT, description="Gradient requests in flight per rollout worker."
    )


AsyncGradients = register_op(
    "AsyncGradients",
    category="source",
    apply="source",
    output="GradInfo",
    params=AsyncGradientsParams,
    resources=WORKERS_READ,
    placement="actors",
    learns=True,
    builtin=True,
)


class ReadExperiencesParams(OpParams):
    """Batches of recorded experience, streamed from an ``OfflineData`` resource.

    Reads the dataset through Ray Data (``ray.data.read_parquet``) epoch after epoch,
    without end: the file order is shuffled each epoch and the rows go through a shuffle
    buffer of the resource's ``shuffle_buffer_size`` rows; with ``num_readers > 1`` the
    dataset is split over that many reader actors (``streaming_split``) and their batches
    are taken as they come. The driver never holds more than a few batches. Each item is
    a ``SampleBatch`` of ``batch_size`` rows (the last of an epoch may be smaller) with the
    recorded columns, plus ``returns`` (float32 ``[B]``, discounted return to go with the
    learner's ``gamma``) when the learner of ``workers`` reads it (MARWIL). Adds rows to
    counter ``num_env_steps_read`` and completed passes over the dataset to
    ``num_dataset_epochs``; ``TrainOneStep`` then counts ``num_env_steps_trained``.
    The dataset's columns are checked against the env of ``workers`` before any actor
    starts; a batch with a NaN or infinite reward or observation stops the run naming
    the column.
    """

    dataset: ResourceRef = Field("@offline", description='The OfflineData resource to read, "@id".')
    workers: ResourceRef = workers_field()
    batch_size: int = Field(ge=1, description="Rows (env steps) per batch.")


ReadExperiences = register_op(
    "ReadExperiences",
    category="source",
    apply="source",
    output="SampleBatch",
    params=ReadExperiencesParams,
    resources={"dataset": ("OfflineData", "read"), **WORKERS_READ},
    builtin=True,
)
