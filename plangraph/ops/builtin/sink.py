"""Built-in sink operators: turn a training stream into one ``Result`` per iteration.

Implementations: ``plangraph/runtime/ops/sink.py``.
"""

from __future__ import annotations

from pydantic import Field

from plangraph.ops.builtin._shared import (
    WORKERS_READ,
    PolicyIds,
    ResourceRef,
    policies_field,
    workers_field,
)
from plangraph.ops.declare import register_op
from plangraph.ops.registry import OpParams
from plangraph.ops.sizes import MAX_WINDOW

__all__ = ["StandardMetricsReporting", "StandardMetricsReportingParams"]


class StandardMetricsReportingParams(OpParams):
    """Turn a training stream into one ``Result`` per training iteration.

    Pulls items until at least ``min_env_steps_per_iter`` env steps were sampled *and*
    ``min_iter_time_s`` seconds have passed since the last result (both 0: one item, one
    iteration), then reports episode return/length over the last ``metrics_window``
    completed episodes, counters, timers and learner stats.

    ``max_idle_s > 0`` arms an idle watchdog: when no item reaches this node for that many
    seconds while the flow keeps running (e.g. a replay buffer that never reaches
    ``learning_starts``), the run stops with ``PlanStalledError`` naming the starved node
    and the counters. Off by default, as in RLlib (which has none): a slow but healthy
    plan (a large ``learning_starts`` on a slow env) must not be killed.

    Multi-agent: per policy of ``policies`` (every policy when empty) the result also
    holds ``policies/<id>/episode_return_mean`` (and ``_min``, ``_max``,
    ``episode_len_mean``: the agents' own episodes, their lengths in agent steps),
    ``policies/<id>/num_agent_steps_sampled`` and ``_trained``, and
    ``policies/<id>/learner`` (that policy's last learner stats); the plain
    ``episode_return_mean`` is over env episodes (all agents' returns summed).
    """

    workers: ResourceRef = workers_field()
    min_iter_time_s: float = Field(0.0, ge=0, description="Seconds per iteration, at least.")
    min_env_steps_per_iter: int = Field(
        0,
        ge=0,
        description="Env steps sampled per iteration, at least (RLlib timesteps_per_iteration).",
    )
    metrics_window: int = Field(
        100,
        ge=1,
        le=MAX_WINDOW,
        description="Completed episodes averaged into episode_return_mean etc.",
    )
    max_idle_s: float = Field(
        0.0,
        ge=0,
        description=(
            "Seconds without an item reaching this node before the run stops with "
            "PlanStalledError (0: no watchdog)."
        ),
    )
    policies: PolicyIds = policies_field(
        "the policies with their own result keys policies/<id>/... (empty: all)"
    )


StandardMetricsReporting = register_op(
    "StandardMetricsReporting",
    category="sink",
    apply="stream",
    inputs=["Any"],
    output="Result",
    params=StandardMetricsReportingParams,
    resources=WORKERS_READ,
    builtin=True,
)
