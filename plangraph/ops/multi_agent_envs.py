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

__all__ = [
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


def _cartpole_agents(env_config: Mapping[str, Any]) -> list[str]:
    n = env_config.get("num_agents", 2)
    return [f"agent_{i}" for i in range(n)] if isinstance(n, int) else []


def _kaz_agents(env_config: Mapping[str, Any]) -> list[str]:
    archers, knights = env_config.get("num_archers", 2), env_config.get("num_knights", 2)
    if not isinstance(archers, int) or not isinstance(knights, int):
        return []
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
