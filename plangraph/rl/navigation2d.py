"""``Navigation2D``: the 2D point navigation task family of MAML (Finn et al. 2017, sec. 5.3).

Registered with gymnasium as ``"Navigation2D"`` (``plangraph.ops.env_extras`` registers it
in every process that makes it), so a plan writes ``"env": "Navigation2D"``. It is a
*task distribution*: the goal is the task, unseen by the agent, and the env carries the
task API meta-learning algorithms (``plans/maml``) call on it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["Navigation2D", "Task"]

Task = dict[str, tuple[float, float]]
"""A task of ``Navigation2D``: ``{"goal": (x, y)}`` (plain data: picklable, JSON-able)."""


class Navigation2D(gym.Env[np.ndarray, np.ndarray]):
    """A point agent on the plane moves towards a goal it does not see.

    Observation float32 ``[2]``: the agent's position ``(x, y)``, ``(0, 0)`` at reset.
    Action float32 ``[2]``: the move, clipped to ``[-0.1, 0.1]`` per coordinate (the
    ``Box`` bounds; a rollout worker clips the Gaussian sample before the env sees it).
    Reward: ``-||position after the move - goal||_2`` (negative Euclidean distance).
    No early termination: every episode is truncated at 100 steps (the registration's
    ``max_episode_steps``), so a rollout fragment of 100 steps holds whole episodes.

    Task API (Finn et al. 2017's task distribution ``p(T)``; the goals are uniform in
    ``[-0.5, 0.5]^2``):

    * ``sample_tasks(n) -> list[Task]``: ``n`` tasks drawn with the env's ``np_random``
      (seeded by ``reset(seed=...)``);
    * ``set_task(task)``: the goal of the episodes from the next step on (the start state
      does not depend on the task, so it needs no reset);
    * ``get_task() -> Task``: the current task.

    Without ``set_task`` the goal is ``goal`` (default ``(0.25, 0.25)``). A policy that
    does not know the goal cannot do better than heading for a compromise point; one
    gradient step on a task's own rollouts tells it which way to go, which is what MAML's
    inner adaptation learns to exploit.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    goal_low: float = -0.5
    goal_high: float = 0.5

    def __init__(self, goal: tuple[float, float] = (0.25, 0.25)) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-0.1, 0.1, (2,), np.float32)
        self._goal = np.array(goal, dtype=np.float64)
        self._pos = np.zeros(2, dtype=np.float64)

    def sample_tasks(self, n: int) -> list[Task]:
        """``n`` tasks, goals uniform in ``[-0.5, 0.5]^2`` from ``self.np_random``."""
        goals = self.np_random.uniform(self.goal_low, self.goal_high, size=(int(n), 2))
        return [{"goal": (float(x), float(y))} for x, y in goals]

    def set_task(self, task: Task) -> None:
        """Make ``task["goal"]`` (2 floats) the goal.

        Raises:
            ValueError: the goal is not 2 finite numbers.
        """
        goal = np.asarray(task["goal"], dtype=np.float64)
        if goal.shape != (2,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"Navigation2D task goal must be 2 finite numbers, got {task!r}")
        self._goal = goal

    def get_task(self) -> Task:
        """The current task, ``{"goal": (x, y)}``."""
        return {"goal": (float(self._goal[0]), float(self._goal[1]))}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._pos = np.zeros(2, dtype=np.float64)
        return self._pos.astype(np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = np.clip(np.asarray(action, dtype=np.float64).reshape(2), -0.1, 0.1)
        self._pos = self._pos + move
        reward = -float(np.linalg.norm(self._pos - self._goal))
        return self._pos.astype(np.float32), reward, False, False, {}
