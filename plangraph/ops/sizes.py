"""Upper bounds of the sizes a plan can set, checked when its params are validated.

Every size a plan sets (workers, sub-envs, fragment and batch lengths, buffer capacities,
queue lengths, layer widths, agents) bounds what plangraph allocates, loops over or starts
before the plan runs, so each has an upper bound here, far above what any machine or
cluster can serve and far below what would make the compiler or the build allocate,
loop or start without limit. A value beyond one is a located diagnostic (PG140 for an
operator param, PG141 for a resource param, with the bound), never an attempt. Counts
of env steps that only compare with counters (``learning_starts``, ``freq``,
``min_env_steps_per_iter``) are bounded by the plan's integer limit alone
(``plangraph.ir.limits.MAX_INT``).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = [
    "MAX_AGENTS",
    "MAX_BATCH",
    "MAX_ENVS_PER_WORKER",
    "MAX_FRAGMENT",
    "MAX_IN_FLIGHT",
    "MAX_LAYERS",
    "MAX_LAYER_WIDTH",
    "MAX_MEMORY_BYTES",
    "MAX_N_STEP",
    "MAX_PASSES",
    "MAX_QUEUE",
    "MAX_REPLAY_CAPACITY",
    "MAX_RESTARTS",
    "MAX_SHARDS",
    "MAX_WINDOW",
    "MAX_WORKERS",
    "HiddenSizes",
]

MAX_WORKERS = 10_000
"""Remote rollout workers of one worker set (this machine's CPUs bound it further: PG179)."""
MAX_ENVS_PER_WORKER = 4_096
"""Sub-envs in one rollout worker's vector env."""
MAX_FRAGMENT = 1_000_000
"""Env steps per sub-env in one rollout fragment."""
MAX_BATCH = 100_000_000
"""Env steps (rows) in one batch: a train batch, a replayed batch, a minibatch; items in
one ``Batch`` list."""
MAX_REPLAY_CAPACITY = 10_000_000_000
"""Env steps one replay resource holds (the memory check bounds it further: PG196, PG185)."""
MAX_SHARDS = 1_024
"""Replay actors (shards) of one ``ReplayActors`` resource."""
MAX_IN_FLIGHT = 1_024
"""Requests in flight per actor (``num_async``)."""
MAX_QUEUE = 1_000_000
"""Items one queue or buffer of items holds (learner thread queues, minibatch buffer)."""
MAX_PASSES = 10_000
"""Passes (epochs, optimizer steps) over one batch."""
MAX_WINDOW = 1_000_000
"""Completed episodes in the metrics window; operator periods counted in items."""
MAX_RESTARTS = 1_000_000
"""Restarts of one worker or shard within its window."""
MAX_MEMORY_BYTES = 2**50
"""Memory one rollout worker may reserve (bytes; 1 PiB)."""
MAX_N_STEP = 10_000
"""Rewards summed into one n-step return."""
MAX_AGENTS = 1_024
"""Agents of one multi-agent env (``env_config`` of the built-in multi-agent envs)."""
MAX_LAYERS = 64
"""Hidden layers of one network."""
MAX_LAYER_WIDTH = 65_536
"""Units of one hidden layer."""

HiddenSizes = Annotated[
    tuple[Annotated[int, Field(ge=1, le=MAX_LAYER_WIDTH)], ...], Field(max_length=MAX_LAYERS)
]
"""Hidden layer widths: at most ``MAX_LAYERS`` layers of 1 to ``MAX_LAYER_WIDTH`` units."""
