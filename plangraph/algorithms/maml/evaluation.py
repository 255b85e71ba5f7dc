"""How much one inner adaptation step helps on held-out tasks (MAML's measurement).

Finn et al. 2017 (sec. 5.3, Figure 4) report the return of the meta-policy before and
after its inner gradient step(s) on tasks drawn afresh from ``p(T)``. Here that is done
in-process with one local rollout worker: per task, ``num_envs`` episodes with the
meta-policy (``D^0``), the inner step(s) of :func:`inner_adaptation` (the same function
the rollout workers run in training), and ``num_envs`` episodes with the adapted policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plangraph.rl.meta_adaptation import draw_tasks, inner_adaptation, set_task
from plangraph.rl.rollout_worker import EnvSpec, RolloutWorker, env_creator

__all__ = ["HELD_OUT_SEED", "AdaptationResult", "evaluate_adaptation", "held_out_tasks"]

HELD_OUT_SEED = 2_000_003
"""Seed of the held-out task draw (training draws come from each run's node RNG)."""


@dataclass(frozen=True)
class AdaptationResult:
    """One task's mean episode return before (``pre``) and after (``post``) adaptation."""

    task: Any
    pre: float
    post: float

    @property
    def gain(self) -> float:
        return self.post - self.pre


def held_out_tasks(env: EnvSpec, n: int, seed: int = HELD_OUT_SEED) -> list[Any]:
    """``n`` tasks of ``env``'s distribution from a generator seeded with ``seed``."""
    made = env_creator(env)()
    try:
        return draw_tasks(made, n, np.random.default_rng(seed))
    finally:
        made.close()


def evaluate_adaptation(
    env: EnvSpec,
    policy_config: Any,
    weights: Mapping[str, np.ndarray],
    tasks: Sequence[Any],
    *,
    num_envs: int,
    rollout_fragment_length: int,
    seed: int = 0,
) -> list[AdaptationResult]:
    """Adapt the policy with ``weights`` to each of ``tasks`` and measure both returns.

    Args:
        env: the task distribution's env (id or creator), with the task API.
        policy_config: the MAML policy's settings (a ``MAMLConfig`` or its dict).
        weights: the meta-policy's weights (``TorchPolicy.get_weights()``).
        tasks: the tasks (``held_out_tasks``).
        num_envs: episodes per task and adaptation step.
        rollout_fragment_length: the env's episode length.
        seed: seeds the worker's sub-envs and action sampling.

    Returns:
        One :class:`AdaptationResult` per task, in order (mean returns, undiscounted).
    """
    worker = RolloutWorker(env, num_envs, rollout_fragment_length, policy_config, seed=seed)
    try:
        worker.policy.set_weights(weights)
        out = []
        for task in tasks:
            set_task(worker, task)
            adapted = inner_adaptation(worker, worker.sample())
            out.append(AdaptationResult(task, adapted.return_mean(0), adapted.return_mean(-1)))
        return out
    finally:
        worker.stop()
