"""Where things were written: source locations and JSON parsing that keeps positions.

A :class:`SourceMap` maps JSON pointers (``/nodes/train/params/min_batch_size``) to the
line:col of the value (JSON files) or the file:line of the builder call that made a node
(Python plans). Locations are metadata: they never take part in ``Plan == Plan`` or in the
JSON form.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from dataclasses import dataclass, field

# The stdlib decoder's string scanner (in json.decoder, not in typeshed's stub of it).
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from plangraph.ir.limits import MAX_DEPTH, MAX_INT, check_number

__all__ = [
    "JSONLimitError",
    "JSONSyntaxError",
    "Location",
    "SourceMap",
    "parse_json_with_positions",
]


@dataclass(frozen=True)
class Location:
    """``file`` (as given, may be None), 1-based ``line`` and optional 1-based ``col``."""

    file: str | None
    line: int
    col: int | None = None

    def __str__(self) -> str:
        parts = [self.file or "<plan>", str(self.line)]
        if self.col is not None:
            parts.append(str(self.col))
        return ":".join(parts)


@dataclass
class SourceMap:
    """Positions of JSON values and keys by pointer, or builder-call locations by node.

    ``values[pointer]`` / ``keys[pointer]``: location of the value at ``pointer`` / of the
    object key naming it. ``duplicates``: ``(pointer, location)`` of keys repeated inside
    one JSON object (the later occurrence).
    """

    file: str | None = None
    values: dict[str, Location] = field(default_factory=dict)
    keys: dict[str, Location] = field(default_factory=dict)
    duplicates: list[tuple[str, Location]] = field(default_factory=list)

    def locate(self, pointer: str, *, key: bool = False) -> Location | None:
        """The location of ``pointer`` or, failing that, of its nearest located parent."""
        p = pointer
        while True:
            table = self.keys if key else self.values
            if p in table:
                return table[p]
            if key and p in self.values:
                return self.values[p]
            if not p:
                return self.values.get("") or (Location(self.file, 1, None) if self.file else None)
            p = p.rsplit("/", 1)[0]


class JSONSyntaxError(ValueError):
    """Invalid JSON text: ``msg`` with 1-based ``line`` and ``col``."""

    def __init__(self, msg: str, line: int, col: int) -> None:
        super().__init__(f"{msg} (line {line}, column {col})")
        self.msg, self.line, self.col = msg, line, col


class JSONLimitError(JSONSyntaxError):
    """Valid JSON beyond plangraph's bounds (:mod:`plangraph.ir.limits`): nested too deep,
    an integer too large, a number that overflows; ``pointer`` says where, ``kind`` which
    bound (a key of :data:`plangraph.ir.limits.HINTS`)."""

    def __init__(self, msg: str, line: int, col: int, pointer: str, kind: str) -> None:
        super().__init__(msg, line, col)
        self.pointer = pointer
        self.kind = kind


_NUMBER_RE = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WS = " \t\n\r"
# Strings (an unterminated one runs to the end) and the characters that shape nesting.
_STRUCTURE_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|$)|[\[\]{},:]', re.DOTALL)
_MAX_INT_DIGITS = len(str(MAX_INT))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _check_depth(text: str) -> None:
    """Raise :class:`JSONLimitError` at the first object or array nested deeper than
    ``MAX_DEPTH`` (before ``json.loads``, which would recurse past the stack on it).

    Scans strings and punctuation only, tolerating invalid JSON (the parser that follows
    reports that); keeps the path so the error names a JSON pointer.
    """
    # one frame per open container: [is_object, current key or index, expecting a key]
    frames: list[list[Any]] = []
    for m in _STRUCTURE_RE.finditer(text):
        tok = m.group()
        if tok in "[{":
            if frames and not frames[-1][0] and frames[-1][1] is None:
                frames[-1][1] = 0
            if len(frames) >= MAX_DEPTH:
                ptr = "".join(f"/{_ptr_token(f[1])}" for f in frames)
                line, col = _line_col(text, m.start())
                raise JSONLimitError(
                    f"value nested more than {MAX_DEPTH} levels deep", line, col, ptr, "depth"
                )
            frames.append([tok == "{", None, tok == "{"])
        elif tok in "]}":
            if frames:
                frames.pop()
        elif tok == ",":
            if frames:
                f = frames[-1]
                if f[0]:
                    f[2] = True
                else:
                    f[1] = (f[1] or 0) + 1
        elif tok == ":":
            if frames:
                frames[-1][2] = False
        elif frames and frames[-1][0] and frames[-1][2]:  # a key
            try:
                frames[-1][1] = json.loads(tok)
            except ValueError:
                frames[-1][1] = tok.strip('"')
        elif frames and not frames[-1][0] and frames[-1][1] is None:
            frames[-1][1] = 0


def _ptr_token(key: Any) -> str:
    return str(key if key is not None else 0).replace("~", "~0").replace("/", "~1")


def parse_json_with_positions(text: str, file: str | None = None) -> tuple[Any, SourceMap]:
    """Parse JSON ``text``; return the value and a :class:`SourceMap` of its positions.

    Raises :class:`JSONSyntaxError` (with line and column) on invalid JSON, including
    ``NaN``/``Infinity``, and :class:`JSONLimitError` on JSON beyond the bounds of
    :mod:`plangraph.ir.limits` (too deep; an integer beyond 64 bits; a number that
    overflows a double, such as ``1e999``). Duplicate object keys are not errors here: the
    last one wins, as in :mod:`json`, and they are listed in ``SourceMap.duplicates``.
    """
    _check_depth(text)
    try:
        # Syntax only: numbers are converted (and bounded) by the position parser, so a
        # 5000-digit integer is a located limit error rather than int()'s ValueError.
        json.loads(
            text, parse_constant=_reject_constant, parse_int=_no_number, parse_float=_no_number
        )
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(exc.msg, exc.lineno, exc.colno) from None
    except ValueError as exc:  # NaN / Infinity
        m = re.search(r"-?(NaN|Infinity)", text)
        line, col = _line_col(text, m.start() if m else 0)
        raise JSONSyntaxError(str(exc), line, col) from None
    return _PositionParser(text, file).parse()


def _no_number(text: str) -> None:
    return None


class _PositionParser:
    """Recursive descent over text already known to be valid JSON."""

    def __init__(self, text: str, file: str | None) -> None:
        self.text = text
        self.smap = SourceMap(file=file)
        self.line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def loc(self, pos: int) -> Location:
        i = bisect.bisect_right(self.line_starts, pos) - 1
        return Location(self.smap.file, i + 1, pos - self.line_starts[i] + 1)

    def ws(self, pos: int) -> int:
        t = self.text
        while pos < len(t) and t[pos] in _WS:
            pos += 1
        return pos

    def parse(self) -> tuple[Any, SourceMap]:
        value, _ = self.value(self.ws(0), "")
        return value, self.smap

    def value(self, pos: int, pointer: str) -> tuple[Any, int]:
        self.smap.values[pointer] = self.loc(pos)
        t = self.text
        c = t[pos]
        if c == "{":
            obj: dict[str, Any] = {}
            pos = self.ws(pos + 1)
            if t[pos] == "}":
                return obj, pos + 1
            while True:
                kpos = pos
                key, pos = scanstring(t, pos + 1)
                child = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
                if key in obj:
                    self.smap.duplicates.append((child, self.loc(kpos)))
                self.smap.keys[child] = self.loc(kpos)
                pos = self.ws(self.ws(pos) + 1)  # skip ':'
                obj[key], pos = self.value(pos, child)
                pos = self.ws(pos)
                if t[pos] == "}":
                    return obj, pos + 1
                pos = self.ws(pos + 1)  # skip ','
        if c == "[":
            arr: list[Any] = []
            pos = self.ws(pos + 1)
            if t[pos] == "]":
                return arr, pos + 1
            while True:
                item, pos = self.value(pos, f"{pointer}/{len(arr)}")
                arr.append(item)
                pos = self.ws(pos)
                if t[pos] == "]":
                    return arr, pos + 1
                pos = self.ws(pos + 1)
        if c == '"':
            return scanstring(t, pos + 1)
        if t.startswith("true", pos):
            return True, pos + 4
        if t.startswith("false", pos):
            return False, pos + 5
        if t.startswith("null", pos):
            return None, pos + 4
        m = _NUMBER_RE.match(t, pos)
        assert m is not None, "json.loads accepted the text"
        written = m.group()
        digits = len(written.lstrip("-"))
        number: int | float = 0
        kind = "int"
        if m.group(1) or m.group(2):
            kind = "number"
            number = float(written)
            why = check_number(number)
            if why is not None:
                shown = written if len(written) <= 40 else written[:37] + "..."
                why = f"number {shown} is out of range (beyond {sys.float_info.max:g})"
        elif digits > _MAX_INT_DIGITS:  # int() of it may be slow, or refused past 4300
            why = f"integer of {digits} digits is too large (plans hold integers up to 2**63 - 1)"
        else:
            number = int(written)
            why = check_number(number)
        if why is not None:
            loc = self.loc(pos)
            raise JSONLimitError(why, loc.line, loc.col or 1, pointer, kind)
        return number, m.end()
