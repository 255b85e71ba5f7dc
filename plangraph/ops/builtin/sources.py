"""Built-in source operators: streams that start a plan (RLlib Flow's ``ParallelRollouts``,
``AsyncGradients``).

Implementations: ``plangraph/runtime/ops/sources.py``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from plangraph.ops.builtin._shared import WORKERS_READ, ResourceRef, workers_field
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_IN_FLIGHT

__all__ = ["AsyncGradients", "AsyncGradientsParams", "ParallelRollouts", "ParallelRolloutsParams"]


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

    workers: ResourceRef = workers_field()
    mode: Literal["bulk_sync", "async"] = Field(
        "bulk_sync", description="bulk_sync: all workers per item; async: as each finishes."
    )
    num_async: int = Field(
        1,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="Sample requests in flight per worker (async mode only).",
    )


ParallelRollouts = register_op(
    "ParallelRollouts",
    category="source",
    apply="source",
    output="SampleBatch",
    params=ParallelRolloutsParams,
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
    builtin=True,
)
