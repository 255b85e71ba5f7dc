"""The layout of an action space's columns, without torch (``plangraph.rl.row_layout``, which
``plangraph explain`` reads, uses it; ``plangraph.rl.distributions`` re-exports it)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["action_layout"]


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
