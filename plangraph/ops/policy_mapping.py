"""Declarative policy mapping of a multi-agent plan: agent id or glob pattern -> policy id.

A JSON plan maps agents to policies with data only, ``{"agent_0": "ppo_policy",
"agent_*": "dqn_policy"}`` (no code); a Python plan may pass a function instead
(``plangraph.rl.multi_agent_worker``). Patterns are ``fnmatch`` globs (``*``, ``?``,
``[...]``), matched case-sensitively against the whole agent id.

Which entry maps an agent (independent of the mapping's key order, which JSON does not
keep meaningful): an exact id wins; otherwise the matching pattern with the most literal
(non-wildcard) characters, ties broken by the pattern's text (sorted). Pure Python: the
compiler checks mappings without importing ray or torch.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

__all__ = ["is_pattern", "map_agent", "unmapped_agents"]

_WILDCARDS = frozenset("*?[")


def is_pattern(key: str) -> bool:
    """Whether ``key`` holds a glob wildcard (``*``, ``?`` or ``[``)."""
    return any(c in _WILDCARDS for c in key)


def _specificity(pattern: str) -> int:
    return sum(1 for c in pattern if c not in _WILDCARDS and c != "]")


def map_agent(agent_id: str, mapping: Mapping[str, str]) -> str | None:
    """The policy id ``mapping`` gives ``agent_id`` (module doc), or None when no entry
    matches."""
    if agent_id in mapping:
        return mapping[agent_id]
    matches = [p for p in mapping if is_pattern(p) and fnmatch.fnmatchcase(agent_id, p)]
    if not matches:
        return None
    best = min(matches, key=lambda p: (-_specificity(p), p))
    return mapping[best]


def unmapped_agents(agent_ids: Iterable[str], mapping: Mapping[str, str]) -> list[str]:
    """The agents of ``agent_ids`` (in order) that no entry of ``mapping`` matches."""
    return [a for a in agent_ids if map_agent(a, mapping) is None]
