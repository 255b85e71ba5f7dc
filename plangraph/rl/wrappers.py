"""Builders of the registered env wrappers (``plangraph.ops.wrappers``) and the picklable
creator that applies a worker set's ``wrappers`` to each sub-env.

Imports gymnasium (not torch): the compiler uses :func:`wrapped_env` when it reads the
wrapped env's spaces.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

__all__ = [
    "WrappedEnvCreator",
    "clip_reward",
    "flatten_observation",
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


def _builder(path: str) -> Any:
    module, _, func = path.partition(":")
    return getattr(importlib.import_module(module), func)


def wrapped_env(env: gym.Env, wrappers: Sequence[Any]) -> gym.Env:
    """``env`` inside each ``WrapperSpec`` of ``wrappers``, the first innermost."""
    for spec in wrappers:
        env = _builder(spec.builder())(env, **spec.validated_params())
    return env


class WrappedEnvCreator:
    """``gymnasium.make(env_id)`` inside the worker set's wrappers; picklable (rollout
    workers are Ray actors), so it travels instead of a closure."""

    def __init__(self, env_id: str, wrappers: Sequence[Any]) -> None:
        self.env_id = env_id
        self.wrappers = tuple(wrappers)

    def __call__(self) -> gym.Env:
        return wrapped_env(gym.make(self.env_id), self.wrappers)

    def __repr__(self) -> str:
        names = ", ".join(w.name for w in self.wrappers)
        return f"{self.env_id} [{names}]"
