"""Bounds on what a plan may hold, so that every input is analysed in bounded time and memory.

A plan is a small document: the seed plans nest 7 levels deep and hold a few hundred
values. The bounds below are far beyond any real plan and far below what would make the
compiler recurse past Python's stack, spend seconds on big-integer arithmetic or print
megabytes of message text. Values beyond them are rejected with a located diagnostic
(PG105 "too-large"); strings holding lone surrogates (not Unicode text: they cannot be
written to a UTF-8 file or terminal) are reported and their surrogates replaced by
``\\udXXX`` escapes, so analysis goes on with text that prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plangraph.text import brief, escape_surrogates, has_surrogates

__all__ = [
    "HINTS",
    "MAX_DEPTH",
    "MAX_EXPR_CHARS",
    "MAX_EXPR_DEPTH",
    "MAX_INT",
    "MAX_VALUES",
    "LimitProblem",
    "check_number",
    "screen",
]

MAX_DEPTH = 64
"""Deepest nesting of objects and arrays (the plan object itself is level 1)."""
MAX_VALUES = 100_000
"""Most JSON values (objects, arrays, scalars; keys not counted) in one plan."""
MAX_INT = 2**63 - 1
"""Largest integer magnitude: a signed 64-bit integer (env steps, sizes, seeds)."""
MAX_EXPR_CHARS = 1_000
"""Longest text inside one ``${...}`` config reference."""
MAX_EXPR_DEPTH = 32
"""Deepest nesting of operators, calls and parentheses inside one ``${...}``."""


HINTS: dict[str, str] = {
    "depth": f"plans nest at most {MAX_DEPTH} levels deep: flatten the value",
    "values": f"a plan holds at most {MAX_VALUES} values: split it, or shorten the lists",
    "int": "integers must fit in 64 bits (at most 2**63 - 1 in magnitude): write a smaller "
    "number, or a string if it is not a count",
    "number": "numbers must be finite doubles (at most about 1.8e308 in magnitude)",
    "text": "write the text as valid Unicode (UTF-8)",
    "nonfinite": "write a finite number (JSON has no NaN or Infinity)",
}
"""How to fix a value beyond each bound, by :attr:`LimitProblem.kind`."""


@dataclass(frozen=True)
class LimitProblem:
    """``message`` about the value at JSON ``pointer``; ``kind`` (a key of :data:`HINTS`)
    names the bound (``"nonfinite"``, ``"text"``: no bound, but not JSON either).
    ``fatal``: the plan cannot be analysed; otherwise (kind ``"text"``) a string whose
    lone surrogates were escaped, and analysis goes on."""

    pointer: str
    message: str
    kind: str
    fatal: bool = True


def _token(key: Any) -> str:
    text = key if isinstance(key, str) else brief(key)
    return text.replace("~", "~0").replace("/", "~1")


def check_number(value: Any) -> str | None:
    """Why ``value`` (an int or float) is beyond the bounds, or None if it is not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not -MAX_INT <= value <= MAX_INT:
        shown = brief(value)
        what = shown[1:-1] if shown.startswith("<") else f"integer {shown}"
        return f"{what} is too large (plans hold integers up to 2**63 - 1)"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    return None


def screen(value: Any, pointer: str = "") -> tuple[Any, list[LimitProblem]]:
    """Check ``value`` (a JSON-form plan, or part of one) against the bounds, without
    recursion (it may be arbitrarily deep, or even cyclic).

    Returns ``(value, problems)``: the value itself, or a copy whose strings and keys have
    their lone surrogates escaped when it held any; problems in walk order, at most one
    per bound (the first value found beyond it) plus one per string holding surrogates.
    Pointers are as found (they may hold the surrogates: diagnostics print them escaped).
    A NaN or infinite float (kind ``"nonfinite"``) is fatal too: JSON text cannot hold one,
    so neither can a plan given as a dict.
    """
    problems: list[LimitProblem] = []
    stack: list[tuple[Any, str, int]] = [(value, pointer, 1)]
    count = 0
    dirty = False
    hit: set[str] = set()

    def beyond(kind: str, ptr: str, message: str) -> None:
        if kind not in hit:
            hit.add(kind)
            problems.append(LimitProblem(ptr, message, kind))

    while stack:
        v, ptr, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            beyond("values", pointer, f"the plan holds more than {MAX_VALUES} values")
            break
        if isinstance(v, str):
            if has_surrogates(v):
                dirty = True
                problems.append(
                    LimitProblem(
                        ptr,
                        f"string {brief(v)} holds a lone surrogate, which is not "
                        "Unicode text (it was escaped as \\uXXXX)",
                        "text",
                        fatal=False,
                    )
                )
        elif isinstance(v, int | float):
            why = check_number(v)
            if why is not None:
                beyond("nonfinite" if isinstance(v, float) else "int", ptr, why)
        elif isinstance(v, Mapping | list | tuple):
            if depth > MAX_DEPTH:
                beyond("depth", ptr, f"value nested more than {MAX_DEPTH} levels deep")
                continue
            if isinstance(v, Mapping):
                children = []
                for k, x in v.items():
                    child = f"{ptr}/{_token(k)}"
                    if isinstance(k, str) and has_surrogates(k):
                        dirty = True
                        problems.append(
                            LimitProblem(
                                child,
                                f"key {brief(k)} holds a lone surrogate, which is "
                                "not Unicode text (it was escaped as \\uXXXX)",
                                "text",
                                fatal=False,
                            )
                        )
                    elif isinstance(k, int) and not isinstance(k, bool):
                        if check_number(k) is not None:
                            beyond("int", child, f"key {check_number(k)}")
                    children.append((x, child, depth + 1))
                stack.extend(reversed(children))
            else:
                stack.extend(reversed([(x, f"{ptr}/{i}", depth + 1) for i, x in enumerate(v)]))
    if dirty and not any(p.fatal for p in problems):
        value = _escape_surrogates(value)
    return value, problems


def _escape_surrogates(value: Any) -> Any:
    """A copy of ``value`` (bounded in depth: :func:`screen` found nothing fatal) with the
    lone surrogates of its strings and keys written as ``\\udXXX``."""
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, Mapping):
        return {
            escape_surrogates(k) if isinstance(k, str) else k: _escape_surrogates(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(_escape_surrogates(v) for v in value)
    return value
