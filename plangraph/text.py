"""Text helpers every layer shares: did-you-mean suggestions, ``KEY=VALUE`` arguments, and
printable, bounded renderings of user-written text and values for messages."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "brief",
    "close_matches",
    "count",
    "escape_surrogates",
    "has_surrogates",
    "parse_key_value",
    "printable",
]

# What a terminal must never be handed raw: lone surrogates (not encodable in UTF-8),
# control characters other than newline (NUL, ESC sequences, backspace), C1 controls and
# bidi overrides (text that displays differently from what it is).
_UNPRINTABLE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPES = {"\t": "\\t", "\r": "\\r"}

BRIEF_CHARS = 200
"""Longest rendering of a value :func:`brief` gives (longer ones are cut in the middle)."""


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _ESCAPES:
        return _ESCAPES[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str, *, newlines: bool = True) -> str:
    r"""``text`` with lone surrogates and control characters written as backslash escapes
    (``"\ud800"``, ``"\x00"``, ``"\t"``), so that it encodes in any terminal encoding
    (UTF-8; ASCII with ``backslashreplace``) and shows what was written rather than dropping
    it. ``newlines=False`` escapes newlines too (``"\n"``: for one-line fields such as ids).
    Text without such characters is returned unchanged."""
    out = _UNPRINTABLE.sub(_escape, text)
    return out if newlines else out.replace("\n", "\\n")


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (a str that is not Unicode text)."""
    return _SURROGATE.search(text) is not None


def escape_surrogates(text: str) -> str:
    r"""``text`` with each lone surrogate written as ``\udXXX`` (and nothing else changed):
    the smallest change that makes a str encodable as UTF-8."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def brief(value: Any, limit: int = BRIEF_CHARS) -> str:
    """``repr(value)`` for messages, bounded: a huge integer is described by its digit
    count (``<integer of about 5001 digits>``; ``repr`` would raise past 4300 digits) and a
    rendering longer than ``limit`` characters is cut in the middle."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        digits = int(value.bit_length() * 0.30103) + 1
        sign = "-" if value < 0 else ""
        return f"<{sign}integer of about {digits} digits>"
    if isinstance(value, str) and len(value) > limit:
        value = value[: limit // 2] + value[-(limit // 2) :]  # cut before repr: bounded work
        text = repr(value)
        half = len(text) // 2
        return f"{text[:half]}...{text[half:]}"
    if isinstance(value, list | tuple | dict) and _too_big(value, limit):
        return f"<{type(value).__name__} too large to show>"
    text = repr(value)
    if len(text) > limit:
        return text[: limit // 2] + "..." + text[-(limit // 2) :]
    return text


def _too_big(value: Any, limit: int) -> bool:
    """Whether ``repr(value)`` could be long or deep (checked without recursing)."""
    stack, seen = [value], 0
    while stack:
        v = stack.pop()
        seen += 1
        if seen > limit:
            return True
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, str) and len(v) > limit:
            return True
        elif isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 256:
            return True
    return False


def count(n: int, word: str) -> str:
    """``"1 node"``, ``"3 nodes"``: ``n`` and ``word``, plural unless ``n`` is 1."""
    return f"{n} {word}{'s' if n != 1 else ''}"


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> tuple[str, ...]:
    """Did-you-mean candidates for ``word`` (case-insensitive, best first, at most ``n``)."""
    lower = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(word.lower(), list(lower), n=n, cutoff=0.6)
    return tuple(lower[h] for h in hits)


_PYTHON_LITERALS: dict[str, Any] = {"None": None, "True": True, "False": False}


def parse_key_value(item: str) -> tuple[str, Any] | None:
    """``"a=1"`` -> ``("a", 1)``, ``"b=x"`` -> ``("b", "x")``: the value as JSON when it
    parses, else the text as given; Python's ``None``, ``True`` and ``False`` as JSON's
    ``null``, ``true`` and ``false`` (what an RLlib user types); the key stripped of
    spaces. ``None`` when ``item`` has no ``=`` or an empty key (the caller says which
    option was malformed).

    Raises:
        ValueError: the value is JSON no plan can hold: nested deeper than Python's
            parser recurses, or an integer of more than 4,300 digits (the message names
            the key; the compiler bounds the rest, PG105).
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        return None
    if raw.strip() in _PYTHON_LITERALS:
        return key, _PYTHON_LITERALS[raw.strip()]
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw
    except RecursionError:
        raise ValueError(
            f"{brief(key)}=<{len(raw)} characters>: nested too deeply for a plan value "
            "(plans nest at most 64 levels deep): flatten it"
        ) from None
    except ValueError as exc:  # int(): more digits than Python converts
        raise ValueError(
            f"{brief(key)}=<{len(raw)} characters>: not a value a plan can hold ({exc}); "
            "integers must fit in 64 bits"
        ) from None


def same_value(a: Any, b: Any) -> bool:
    """Two JSON values that mean the same setting: ``1000`` and ``1e3`` do, ``1`` and
    ``true`` do not (Python's ``==`` says they do), and NaN is itself (``==`` says it is
    not); lists and objects element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # both NaN
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return bool(a == b) and isinstance(a, str) == isinstance(b, str)
