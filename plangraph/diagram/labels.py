"""HTML-like labels: bold id, operator name, key params with resolved config values.

Everything user-written passes through :func:`plangraph.diagram.dotlang.escape_html`, so ids
and values such as ``"x"``, ``<b>`` or ``a & b`` are shown exactly as written.
"""

from __future__ import annotations

import enum
import json
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from plangraph.diagram.dotlang import Html, escape_html
from plangraph.diagram.style import ERROR_COLOR, MUTED_COLOR, WARNING_COLOR
from plangraph.text import brief, printable

MAX_VALUE_CHARS = 40
"""Longer parameter values are cut with an ellipsis (the tooltip and JSON have them whole)."""
MAX_NAME_CHARS = 60
"""Longer ids, operator names and param names are cut with an ellipsis in labels (dot
rejects an HTML label over 16384 characters; the tooltip has them whole)."""
MESSAGE_WIDTH = 44
"""Diagnostic messages are wrapped at this many characters, at most two lines."""


@dataclass(frozen=True)
class ParamLine:
    """One ``name = value`` line; ``ref`` is the ``${key}`` it was resolved from, if any."""

    name: str
    value: Any
    ref: str | None = None
    flagged: bool = False


@dataclass(frozen=True)
class Mark:
    """A diagnostic shown on a node or edge: stable code, message, error or warning."""

    code: str
    message: str
    severity: str = "error"

    @property
    def color(self) -> str:
        return ERROR_COLOR if self.severity == "error" else WARNING_COLOR


def format_value(value: Any) -> str:
    """A parameter value as a short, JSON-like string (``true``, ``[1, 1]``, ``bulk_sync``)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        text = value
    elif hasattr(value, "model_dump"):
        text = json.dumps(value.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):  # e.g. an int past 4300 digits
            text = brief(value)
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 1] + "\u2026"
    return text


def _cut(text: str, limit: int = MAX_NAME_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _font(text: str, *, color: str | None = None, size: int | None = None) -> str:
    if not text:
        return ""  # dot rejects an empty <FONT></FONT>
    attrs = ""
    if color:
        attrs += f' COLOR="{color}"'
    if size:
        attrs += f' POINT-SIZE="{size}"'
    return f"<FONT{attrs}>{text}</FONT>" if attrs else text


def _mark_lines(marks: Sequence[Mark]) -> list[str]:
    lines = []
    for mark in marks:
        wrapped = textwrap.wrap(mark.message, MESSAGE_WIDTH) or [""]
        if len(wrapped) > 2:
            wrapped = [wrapped[0], wrapped[1][: MESSAGE_WIDTH - 1] + "\u2026"]
        text = f"<B>{escape_html(mark.code)}</B> " + "<BR/>".join(escape_html(w) for w in wrapped)
        lines.append(_font(text, color=mark.color, size=9))
    return lines


def _table(rows: Iterable[str]) -> Html:
    body = "".join(f"<TR><TD>{row}</TD></TR>" for row in rows)
    return Html(f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{body}</TABLE>')


def box_label(
    title: str,
    subtitle: str,
    params: Sequence[ParamLine],
    marks: Sequence[Mark] = (),
    notes: Sequence[str] = (),
    note_color: str | None = None,
) -> Html:
    """Label of an operator or resource node.

    ``title`` (the node id) is bold, ``subtitle`` (op name or resource kind) below it, then
    one line per parameter (a ``${key}`` config reference is shown after the value it
    resolved to), then ``notes`` (plain text, e.g. a run's profile, in ``note_color``),
    then the diagnostics in red with their codes.
    """
    # An id is shown with its control characters as escapes ("a\\tb"): dot rejects an
    # empty <B></B> or one holding only a newline; an empty id is shown as "".
    shown = printable(_cut(title), newlines=False) or '""'
    rows = [
        "<B>" + escape_html(shown) + "</B>",
        _font(escape_html(_cut(subtitle)), color=MUTED_COLOR),
    ]
    if params:
        lines = []
        for p in params:
            text = f"{escape_html(_cut(p.name))} = {escape_html(format_value(p.value))}"
            if p.ref is not None:
                ref = _cut(f"(${{{p.ref}}})", 200)
                text += " " + _font(escape_html(ref), color=MUTED_COLOR)
            if p.flagged:
                text = _font(text, color=ERROR_COLOR)
            lines.append(text)
        rows.append(_font("".join(f'{line}<BR ALIGN="LEFT"/>' for line in lines), size=10))
    for note in notes:
        rows.append(_font(f"<B>{escape_html(note)}</B>", color=note_color, size=10))
    rows.extend(_mark_lines(marks))
    return _table(rows)


def edge_label(lines: Sequence[str], marks: Sequence[Mark] = ()) -> Html:
    """Label of an edge: its port type and notes (already plain text), then diagnostics."""
    rows = [escape_html(line) for line in lines] + _mark_lines(marks)
    return Html("<BR/>".join(rows))


def tooltip(marks: Sequence[Mark], fallback: str) -> str:
    """Full diagnostic text for SVG hover tooltips (labels shorten long messages)."""
    if not marks:
        return fallback
    return "\n".join(f"{m.severity} {m.code}: {m.message}" for m in marks)
