"""Greedy evaluation during training: ``evaluation_interval`` and ``evaluation_episodes``.

Every ``evaluation_interval`` iterations ``Algorithm.train`` copies the learner policy's
weights (under the worker set's policy lock, so a learner thread is never caught half-way
through an update) into the evaluator's own policy and plays ``evaluation_episodes``
episodes with greedy actions (``explore=False``: argmax of the policy logits or of Q) in
the driver, on envs made by the same creator as the rollout workers' and seeded from the
evaluation stream of the run seed (``plangraph.rl.evaluation``; round = iteration, so a
resumed run evaluates exactly as the uninterrupted one). The result gains
``evaluation``: ``episode_return_mean/std/min/max``, ``episode_len_mean`` (env steps) and
``time_s`` (seconds the evaluation took; not part of ``time_total_s``).

Why in the driver and not on a dedicated actor: one batched forward pass per env step over
up to ``MAX_EVALUATION_ENVS`` envs costs less than the Ray round trips an actor needs, and it
works for every plan (``tools/bench_evaluation.py`` measures the overhead). Its env steps
are not counted in ``num_env_steps_sampled``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from plangraph.rl.evaluation import evaluation_seeds, run_episodes
from plangraph.rl.policies import make_policy

__all__ = ["MAX_EVALUATION_ENVS", "Evaluator"]

MAX_EVALUATION_ENVS = 16
"""Envs an evaluation plays in parallel, at most (one per episode up to this many)."""


class Evaluator:
    """Greedy evaluation of one worker set's learner policy (see the module docstring).

    Args:
        worker_set: the ``WorkerSet`` whose learner policy is evaluated and whose env
            creator makes the evaluation envs.
        lock: that worker set's policy lock.
        episodes: episodes per evaluation (>= 1).
        seed: the run seed.
    """

    def __init__(self, worker_set: Any, lock: threading.RLock, *, episodes: int, seed: int) -> None:
        if getattr(worker_set, "multi_agent", False):
            from plangraph.errors import BuildError

            raise BuildError(
                "greedy evaluation (--evaluation-interval) of a multi-agent worker set is not "
                "supported yet; each policy's training returns are in the result under "
                "policies/<id>/episode_return_mean"
            )
        learner = worker_set.local_policy
        self.worker_set = worker_set
        self.lock = lock
        self.episodes = int(episodes)
        self.seed = int(seed)
        self.policy = make_policy(
            learner.observation_space, learner.action_space, worker_set.policy_config, seed
        )
        self.envs = [worker_set.env() for _ in range(min(self.episodes, MAX_EVALUATION_ENVS))]

    def evaluate(self, round_: int) -> dict[str, float]:
        """Play the episodes of evaluation round ``round_`` with the learner's current
        weights; returns the ``evaluation`` stats of a result."""
        started = time.perf_counter()
        with self.lock:
            weights = self.worker_set.local_policy.get_weights()  # copies
        self.policy.set_weights(weights)
        played = run_episodes(
            self.policy, self.envs, evaluation_seeds(self.seed, self.episodes, round_)
        )
        return {**played.stats(), "time_s": time.perf_counter() - started}

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []
