"""The small part of the DOT language plangraph writes, with quoting that cannot go wrong.

Why not ``graphviz.Digraph``: its ``edge()`` reads ``"a:b"`` as node ``a``, port ``b``, its
quoting passes ``"<...>"`` through as an HTML string and cannot express an id that ends in
a backslash. Plan ids are user text, so every id here is always double-quoted and escaped
(ids that are DOT keywords such as ``graph`` or ``node`` need the quotes too), and every
label is an HTML-like label whose text is XML-escaped. Statements come out in the order
they are added, so the caller controls determinism.

The ``graphviz`` package still does what it is best at: running ``dot`` (see ``output``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from plangraph.text import escape_surrogates

# XML 1.0 forbids these control characters even when escaped; dot would reject the label.
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
# In a quoted id or attribute: controls that dot mangles or rejects (NUL ends its string),
# and lone surrogates (not encodable as UTF-8, the only encoding plangraph writes).
_QUOTE_UNSAFE = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _code_escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


class Html(str):
    """An HTML-like label body (written as ``<...>``, never quoted)."""

    __slots__ = ()


def quote(text: str) -> str:
    r"""Return ``text`` as a double-quoted DOT string that dot reads back unambiguously.

    In a quoted DOT string only ``\"`` is an escape and a backslash before a newline joins
    lines, so backslashes are doubled, quotes escaped and newlines written as ``\n``; other
    control characters and lone surrogates are written as ``\xNN`` / ``\udXXX`` text. The
    mapping is injective (the original backslashes are all doubled, so no written escape
    can be confused with one): distinct ids stay distinct node names.

    >>> quote('a:b'), quote('graph'), quote('"x"')
    ('"a:b"', '"graph"', '"\\"x\\""')
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("\r", "\\r").replace("\n", "\\n")
    escaped = _QUOTE_UNSAFE.sub(_code_escape, escaped)
    return f'"{escaped}"'


MAX_ID_CHARS = 1000
"""Longer ids are written as their first 100 characters plus a SHA-256 digest of the
whole (dot rejects a quoted string over 16384 characters)."""
MAX_ATTR_CHARS = 2000
"""Longer attribute texts (tooltips) are cut with an ellipsis."""


def dot_id(node_id: str) -> str:
    """The quoted DOT name of ``node_id``: :func:`quote`, with an id over
    ``MAX_ID_CHARS`` characters shortened to a prefix and the SHA-256 of the whole (still
    distinct: two ids could share a name only by a SHA-256 collision, or if an id of
    about 170 characters is written exactly as such a shortening)."""
    if len(node_id) > MAX_ID_CHARS:
        digest = hashlib.sha256(node_id.encode("utf-8", "surrogatepass")).hexdigest()
        node_id = f"{node_id[:100]}\u2026#{digest}"
    return quote(node_id)


LABEL_CHARS = 120
"""Longest name a label shows in full (dot refuses an HTML string past 16384 characters)."""


def clip(text: str, limit: int = LABEL_CHARS) -> str:
    """``text``, or its first and last characters around an ellipsis when longer than
    ``limit``."""
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return f"{text[:half]}\u2026{text[len(text) - (limit - 1 - half) :]}"


def escape_html(text: str) -> str:
    r"""Escape ``text`` for the inside of an HTML-like label (``&<>"``; controls XML forbids
    become U+FFFD, lone surrogates ``\udXXX`` text)."""
    text = _XML_INVALID.sub("\ufffd", escape_surrogates(text))
    if text and not text.strip("]"):
        # dot's HTML lexer rejects a text run of nothing but "]" (e.g. a node id "]")
        return "&#93;" * len(text)
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def format_value(value: str | int | float | bool | Html) -> str:
    """One attribute value: HTML labels as ``<...>``, numbers bare, everything else quoted."""
    if isinstance(value, Html):
        return f"<{value}>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if len(text) > MAX_ATTR_CHARS:
        text = text[: MAX_ATTR_CHARS - 1] + "\u2026"
    return quote(text)


def attr_list(attrs: Mapping[str, str | int | float | bool | Html]) -> str:
    """``[k1=v1, k2=v2]`` in the given order (empty string for no attributes)."""
    if not attrs:
        return ""
    body = ", ".join(f"{key}={format_value(val)}" for key, val in attrs.items())
    return f" [{body}]"


@dataclass
class DotWriter:
    """Builds one ``digraph`` statement by statement, indentation included."""

    name: str
    lines: list[str] = field(default_factory=list)
    _depth: int = 1

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self.lines.append(f"{'  ' * self._depth}// {line}")

    def defaults(self, kind: str, attrs: Mapping[str, str | int | float | bool | Html]) -> None:
        """``graph [...]``, ``node [...]`` or ``edge [...]`` defaults for what follows."""
        assert kind in ("graph", "node", "edge"), kind
        self.lines.append(f"{'  ' * self._depth}{kind}{attr_list(attrs)};")

    def node(self, node_id: str, attrs: Mapping[str, str | int | float | bool | Html]) -> None:
        self.lines.append(f"{'  ' * self._depth}{dot_id(node_id)}{attr_list(attrs)};")

    def edge(
        self, tail: str, head: str, attrs: Mapping[str, str | int | float | bool | Html]
    ) -> None:
        self.lines.append(
            f"{'  ' * self._depth}{dot_id(tail)} -> {dot_id(head)}{attr_list(attrs)};"
        )

    def begin_subgraph(self, name: str) -> None:
        self.lines.append(f"{'  ' * self._depth}subgraph {dot_id(name)} {{")
        self._depth += 1

    def end_subgraph(self) -> None:
        self._depth -= 1
        self.lines.append(f"{'  ' * self._depth}}}")

    def blank(self) -> None:
        self.lines.append("")

    def source(self) -> str:
        assert self._depth == 1, "unclosed subgraph"
        return "\n".join([f"digraph {dot_id(self.name)} {{", *self.lines, "}", ""])
