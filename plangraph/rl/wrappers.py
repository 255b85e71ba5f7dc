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

from plangraph.ops.env_extras import EnvDependencyError, missing_dependency, register_env_namespace
from plangraph.ops.wrappers import wrapped_env
from plangraph.rl.envs import env_label

__all__ = [
    "NormalizeObservation",
    "WrappedEnvCreator",
    "atari_preprocessing",
    "clip_reward",
    "find_normalizers",
    "flatten_observation",
    "make_env",
    "merge_moments",
    "normalize_observation",
    "scale_reward",
    "time_limit",
    "with_wrappers",
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


_MAKE_WRAPPERS = (
    gym.wrappers.OrderEnforcing,
    gym.wrappers.PassiveEnvChecker,
    gym.wrappers.TimeLimit,
)
"""What ``gymnasium.make`` itself wraps an env in."""


def _without_frame_skipping(env: gym.Env) -> gym.Env:
    """``env`` made again with ``frameskip=1``: ``ALE/...-v5`` envs repeat each action 4
    frames themselves, and AtariPreprocessing must see every frame to skip and max-pool."""
    cur: Any = env
    while isinstance(cur, gym.Wrapper):
        if not isinstance(cur, _MAKE_WRAPPERS):
            raise ValueError(
                f"atari_preprocessing must be the first (innermost) of a worker set's "
                f"wrappers, but the env is already wrapped in {type(cur).__name__}: it makes "
                "the ALE env again without its own frame skipping"
            )
        cur = cur.env
    spec = env.unwrapped.spec
    if spec is None:
        raise ValueError("atari_preprocessing needs an env made by gymnasium.make (no spec)")
    env.close()
    return gym.make(spec.id, **{**spec.kwargs, "frameskip": 1})


class _StackOnChannels(gym.ObservationWrapper):
    """FrameStackObservation's ``[k, H, W]`` (or ``[k, H, W, C]``) uint8 stack as one
    channels-last image ``[H, W, k]`` (``[H, W, k * C]``), the layout the CNN reads."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        shape = env.observation_space.shape
        if shape is None:
            raise ValueError(
                f"frame stacking needs a shaped observation space, got {env.observation_space}"
            )
        k, h, w = shape[:3]
        c = shape[3] if len(shape) == 4 else 1
        self.observation_space = gym.spaces.Box(0, 255, (h, w, k * c), np.uint8)

    def observation(self, observation: Any) -> np.ndarray:
        x = np.moveaxis(np.asarray(observation), 0, 2)  # [H, W, k(, C)]
        return np.ascontiguousarray(x.reshape(self.observation_space.shape))


def atari_preprocessing(
    env: gym.Env,
    frame_skip: int,
    screen_size: int,
    grayscale: bool,
    frame_stack: int,
    noop_max: int,
    terminal_on_life_loss: bool,
) -> gym.Env:
    """An ALE env as the Nature DQN reads it (Mnih et al. 2015; Machado et al. 2018 for
    the v5 envs' sticky actions, which are kept): up to ``noop_max`` no-ops at reset,
    each action repeated ``frame_skip`` frames with the last two max-pooled, frames
    grey-scaled and resized to ``screen_size`` x ``screen_size`` (gymnasium's
    ``AtariPreprocessing``), the last ``frame_stack`` stacked on the channel axis
    (``FrameStackObservation``). Observations: uint8 ``[screen_size, screen_size,
    frame_stack]`` (``x 3`` channels without grey scale), never scaled: the CNN divides
    by 255 inside the model, so replay and the object store hold bytes.

    Raises:
        ValueError: not the innermost wrapper of an env made by ``gymnasium.make``.
        gymnasium.error.DependencyNotInstalled: OpenCV (the ``atari`` extra) is missing.
    """
    if frame_skip > 1 and getattr(env.unwrapped, "_frameskip", 1) != 1:
        env = _without_frame_skipping(env)
    env = gym.wrappers.AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        terminal_on_life_loss=terminal_on_life_loss,
        grayscale_obs=grayscale,
        scale_obs=False,
    )
    return _StackOnChannels(gym.wrappers.FrameStackObservation(env, frame_stack))


def make_env(env_id: str) -> gym.Env:
    """``gymnasium.make(env_id)``, after importing the module that registers ``env_id``'s
    namespace (``ALE/...``: ``ale_py``; ``plangraph.ops.env_extras``).

    Raises:
        EnvDependencyError: a package the env needs is not installed; the message names
            the plangraph extra to install (``pip install 'plangraph[atari]'``).
    """
    register_env_namespace(env_id)
    try:
        return gym.make(env_id)
    except (ImportError, gym.error.DependencyNotInstalled) as exc:
        missing = missing_dependency(env_id, exc)
        if missing is None:
            raise
        raise EnvDependencyError(missing) from exc


class WrappedEnvCreator:
    """The env of ``base`` (a gymnasium id, made by ``make_env``, or a creator such as
    ``plangraph.rl.envs.resolve_env`` returns) inside the worker set's wrappers; picklable
    (rollout workers are Ray actors), so it travels instead of a closure."""

    def __init__(self, base: str | Callable[[], gym.Env], wrappers: Sequence[Any]) -> None:
        self.base = base
        self.wrappers = tuple(wrappers)

    def __call__(self) -> gym.Env:
        env = make_env(self.base) if isinstance(self.base, str) else self.base()
        return wrapped_env(env, self.wrappers)

    def __repr__(self) -> str:
        names = ", ".join(w.name for w in self.wrappers)
        return f"{env_label(self.base)} [{names}]"


def with_wrappers(base: str | Callable[[], gym.Env], wrappers: Sequence[Any]) -> Any:
    """``base`` (an env id or a creator) inside ``wrappers`` (a ``WrappedEnvCreator``), or
    ``base`` itself when there are none."""
    return WrappedEnvCreator(base, wrappers) if wrappers else base


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
