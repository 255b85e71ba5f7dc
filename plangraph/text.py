"""Text helpers every layer shares: did-you-mean suggestions and ``KEY=VALUE`` arguments."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["close_matches", "parse_key_value"]


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> tuple[str, ...]:
    """Did-you-mean candidates for ``word`` (case-insensitive, best first, at most ``n``)."""
    lower = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6)
    return tuple(lower[h] for h in hits)


def parse_key_value(item: str) -> tuple[str, Any] | None:
    """``"a=1"`` -> ``("a", 1)``, ``"b=x"`` -> ``("b", "x")``: the value as JSON when it
    parses, else the text as given; the key stripped of spaces. ``None`` when ``item`` has
    no ``=`` or an empty key (the caller says which option was malformed)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        return None
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw
