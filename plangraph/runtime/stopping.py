"""Stop criteria: ``key=threshold`` pairs over the result dict of each iteration.

A run stops as soon as any criterion is met: ``result[key] >= threshold``. Keys may name a
nested value with ``/`` (``learner/kl``, ``timers/train``: the mean seconds of node
``train``). A key absent from a result (e.g.
``episode_return_mean`` before any episode ended) is simply not met yet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from plangraph.errors import StopCriterionError

# Re-exported: the result keys are declared once, by the Result schema.
from plangraph.runtime.result import NESTED_RESULT_KEYS, POLICY_RESULT_KEYS, RESULT_KEYS
from plangraph.text import close_matches, parse_key_value, same_value

__all__ = [
    "RESULT_KEYS",
    "StopCriteria",
    "StopCriterionError",
    "check_policy_keys",
    "check_result_key",
    "lookup",
    "parse_key_values",
]


_NESTED_EXAMPLES = {
    "learner": "kl",
    "counters": "num_env_steps_trained",
    "timers": "train",
    "evaluation": "episode_return_mean",
}


def check_result_key(key: str, *, what: str) -> None:
    """Raise ``StopCriterionError`` (with a did-you-mean) unless ``key`` names a result key."""
    head, _, sub = key.partition("/")
    if key in NESTED_RESULT_KEYS:
        # A dict is never >= a threshold: the criterion could never be met.
        raise StopCriterionError(
            f"{what} {key}: {key} is a dict of values; name one of them, e.g. "
            f"{what} {key}/{_NESTED_EXAMPLES.get(key, 'NAME')}=VALUE"
        )
    if head == "policies" and sub:
        _check_policy_key(key, what)
        return
    if (key in RESULT_KEYS and "/" not in key) or (sub and head in NESTED_RESULT_KEYS):
        return
    close = close_matches(key, sorted(RESULT_KEYS))
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise StopCriterionError(
        f"{what} {key}: not a result key{hint} (result keys: {', '.join(sorted(RESULT_KEYS))}; "
        f"nested: {'/..., '.join(NESTED_RESULT_KEYS)}/...)"
    )


def _check_policy_key(key: str, what: str) -> None:
    """``policies/<id>/<key>``: ``<key>`` one of ``POLICY_RESULT_KEYS`` (``learner`` with a
    stat after it); the id is checked against the plan by ``check_policy_keys``."""
    parts = key.split("/")
    metric = parts[2] if len(parts) > 2 else ""
    known = sorted(POLICY_RESULT_KEYS)
    if metric == "learner" and len(parts) > 3 and parts[3]:
        return
    if metric in POLICY_RESULT_KEYS and metric != "learner" and len(parts) == 3:
        return
    if metric == "learner":
        problem = "learner is a dict of stats; name one, e.g. policies/<id>/learner/total_loss"
    else:
        close = close_matches(metric, known) if metric else []
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        problem = f"not a per-policy result key{hint} (per-policy keys: {', '.join(known)})"
    raise StopCriterionError(
        f"{what} {key}: {problem}; give policies/<policy id>/<key>, e.g. {what} "
        "policies/ppo_policy/episode_return_mean=450"
    )


def check_policy_keys(keys: Iterable[str], policy_ids: Iterable[str], *, what: str) -> None:
    """Raise ``StopCriterionError`` for a ``policies/<id>/...`` key whose ``<id>`` is not one
    of the plan's ``policy_ids`` (with a did-you-mean; a single-agent plan has none): such
    a criterion would never be met, so the run would only stop by another one."""
    ids = sorted(set(policy_ids))
    for key in keys:
        parts = key.split("/")
        if parts[0] != "policies" or len(parts) < 2 or parts[1] in ids:
            continue
        if not ids:
            raise StopCriterionError(
                f"{what} {key}: the plan has no policies table (a single-agent plan reports "
                f"no policies/...); use {what} {'/'.join(parts[2:]) or 'episode_return_mean'}"
                "=VALUE"
            )
        close = close_matches(parts[1], ids)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise StopCriterionError(
            f"{what} {key}: the plan declares no policy {parts[1]!r}; {hint}(its policies: "
            f"{', '.join(ids)})"
        )


def parse_key_values(items: Iterable[str], *, what: str) -> dict[str, Any]:
    """Parse ``["a=1", "b=x"]`` into ``{"a": 1, "b": "x"}``; values are JSON when they parse.

    Raises:
        StopCriterionError: an item without ``=`` or with an empty key, a value no plan
            can hold (``parse_key_value``), or a key given two different values; the
            message names the item and ``what`` (e.g. ``--stop``).
    """
    out: dict[str, Any] = {}
    for item in items:
        try:
            pair = parse_key_value(item)
        except ValueError as exc:
            raise StopCriterionError(f"{what} {exc}") from None
        if pair is None:
            raise StopCriterionError(
                f"{what} {item!r}: expected KEY=VALUE, e.g. {what} episode_return_mean=475"
            )
        key, value = pair
        if key in out and not same_value(out[key], value):
            raise StopCriterionError(
                f"{what} {key} is given twice, as {out[key]!r} and then {value!r}: pass it once"
            )
        out[key] = value
    return out


def lookup(result: Mapping[str, Any], key: str) -> Any:
    """``result["a"]["b"]`` for ``key == "a/b"``; ``None`` when any part is missing."""
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class StopCriteria:
    """``{key: threshold}``; met when any ``result[key] >= threshold``."""

    thresholds: Mapping[str, float]

    @classmethod
    def parse(cls, items: Iterable[str] | Mapping[str, Any]) -> StopCriteria:
        """Criteria from ``["key=value", ...]`` or ``{key: value}``.

        Raises:
            StopCriterionError: an item is not ``KEY=VALUE``, a key is not a result key,
                or a threshold is not a finite number (NaN and Infinity would never stop).
        """
        raw = dict(items) if isinstance(items, Mapping) else parse_key_values(items, what="--stop")
        thresholds: dict[str, float] = {}
        for key, value in sorted(raw.items()):
            check_result_key(key, what="--stop")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise StopCriterionError(
                    f"--stop {key}={value!r}: the threshold must be a number, e.g. --stop {key}=475"
                )
            if not math.isfinite(value):
                # NaN is never reached and Infinity never met: either would train forever.
                raise StopCriterionError(
                    f"--stop {key}={value!r}: the threshold must be a finite number, "
                    f"e.g. --stop {key}=475"
                )
            thresholds[key] = float(value)
        return cls(thresholds)

    def met(self, result: Mapping[str, Any]) -> str | None:
        """The first criterion met, as ``"key >= threshold"``, or ``None``."""
        for key, threshold in self.thresholds.items():
            value = lookup(result, key)
            if isinstance(value, (int, float)) and not math.isnan(value) and value >= threshold:
                return f"{key} = {value:g} >= {threshold:g}"
        return None

    def progress(self, result: Mapping[str, Any]) -> float:
        """Fraction in [0, 1] of the way to the nearest criterion (for the progress bar)."""
        best = 0.0
        for key, threshold in self.thresholds.items():
            value = lookup(result, key)
            if isinstance(value, (int, float)) and threshold > 0 and not math.isnan(value):
                best = max(best, min(1.0, max(0.0, value / threshold)))
        return best
