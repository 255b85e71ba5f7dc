"""What one stored row of a rollout batch holds, known before any actor starts.

``sample_row_layout`` gives the column shapes and dtypes ``RolloutWorker.sample()``
returns for an env's spaces and a policy config, and ``env_spaces`` makes one env to read
those spaces: together they size a replay buffer before launch
(``plangraph.rl.replay_buffer.replay_nbytes``, ``plangraph/runtime/memory_check.py``).
Imports gymnasium and numpy only (no torch, no ray), so ``plangraph explain`` and
``plangraph validate --memory`` can use it.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from plangraph.ops.algorithms import as_policy_config
from plangraph.rl.action_layout import action_layout
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.wrappers import make_env

__all__ = ["action_row", "env_spaces", "sample_row_layout"]

_SB = SampleBatch


def env_spaces(env: Any) -> tuple[gym.Space[Any], gym.Space[Any]]:
    """``(observation_space, action_space)`` of one env made from ``env`` (a gymnasium id,
    ``"module:EnvId"``, or a zero-argument creator), closed again.

    Raises:
        gymnasium.error.Error: an unknown env id (ImportError for a missing module).
    """
    made = env() if callable(env) else make_env(env)
    try:
        return made.observation_space, made.action_space
    finally:
        made.close()


def action_row(action_space: gym.Space[Any]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Row shape and dtype of the ``actions`` column: int64 ``()`` for ``Discrete``, the
    space's own shape otherwise (float32 for ``Box``, int64 for ``MultiDiscrete``)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(action_space, gym.spaces.Box):
        return tuple(action_space.shape), np.dtype(np.float32)
    if action_space.shape is None:
        raise ValueError(f"action space {action_space} has no shape for an actions column")
    return tuple(action_space.shape), np.dtype(np.int64)


def sample_row_layout(
    observation_space: gym.spaces.Box, action_space: gym.Space[Any], policy_config: Any
) -> dict[str, tuple[tuple[int, ...], np.dtype[Any]]]:
    """Per-row shape and dtype of every column ``RolloutWorker.sample()`` returns for these
    spaces and this policy config, without stepping an env (memory estimates before launch).

    Returns:
        ``column -> (row shape, dtype)``; e.g. ``obs -> ((4,), float32)`` for CartPole; a
        recurrent model's ``state_in_*``, ``prev_actions`` and ``prev_rewards`` where its
        settings give the state's layout (``ModelSettings.state_layout``).

    Raises:
        pydantic.ValidationError: ``policy_config`` is not a valid policy config.
    """
    config = as_policy_config(policy_config)
    obs = (tuple(observation_space.shape), np.dtype(observation_space.dtype))
    i64, f32, flag = np.dtype(np.int64), np.dtype(np.float32), np.dtype(bool)
    layout = {
        _SB.OBS: obs,
        _SB.ACTIONS: action_row(action_space),
        _SB.REWARDS: ((), f32),
        _SB.TERMINATEDS: ((), flag),
        _SB.TRUNCATEDS: ((), flag),
        _SB.EPS_ID: ((), i64),
        _SB.T: ((), i64),
    }
    # The algorithm's own columns (its config's sample_columns hook).
    extra = config.sample_columns((obs[0], obs[1].name), action_layout(action_space)[2])
    for col, (shape, dtype) in extra.items():
        layout[col] = (tuple(shape), np.dtype(dtype))
    # A recurrent model's inputs besides the observation, stored with every row
    # (plangraph.rl.sequences), where its settings give the state's layout.
    model = config.resolved_model(obs[0])
    state = model.state_layout() if model.recurrent else None
    if state is not None:
        for name, shape in state.items():
            layout[f"state_in_{name}"] = (tuple(shape), f32)
        layout["prev_actions"] = action_row(action_space)
        layout["prev_rewards"] = ((), f32)
    return layout
