"""Builders of the registered env wrappers (``plangraph.ops.wrappers``) and the picklable
creator that applies a worker set's ``wrappers`` to each sub-env.

Imports gymnasium (not torch). ``wrapped_env`` (re-exported from ``plangraph.ops.wrappers``,
where the compiler finds it without importing this layer) applies a list of wrappers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from plangraph.ops.wrappers import wrapped_env
from plangraph.rl.envs import env_label

__all__ = [
    "NormalizeObservation",
    "WrappedEnvCreator",
    "clip_reward",
    "find_normalizers",
    "flatten_observation",
    "merge_moments",
    "normalize_observation",
    "scale_reward",
    "time_limit",
    "wrapped_env",
]


def clip_reward(env: gym.Env, min_reward: float, max_reward: float) -> gym.Env:
    return gym.wrappers.ClipReward(env, min_reward, max_reward)


class _ScaleReward(gym.RewardWrapper):
    def __init__(self, env: gym.Env, scale: float) -> None:
        super().__init__(env)
        self.scale = float(scale)

    def reward(self, reward: Any) -> Any:
        return self.scale * reward


def scale_reward(env: gym.Env, scale: float) -> gym.Env:
    return _ScaleReward(env, scale)


def flatten_observation(env: gym.Env) -> gym.Env:
    return gym.wrappers.FlattenObservation(env)


def time_limit(env: gym.Env, max_episode_steps: int) -> gym.Env:
    return gym.wrappers.TimeLimit(env, max_episode_steps)


class WrappedEnvCreator:
    """The env of ``base`` (a gymnasium id, or a creator such as
    ``plangraph.rl.envs.resolve_env`` returns) inside the worker set's wrappers; picklable
    (rollout workers are Ray actors), so it travels instead of a closure."""

    def __init__(self, base: str | Callable[[], gym.Env], wrappers: Sequence[Any]) -> None:
        self.base = base
        self.wrappers = tuple(wrappers)

    def __call__(self) -> gym.Env:
        env = gym.make(self.base) if isinstance(self.base, str) else self.base()
        return wrapped_env(env, self.wrappers)

    def __repr__(self) -> str:
        names = ", ".join(w.name for w in self.wrappers)
        return f"{env_label(self.base)} [{names}]"


def merge_moments(
    a: tuple[float, np.ndarray, np.ndarray], b: tuple[float, np.ndarray, np.ndarray]
) -> tuple[float, np.ndarray, np.ndarray]:
    """Pool two ``(count, mean, M2)`` running moments (Chan et al. 1979, the parallel
    variance update): the moments of both sets of observations together."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if n == 0:
        return 0.0, mean_a.copy(), m2_a.copy()
    delta = mean_b - mean_a
    mean = mean_a + delta * (n_b / n)
    m2 = m2_a + m2_b + delta * delta * (n_a * n_b / n)
    return float(n), mean, m2


class NormalizeObservation(gym.ObservationWrapper):
    """``clip((obs - mean) / sqrt(var + epsilon), -clip, clip)`` as float32, with running
    moments of every observation the env returns (reset and step).

    Two sets of moments, as instance attributes of plain data (so checkpoints capture
    them with the env, ``plangraph.rl.env_state``): ``count, mean, m2`` normalise (the
    worker set's pooled statistics as last synced, plus what this env saw since), and
    ``delta_count, delta_mean, delta_m2`` hold only what it saw since the last sync
    (what the driver pools: RLlib's ``MeanStdFilter`` scheme).
    """

    def __init__(self, env: gym.Env, clip: float = 10.0, epsilon: float = 1e-8) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"normalize_observation needs Box observations, got {space}")
        shape = tuple(space.shape)
        self.clip, self.epsilon = float(clip), float(epsilon)
        self.observation_space = gym.spaces.Box(-self.clip, self.clip, shape, np.float32)
        self.count, self.mean, self.m2 = 0.0, np.zeros(shape), np.zeros(shape)
        self.delta_count, self.delta_mean, self.delta_m2 = 0.0, np.zeros(shape), np.zeros(shape)

    def observation(self, observation: Any) -> np.ndarray:
        x = np.asarray(observation, dtype=np.float64)
        one = (1.0, x, np.zeros_like(x))
        self.count, self.mean, self.m2 = merge_moments((self.count, self.mean, self.m2), one)
        self.delta_count, self.delta_mean, self.delta_m2 = merge_moments(
            (self.delta_count, self.delta_mean, self.delta_m2), one
        )
        var = self.m2 / self.count if self.count > 0 else np.ones_like(self.m2)
        z = (x - self.mean) / np.sqrt(var + self.epsilon)
        return np.clip(z, -self.clip, self.clip).astype(np.float32)

    def take_delta(self) -> tuple[float, np.ndarray, np.ndarray]:
        """The moments since the last sync; clears them."""
        out = (self.delta_count, self.delta_mean, self.delta_m2)
        shape = self.mean.shape
        self.delta_count, self.delta_mean, self.delta_m2 = 0.0, np.zeros(shape), np.zeros(shape)
        return out

    def set_moments(self, count: float, mean: np.ndarray, m2: np.ndarray) -> None:
        """Normalise with these (pooled) moments from now on."""
        self.count = float(count)
        self.mean = np.array(mean, dtype=np.float64)
        self.m2 = np.array(m2, dtype=np.float64)


def normalize_observation(env: gym.Env, clip: float, epsilon: float) -> gym.Env:
    return NormalizeObservation(env, clip, epsilon)


def find_normalizers(env: gym.Env) -> list[NormalizeObservation]:
    """The ``NormalizeObservation`` layers in ``env``'s wrapper chain, outermost first."""
    out = []
    cur: Any = env
    while cur is not None:
        if isinstance(cur, NormalizeObservation):
            out.append(cur)
        cur = getattr(cur, "env", None)
    return out
