"""Multi-agent envs: PettingZoo ``ParallelEnv``s by registered name.

A plan names its multi-agent env by a registered name (``"MultiAgentCartPole"``), never by
an import path: a JSON plan holds data, not code. The registry
(``plangraph.ops.multi_agent_envs.register_multi_agent_env``, re-exported here) maps a
name to a creator ``creator(**env_config) -> ParallelEnv`` (a Python plan or a module
passed with ``--import`` may register its own); :func:`make_multi_agent_env` builds one.

Built-in names:

* ``MultiAgentCartPole``: :class:`MultiAgentCartPole`, ``num_agents`` independent
  CartPole-v1 copies (``env_config={"num_agents": N}``, default 2).
* ``knights_archers_zombies_v11``: PettingZoo's own Butterfly env (Terry et al. 2021,
  PettingZoo); needs only ``pygame`` (a wheel, no system packages). Its agents die at
  different times, so it exercises agents leaving an episode early.

The PettingZoo parallel API (``pettingzoo.ParallelEnv``, 1.24+): ``reset(seed, options)``
returns ``(obs, infos)`` keyed by agent id for ``env.agents``; ``step(actions)`` takes an
action for every agent in ``env.agents`` and returns ``(obs, rewards, terminations,
truncations, infos)`` for those agents; an agent whose termination or truncation is True
leaves ``env.agents`` (its ``obs`` entry is its final observation); the episode is over
once ``env.agents`` is empty.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from plangraph.ops.multi_agent_envs import (
    get_multi_agent_env,
    multi_agent_env_names,
    register_multi_agent_env,
)
from plangraph.text import close_matches

__all__ = [
    "MultiAgentCartPole",
    "knights_archers_zombies",
    "make_multi_agent_env",
    "multi_agent_env_names",
    "register_multi_agent_env",
    "resolve_multi_agent_env",
]

EnvCreator = Callable[..., ParallelEnv]


def resolve_multi_agent_env(name: str) -> EnvCreator:
    """The creator registered as ``name`` (``plangraph.ops.multi_agent_envs``), its
    ``"module:attr"`` text imported; resolved in the driver, it travels to the workers.

    Raises:
        KeyError: ``name`` is not registered (the message lists close names).
    """
    entry = get_multi_agent_env(name)
    if entry is None:
        names = multi_agent_env_names()
        close = close_matches(name, names)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise KeyError(
            f"unknown multi-agent env {name!r}{hint}; registered: {', '.join(names)} "
            "(register one with plangraph.ops.multi_agent_envs.register_multi_agent_env)"
        )
    if isinstance(entry.creator, str):
        module, _, attr = entry.creator.partition(":")
        return getattr(importlib.import_module(module), attr)
    return entry.creator


def make_multi_agent_env(
    env: str | EnvCreator, env_config: Mapping[str, Any] | None = None
) -> ParallelEnv:
    """A new ``ParallelEnv``: of the registered name ``env``, or from the creator ``env``,
    with ``env_config`` as keyword arguments.

    Raises:
        KeyError: ``env`` is a name that is not registered (close names listed).
    """
    creator = resolve_multi_agent_env(env) if isinstance(env, str) else env
    return creator(**dict(env_config or {}))


class MultiAgentCartPole(ParallelEnv):
    """``num_agents`` independent CartPole-v1 copies as agents ``agent_0 .. agent_{N-1}``.

    Each agent acts in its own CartPole (``gym.make("CartPole-v1")``: reward 1 per step,
    terminated when the pole falls, truncated at 500 steps) and has its own termination
    and truncation; an agent that is done leaves ``agents`` while the others go on, and
    the episode ends when every agent is done (PettingZoo parallel API, module doc).

    Spaces per agent: observation ``Box(float32, (4,))``, action ``Discrete(2)``.
    Seeding: ``reset(seed=s)`` seeds agent ``i``'s copy with ``s + i``; ``reset()`` without
    a seed continues each copy's own RNG stream.

    Raises:
        ValueError: ``num_agents < 1``.
    """

    metadata = {"name": "MultiAgentCartPole", "render_modes": []}

    def __init__(self, num_agents: int = 2) -> None:
        if int(num_agents) < 1:
            raise ValueError(f"MultiAgentCartPole needs num_agents >= 1, got {num_agents}")
        self.possible_agents = [f"agent_{i}" for i in range(int(num_agents))]
        self.agents: list[str] = []
        self._envs = {a: gym.make("CartPole-v1") for a in self.possible_agents}
        self.observation_spaces = {a: e.observation_space for a, e in self._envs.items()}
        self.action_spaces = {a: e.action_space for a, e in self._envs.items()}

    def observation_space(self, agent: str) -> gym.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.Space[Any]:
        return self.action_spaces[agent]

    @property
    def sub_envs(self) -> dict[str, gym.Env]:
        """Agent id -> its CartPole copy (for checkpoints: ``env_state.capture_env``)."""
        return self._envs

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        self.agents = list(self.possible_agents)
        obs: dict[str, np.ndarray] = {}
        for i, agent in enumerate(self.agents):
            obs[agent], _ = self._envs[agent].reset(seed=None if seed is None else seed + i)
        return obs, {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        obs, rewards, terms, truncs, infos = {}, {}, {}, {}, {}
        for agent in self.agents:
            o, r, term, trunc, info = self._envs[agent].step(actions[agent])
            obs[agent], rewards[agent] = o, float(r)
            terms[agent], truncs[agent], infos[agent] = bool(term), bool(trunc), info
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        for env in self._envs.values():
            env.close()


def knights_archers_zombies(**env_config: Any) -> ParallelEnv:
    """PettingZoo's ``knights_archers_zombies_v11.parallel_env(**env_config)``."""
    from pettingzoo.butterfly import knights_archers_zombies_v11

    return knights_archers_zombies_v11.parallel_env(**env_config)
