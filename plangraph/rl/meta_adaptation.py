"""MAML's worker side: inner adaptation inside a rollout worker, and tasks for the workers.

:func:`inner_adaptation` is a per-shard function ``fn(worker, item)`` (the shard operator
contract): it runs INSIDE a rollout worker actor, on the fragment that worker just sampled
with the meta-policy, adapts the worker's own copy of the policy to the worker's task,
samples again with the adapted policy, and puts the meta-weights back. The driver gets
every batch of the task (an :class:`AdaptedTask`) and re-does the inner steps
differentiably for the meta-update (``MAMLPolicy.meta_update``).

Tasks come from the env's task API (``sample_tasks(n)``, ``set_task(task)``,
``get_task()``; ``Navigation2D`` has it, ``docs/guide/environments.md``). All sub-envs of
one worker share the worker's task.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from plangraph.rl.sample_batch import SampleBatch

__all__ = [
    "AdaptedTask",
    "check_task_api",
    "draw_tasks",
    "get_task",
    "inner_adaptation",
    "sample_and_adapt",
    "set_task",
]

TASK_API = ("sample_tasks", "set_task", "get_task")
"""The methods an env of a task distribution has (``Navigation2D``'s)."""


@dataclass(frozen=True)
class AdaptedTask:
    """One task's rollouts before and after adaptation, from one rollout worker.

    Attributes:
        task: the task (what the env's ``get_task()`` returned).
        batches: ``D^0 .. D^k``: ``D^0`` sampled by the meta-policy, ``D^j`` by the policy
            adapted ``j`` times (``k = inner_adaptation_steps``), each ``num_envs x
            rollout_fragment_length`` rows, postprocessed.
        worker_index: the rollout worker that adapted (1..num_workers; 0 the local one).
        pid: the process it adapted in (``os.getpid()`` there).
        inner_losses: the inner loss ``L_in`` before each inner step (``k`` floats).
    """

    task: Any
    batches: tuple[SampleBatch, ...]
    worker_index: int
    pid: int
    inner_losses: tuple[float, ...]

    def env_steps(self) -> int:
        """Env steps of all the task's batches (what ``GatherShards`` counts as sampled)."""
        return sum(b.env_steps() for b in self.batches)

    @property
    def episode_returns(self) -> list[float]:
        """Returns of the episodes the adapted policy completed (``batches[-1]``): what
        ``GatherShards`` adds to the episode window (``episode_return_mean``)."""
        return list(self.batches[-1].episode_returns)

    @property
    def episode_lengths(self) -> list[int]:
        """Lengths of those episodes."""
        return list(self.batches[-1].episode_lengths)

    def return_mean(self, j: int) -> float:
        """Mean return of the episodes completed in ``batches[j]`` (NaN if none)."""
        returns = np.asarray(self.batches[j].episode_returns, dtype=np.float64)
        return float(returns.mean()) if returns.size else float("nan")


def check_task_api(env: Any) -> list[str]:
    """The methods of :data:`TASK_API` that ``env`` (a gymnasium env, maybe wrapped) lacks."""
    base = getattr(env, "unwrapped", env)
    return [name for name in TASK_API if not callable(getattr(base, name, None))]


def draw_tasks(env: Any, n: int, rng: np.random.Generator) -> list[Any]:
    """``n`` tasks from ``env.sample_tasks(n)``, drawn with ``rng`` (made the env's
    ``np_random``, so the draw is the caller's seeded stream)."""
    base = env.unwrapped
    base.np_random = rng
    return list(base.sample_tasks(int(n)))


def set_task(worker: Any, task: Any) -> bool:
    """Give every sub-env of rollout ``worker`` the task ``task`` (the env's
    ``set_task``). Runs in the worker (``actor.__ray_call__.remote(set_task, task)``).

    Raises:
        AttributeError: the env has no ``set_task`` (no task API).
    """
    worker.env.call("set_task", task)
    return True


def get_task(worker: Any) -> Any:
    """The task of rollout ``worker`` (its first sub-env's ``get_task()``)."""
    return worker.env.call("get_task")[0]


def _check_fresh_episodes(worker: Any, batch: SampleBatch) -> None:
    """Every sub-env's rows of ``batch`` start a new episode: then no episode mixes the
    task before and after a ``set_task`` between fragments."""
    starts = np.asarray(batch[SampleBatch.T]).reshape(worker.num_envs, -1)[:, 0]
    if np.any(starts != 0):
        raise ValueError(
            f"MAML's inner adaptation on rollout worker {worker.worker_index}: a fragment "
            f"continues an episode begun in the previous one (episode step {int(starts.max())} "
            f"at its first row), so one episode would mix two tasks; set the worker set's "
            f"rollout_fragment_length ({worker.rollout_fragment_length}) to the env's episode "
            "length (Navigation2D: 100) or a multiple of it, with no early termination"
        )


def inner_adaptation(worker: Any, batch: SampleBatch) -> AdaptedTask:
    """The per-shard step of MAML: adapt this worker's policy to its task and sample again.

    ``batch`` (``D^0``) was sampled by ``worker`` with the meta-policy on its current
    task. ``inner_adaptation_steps`` times: one inner SGD step on the latest batch
    (``MAMLPolicy.adapt_in_place``), then a fresh fragment with the adapted policy
    (``worker.sample()``). Finally the worker's policy gets the meta-weights back, so the
    next fragment samples with the meta-policy again whether or not the driver sends new
    weights. Runs inside the rollout worker actor.

    Raises:
        ValueError: a fragment does not start fresh episodes (see ``_check_fresh_episodes``).
        AttributeError: the worker's policy cannot adapt (not a MAML policy).
    """
    policy = worker.policy
    steps = int(policy.config.inner_adaptation_steps)
    _check_fresh_episodes(worker, batch)
    meta = policy.get_weights()
    task = get_task(worker)
    batches = [batch]
    losses: list[float] = []
    try:
        for _ in range(steps):
            losses.append(policy.adapt_in_place(batches[-1]))
            batches.append(worker.sample())
    finally:
        policy.set_weights(meta)
    return AdaptedTask(task, tuple(batches), int(worker.worker_index), os.getpid(), tuple(losses))


def sample_and_adapt(worker: Any) -> AdaptedTask:
    """``inner_adaptation(worker, worker.sample())``: one whole round of one rollout
    worker (``actor.__ray_call__.remote(sample_and_adapt)``)."""
    return inner_adaptation(worker, worker.sample())
