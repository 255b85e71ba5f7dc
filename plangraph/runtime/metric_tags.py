"""One set of metric names for every logger (TensorBoard, MLflow, W&B), grouped the way
Stable-Baselines3 and RLlib users read them: ``rollout/…``, ``learner/…``, ``time/…``,
``eval/…``, ``counters/…``.

A ``Result`` (``plangraph.runtime.result``) nests some keys (``learner``, ``timers``,
``counters``, ``evaluation``); ``result.jsonl`` and ``progress.csv`` keep its own key
names, the loggers get these tags instead. Each number appears under one tag only: a
counter that is also a top-level key (``num_env_steps_sampled``) is logged once, under
``counters/``.

Import-light (no ray, no torch, no logger libraries).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["GROUP_OF_KEY", "NESTED_GROUP", "metric_tags"]

GROUP_OF_KEY: dict[str, str] = {
    "episode_return_mean": "rollout",
    "episode_return_min": "rollout",
    "episode_return_max": "rollout",
    "episode_len_mean": "rollout",
    "episodes_this_iter": "rollout",
    "episodes_total": "rollout",
    "num_env_steps_sampled_this_iter": "rollout",
    "env_steps_per_s": "time",
    "env_steps_per_s_total": "time",
    "iteration": "time",
    "time_this_iter_s": "time",
    "time_total_s": "time",
    "num_env_steps_sampled": "counters",
    "num_env_steps_trained": "counters",
    "num_target_updates": "counters",
    "num_worker_restarts": "counters",
    "num_agent_steps_sampled": "counters",
    "num_agent_steps_trained": "counters",
}
"""The group of each top-level scalar result key; the tag is ``<group>/<key>``."""

NESTED_GROUP: dict[str, str] = {
    "learner": "learner",
    "evaluation": "eval",
    "counters": "counters",
    "timers": "time/node",
    "policies": "policies",
}
"""The tag prefix of each nested result key: ``learner/total_loss``,
``eval/episode_return_mean``, ``counters/num_updates/train``, ``time/node/rollouts``
(seconds per item of that plan node), ``policies/dqn_policy/episode_return_mean`` (a
multi-agent plan's per-policy results)."""

_SKIPPED = frozenset({"timestamp"})  # wall-clock time of day, not a metric


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _leaves(value: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, float]]:
    for key in sorted(value, key=str):
        inner = value[key]
        if isinstance(inner, Mapping):
            yield from _leaves(inner, f"{prefix}/{key}")
        elif (number := _number(inner)) is not None:
            yield f"{prefix}/{key}", number


def metric_tags(result: Mapping[str, Any]) -> dict[str, float]:
    """Every finite numeric leaf of ``result`` under its logger tag, e.g.
    ``{"rollout/episode_return_mean": 21.5, "learner/vf_loss": 3.2, ...}``.

    Keys not in ``GROUP_OF_KEY``/``NESTED_GROUP`` (added by a user operator) go under
    ``misc/``; ``timestamp`` and non-numeric values are left out. No two entries carry the
    same number twice: a ``counters`` entry wins over the top-level key of the same name.
    """
    tags: dict[str, float] = {}
    for key in sorted(result, key=str):
        value = result[key]
        if key in _SKIPPED:
            continue
        if isinstance(value, Mapping):
            tags.update(_leaves(value, NESTED_GROUP.get(key, f"misc/{key}")))
        elif (number := _number(value)) is not None:
            tags[f"{GROUP_OF_KEY.get(key, 'misc')}/{key}"] = number
    return dict(sorted(tags.items()))
