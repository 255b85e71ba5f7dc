"""Epsilon-greedy exploration of the Q-learning policies (DQN, R2D2): one implementation.

Epsilon anneals linearly from ``epsilon_initial`` to ``epsilon_final`` over
``epsilon_timesteps`` env steps sampled (the policy's ``global_timestep``, from
``set_global_vars``). With ``per_worker_epsilon_alpha`` (Ape-X, Horgan et al. 2018, sec.
4.1) rollout worker ``i`` of ``N`` acts with ``epsilon ** (1 + alpha * i / (N - 1))``
instead (``per_worker_epsilon``; its ``RolloutWorker`` tells the policy which worker it
acts for, ``set_exploration_worker``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plangraph.algorithms.dqn.config import per_worker_epsilon

__all__ = ["EpsilonGreedy", "linear_epsilon"]


def linear_epsilon(config: Any, timestep: int) -> float:
    """Epsilon after ``timestep`` env steps sampled: linear from ``config.epsilon_initial``
    to ``config.epsilon_final`` over ``config.epsilon_timesteps``, then constant."""
    if config.epsilon_timesteps <= 0:
        return float(config.epsilon_final)
    frac = min(1.0, timestep / config.epsilon_timesteps)
    return float(config.epsilon_initial + frac * (config.epsilon_final - config.epsilon_initial))


class EpsilonGreedy:
    """Mixin for a ``TorchPolicy`` over ``Discrete`` actions whose config has the epsilon
    settings above: ``epsilon_greedy`` draws from the policy's seeded action generator."""

    # Set by TorchPolicy.__init__.
    config: Any
    global_timestep: int
    num_actions: int
    _action_rng: np.random.Generator
    #: (worker, num_workers) of the rollout worker acting with this copy (Ape-X exploration)
    exploration_worker: tuple[int, int] = (0, 1)

    def epsilon_greedy(self, q: np.ndarray, explore: bool) -> np.ndarray:
        """Greedy actions int64 ``[B]`` of ``q`` float32 ``[B, num_actions]``; with
        ``explore``, each replaced by a uniform random one with probability ``epsilon``."""
        actions = q.argmax(axis=1).astype(np.int64)
        if explore:
            rand = self._action_rng.random(actions.shape[0]) < self.epsilon
            if rand.any():
                actions[rand] = self._action_rng.integers(0, self.num_actions, size=int(rand.sum()))
        return actions

    def set_exploration_worker(self, worker: int, num_workers: int) -> None:
        """This copy acts for rollout worker ``worker`` (0-based) of ``num_workers``: with
        ``per_worker_epsilon_alpha`` set, its epsilon is that worker's Ape-X epsilon.

        Raises:
            ValueError: ``worker`` outside ``[0, num_workers)``.
        """
        if not 0 <= worker < num_workers:
            raise ValueError(f"worker {worker} is not one of {num_workers} rollout workers")
        self.exploration_worker = (int(worker), int(num_workers))

    @property
    def base_epsilon(self) -> float:
        """The annealed epsilon schedule at ``global_timestep`` (env steps sampled)."""
        return linear_epsilon(self.config, self.global_timestep)

    @property
    def epsilon(self) -> float:
        """Exploration epsilon at ``global_timestep``: ``base_epsilon``, or with
        ``per_worker_epsilon_alpha`` that of this copy's rollout worker."""
        alpha = self.config.per_worker_epsilon_alpha
        if alpha is None:
            return self.base_epsilon
        worker, num_workers = self.exploration_worker
        return per_worker_epsilon(self.base_epsilon, worker, num_workers, alpha)
