"""``StatelessCartPole``: CartPole-v1 without the velocities, a partially observed task.

Registered with gymnasium as ``"StatelessCartPole"`` (``plangraph.ops.env_extras``
registers it in every process that makes it: the compiler, the driver, each rollout
worker), so a plan writes ``"env": "StatelessCartPole"``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

__all__ = ["StatelessCartPole"]


class StatelessCartPole(CartPoleEnv):
    """CartPole-v1 (Barto, Sutton & Anderson 1983; gymnasium's ``CartPoleEnv``) whose
    observation keeps the cart position ``x`` (m) and the pole angle ``theta`` (rad) and
    hides the cart velocity ``x_dot`` (m/s) and the pole's angular velocity ``theta_dot``
    (rad/s): observation float32 ``[2]`` = ``[x, theta]`` (entries 0 and 2 of CartPole's
    ``[x, x_dot, theta, theta_dot]``), bounds those of CartPole's same entries.

    Everything else is CartPole-v1's: actions ``Discrete(2)`` (push left, push right),
    reward 1 per step, termination when ``|x| > 2.4`` or ``|theta| > 12 deg``, truncation
    at 500 steps (the registration's ``max_episode_steps``). A policy that sees one
    observation cannot tell which way the pole is moving: it needs memory (or a frame
    stack) to infer the velocities.
    """

    def __init__(self, render_mode: str | None = None, **kwargs: Any) -> None:
        super().__init__(render_mode=render_mode, **kwargs)
        full = self.observation_space
        assert isinstance(full, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(
            full.low[[0, 2]], full.high[[0, 2]], dtype=np.float32
        )

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return np.asarray(obs)[[0, 2]], float(reward), terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = super().reset(seed=seed, options=options)
        return np.asarray(obs)[[0, 2]], info
