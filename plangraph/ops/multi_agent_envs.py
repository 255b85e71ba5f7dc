"""The multi-agent env registry: env name -> creator and (when known) its agent ids.

A plan names its multi-agent env by a registered name, never by an import path (a JSON
plan holds data, not code). An entry holds the creator, ``creator(**env_config) ->
pettingzoo.ParallelEnv``, either as an object (a Python plan or a module passed with
``--import`` registers its own) or, for the built-ins, as ``"module:attribute"`` text of
plangraph's own code, imported only when an env is built (``plangraph.rl.multi_agent_env``);
and optionally ``agents(env_config) -> [agent id, ...]``, the ids of ``possible_agents``
without building the env, so that the compiler checks a ``policy_mapping`` (PG191, PG192)
without importing gymnasium or pettingzoo.

Built-in names: ``MultiAgentCartPole`` (``plangraph.rl.multi_agent_env``;
``{"num_agents": N}``, default 2: agents ``agent_0 .. agent_{N-1}``) and
``knights_archers_zombies_v11`` (PettingZoo's Butterfly env; ``num_archers`` and
``num_knights``, default 2 each: ``archer_i``, ``knight_i``; needs pygame, the
``multiagent`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from plangraph.ops.sizes import MAX_AGENTS

__all__ = [
    "AgentCountError",
    "MultiAgentEnvEntry",
    "get_multi_agent_env",
    "multi_agent_env_names",
    "register_multi_agent_env",
]

AgentIds = Callable[[Mapping[str, Any]], list[str]]


@dataclass(frozen=True)
class MultiAgentEnvEntry:
    """One registered multi-agent env: ``creator`` (callable, or ``"module:attr"`` text of
    plangraph's own code) and ``agents`` (env_config -> agent ids; None: unknown until the
    env is built)."""

    name: str
    creator: Callable[..., Any] | str
    agents: AgentIds | None = field(default=None, compare=False)


_REGISTRY: dict[str, MultiAgentEnvEntry] = {}


def register_multi_agent_env(
    name: str, creator: Callable[..., Any] | str, *, agents: AgentIds | None = None
) -> None:
    """Register ``creator(**env_config) -> ParallelEnv`` under ``name`` (replacing any
    earlier entry of that name); ``agents(env_config)`` lists its agent ids, if known.

    Raises:
        ValueError: ``name`` is empty.
        TypeError: ``creator`` is neither callable nor ``"module:attr"`` text.
    """
    if not name:
        raise ValueError("a multi-agent env name must not be empty")
    if not callable(creator) and not (isinstance(creator, str) and ":" in creator):
        raise TypeError(f"creator of multi-agent env {name!r} must be callable, got {creator!r}")
    _REGISTRY[name] = MultiAgentEnvEntry(name, creator, agents)


def multi_agent_env_names() -> list[str]:
    """Registered multi-agent env names, sorted."""
    return sorted(_REGISTRY)


def get_multi_agent_env(name: str) -> MultiAgentEnvEntry | None:
    """The entry registered as ``name``, or None."""
    return _REGISTRY.get(name)


def _count(env_config: Mapping[str, Any], key: str, default: int, low: int) -> int:
    """``env_config[key]``, an agent count in ``[low, MAX_AGENTS]``.

    Raises:
        AgentCountError: it is not (the compiler reports it, PG141, at that key).
    """
    n = env_config.get(key, default)
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= MAX_AGENTS:
        raise AgentCountError(
            key, f"{key}={n!r}: must be an integer in [{low}, {MAX_AGENTS}] (agents of the env)"
        )
    return n


class AgentCountError(ValueError):
    """An ``env_config`` value that sets how many agents an env has is out of bounds;
    ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def _cartpole_agents(env_config: Mapping[str, Any]) -> list[str]:
    return [f"agent_{i}" for i in range(_count(env_config, "num_agents", 2, 1))]


def _kaz_agents(env_config: Mapping[str, Any]) -> list[str]:
    archers = _count(env_config, "num_archers", 2, 0)
    knights = _count(env_config, "num_knights", 2, 0)
    return [f"archer_{i}" for i in range(archers)] + [f"knight_{i}" for i in range(knights)]


register_multi_agent_env(
    "MultiAgentCartPole",
    "plangraph.rl.multi_agent_env:MultiAgentCartPole",
    agents=_cartpole_agents,
)
register_multi_agent_env(
    "knights_archers_zombies_v11",
    "plangraph.rl.multi_agent_env:knights_archers_zombies",
    agents=_kaz_agents,
)
