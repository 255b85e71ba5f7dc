"""The layout of an action space's columns, without torch (``plangraph.rl.row_layout``, which
``plangraph explain`` reads, uses it; ``plangraph.rl.distributions`` re-exports it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["action_layout", "bounded_box"]


def action_layout(action_space: gym.Space[Any]) -> tuple[tuple[int, ...], np.dtype[Any], int]:
    """``(action row shape, action dtype, num_inputs)`` of the distribution of
    ``action_space`` (``num_inputs``: width of ``action_dist_inputs``): ``Discrete(n)`` is
    ``((), int64, n)``, a 1-D ``MultiDiscrete(nvec)`` ``((len(nvec),), int64, sum(nvec))``
    and a 1-D ``Box`` of ``d`` dims ``((d,), float32, 2 d)`` (mean and log-std).

    Raises:
        ValueError: a space other than ``Discrete``, ``MultiDiscrete`` or a 1-D ``Box``.
    """
    if isinstance(action_space, gym.spaces.Discrete):
        return (), np.dtype(np.int64), int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        nvec = action_space.nvec
        return (len(nvec),), np.dtype(np.int64), int(sum(int(n) for n in nvec))
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        dim = int(action_space.shape[0])
        return (dim,), np.dtype(np.float32), 2 * dim
    raise ValueError(
        f"no action distribution for {action_space}: actor-critic policies act in Discrete, "
        "1-D MultiDiscrete and 1-D Box action spaces"
    )


def bounded_box(action_space: gym.Space[Any], who: str) -> gym.spaces.Box:
    """``action_space`` as a 1-D ``Box`` with finite bounds, the actions a squashed
    (tanh) actor rescales to (SAC, DDPG, TD3); ``who`` names the policy in the message.

    Raises:
        ValueError: any other space, or a ``Box`` of other rank or with an infinite bound.
    """
    if not isinstance(action_space, gym.spaces.Box):
        raise ValueError(f"{who} acts in Box action spaces only, got {action_space}")
    if not (
        len(action_space.shape) == 1
        and np.all(np.isfinite(action_space.low))
        and np.all(np.isfinite(action_space.high))
    ):
        raise ValueError(
            f"{who} needs a 1-D Box action space with finite bounds, got {action_space}"
        )
    return action_space
