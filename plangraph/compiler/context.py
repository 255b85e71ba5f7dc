"""The state one analysis threads through its checks.

A check is a small function ``fn(ctx) -> None`` that reads what earlier checks resolved
and appends diagnostics; :mod:`plangraph.compiler.pipeline` lists them in run order.
Checks never raise on bad plans and tolerate missing data (an unknown op has no
signature, a node in a cycle has no type), so every check runs on every plan and all
problems are reported in one pass.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from plangraph.compiler.capacity import Capacity
from plangraph.compiler.diagnostics import Diagnostic
from plangraph.compiler.topology import Topology
from plangraph.ir.plan import Plan
from plangraph.ir.refs import ConfigRefError, parse_config_ref
from plangraph.ir.source import SourceMap
from plangraph.ir.types import PortType
from plangraph.ops.algorithms import algorithms
from plangraph.ops.describe import summary
from plangraph.ops.models import ModelSettings, model_types
from plangraph.ops.policies import AlgorithmConfig
from plangraph.ops.registry import OpSignature, close_matches
from plangraph.text import brief

__all__ = ["Context", "join_hints", "pointers_overlap"]


_NO_VALUE: Any = object()
"""``Context.set_text`` without a value (``None`` is one: JSON's null)."""


@dataclass
class Context:
    """Everything an analysis knows so far. Filled in by the checks, in order."""

    plan: Plan
    source: SourceMap | None
    overrides: Mapping[str, Any]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    # per node: params after ${...} resolution, pointers whose refs failed, signature,
    # validated Params (None when invalid), output/input types (None when unknown)
    raw_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed_refs: dict[str, set[str]] = field(default_factory=dict)
    sigs: dict[str, OpSignature | None] = field(default_factory=dict)
    params: dict[str, BaseModel | None] = field(default_factory=dict)
    types: dict[str, PortType | None] = field(default_factory=dict)
    input_types: dict[str, tuple[PortType | None, ...]] = field(default_factory=dict)
    # per node whose stream is a Shard[...]: the worker sets it holds shards of
    # (check "shards")
    shard_sets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # per resource
    res_raw_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    res_params: dict[str, BaseModel | None] = field(default_factory=dict)
    readers: dict[str, list[str]] = field(default_factory=dict)
    writers: dict[str, list[str]] = field(default_factory=dict)
    # the one dataflow topology (built by check "graph", ordered by check "cycles")
    topology: Topology = field(default_factory=Topology)
    # optimisation passes turned off (--no-pass): checks may word their hints by them
    disabled_passes: frozenset[str] = frozenset()
    # what the machine (or cluster) the plan will run on has (check "capacity")
    capacity: Capacity = field(default_factory=Capacity.local)
    # params as written plus --set paths (before ${...} resolution), and those overrides
    # by JSON pointer (plangraph.compiler.overrides)
    written_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    res_written_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    param_overrides: dict[str, Any] = field(default_factory=dict)
    # how the user passes overrides, for hints: "cli" (--set) or "python" (config=)
    override_syntax: str = "python"

    def set_text(self, key: str, value: Any = _NO_VALUE, *, placeholder: str = "VALUE") -> str:
        """An override as the user writes it: ``--set KEY=VALUE`` on the command line,
        ``config={'KEY': VALUE}`` in Python (``override_syntax``). ``value``: the value
        (JSON text on the command line, a Python literal in Python); without one,
        ``placeholder`` stands for it."""
        if self.override_syntax == "cli":
            text = placeholder if value is _NO_VALUE else _json_text(_plain(value))
            return f"--set {key}={text}"
        text = placeholder if value is _NO_VALUE else repr(_plain(value))
        return f"config={{{key!r}: {text}}}"

    def override_hint(self, pointer: str, *, inside_only: bool = False) -> str | None:
        """``"the value comes from --set KEY=VALUE"`` (``config={...}`` in Python) for a
        value an override path put at (or above) ``pointer``; None otherwise.
        ``inside_only``: only for a ``pointer`` at or inside a place an override set, not
        for one above it (a diagnostic about a whole policy is not about its ``lr``)."""
        for ptr, ov in self.param_overrides.items():
            inside = pointer == ptr or pointer.startswith(ptr + "/")
            if inside if inside_only else pointers_overlap(pointer, ptr):
                return f"the value comes from {self.set_text(ov.key, ov.value)}"
        return None

    def report(
        self,
        code: str,
        message: str,
        *,
        node: str | None = None,
        pointer: str = "",
        key: bool = False,
        hint: str | None = None,
        suggestions: tuple[str, ...] = (),
    ) -> None:
        loc = self.source.locate(pointer, key=key) if self.source is not None else None
        # A value an override put there: say so wherever the check that found it words
        # its hint, so that the user looks at the command line and not at the file.
        origin = self.override_hint(pointer, inside_only=True) if pointer else None
        if origin is not None and origin not in (hint or ""):
            hint = join_hints(origin, hint)
        self.diagnostics.append(
            Diagnostic(
                code,
                message,
                node=node,
                pointer=pointer,
                location=loc,
                hint=hint,
                suggestions=suggestions,
            )
        )

    def report_validation(
        self,
        exc: ValidationError,
        *,
        model: type[BaseModel],
        raw: Mapping[str, Any],
        original: Mapping[str, Any],
        base: str,
        node: str | None,
        code: str,
        skip: set[str],
        what: str,
    ) -> None:
        """Turn pydantic errors on ``raw`` (validated as ``model``) into diagnostics.

        ``base``: the pointer of the params object; ``original``: the params before
        config resolution (to say where a bad value came from); ``skip``: pointers
        already reported (failed config refs).
        """
        merged: dict[tuple[str, str], list[str]] = {}
        info: dict[tuple[str, str], tuple[str, Any]] = {}
        wants: dict[tuple[str, str], list[str]] = {}
        choices: dict[str, list[str]] = {}
        for e in exc.errors(include_url=False):
            path = _real_path(raw, e["loc"])
            value = e.get("input")
            ctx = e.get("ctx") or {}
            if isinstance(ctx.get("at"), str):  # a validator pointing below its field
                path, value = _below(raw, path, ctx["at"].split("/"), value)
            if e["type"] == "union_tag_invalid":  # point at the tag, e.g. policy.algo
                path.append(str(ctx.get("discriminator", "")).strip("'"))
                value = ctx.get("tag")
            ptr = base + "".join(f"/{p}" for p in path)
            expected = str(ctx.get("expected", ctx.get("expected_tags", "")))
            if expected:
                choices.setdefault(ptr, []).extend(re.findall(r"'([^']*)'", expected))
            if any(ptr == s or ptr.startswith(s + "/") for s in skip):
                continue
            kind = e["type"]
            k = (ptr, "extra" if kind == "extra_forbidden" else kind)
            if kind not in ("extra_forbidden", "missing"):
                k = (ptr, "value")
            msg = e["msg"].removeprefix("Value error, ")
            if kind == "union_tag_not_found":  # pydantic's "Unable to extract tag using ..."
                tag = str(ctx.get("discriminator", "")).strip("'")
                msg = f"has no {tag!r} key to say which kind it is"
            merged.setdefault(k, [])
            if msg not in merged[k]:
                merged[k].append(msg)
            info.setdefault(k, (kind, value))
            want = _requirement(kind, ctx)
            if want is not None and want not in wants.setdefault(k, []):
                wants[k].append(want)
        # a misspelt param is one problem, not "unknown x" plus "missing y"
        misspelt: set[str] = set()
        for ptr, group in merged:
            if group == "extra":
                rel = ptr[len(base) :].lstrip("/").split("/")
                parent = "/".join(rel[:-1])
                for c in close_matches(rel[-1], _fields_at(model, raw, rel[:-1])):
                    misspelt.add(f"{parent}/{c}" if parent else c)
        prefix = f"{what}: " if node is None else ""
        for (ptr, group), msgs in merged.items():
            _kind, value = info[(ptr, group)]
            if group == "missing" and ptr[len(base) :].lstrip("/") in misspelt:
                continue
            rel = ptr[len(base) :].lstrip("/").split("/") if ptr != base else []
            dotted = _dotted(rel)
            if group == "extra":
                fields = _fields_at(model, raw, rel[:-1])
                # A nested field's siblings are its parent's (a policy's), not the node's.
                owner = f"{_dotted(rel[:-1])} of {what}" if len(rel) > 1 else what
                self.report(
                    "PG119",
                    f"unknown param {brief(dotted)} for {what}",
                    node=node,
                    pointer=ptr,
                    key=True,
                    hint=join_hints(
                        self.override_hint(ptr),
                        f"{owner} takes: {', '.join(fields)}" if fields else None,
                    ),
                    suggestions=close_matches(rel[-1], fields),
                )
            elif group == "missing":
                self.report(
                    code,
                    f"missing required param {brief(dotted)} for {what}",
                    node=node,
                    pointer=base,
                    key=True,
                    hint=_field_hint(model, rel),
                )
            else:
                origin = _origin(original, rel)
                got = f" (got {brief(value)}{origin})" if not isinstance(value, Mapping) else ""
                sugg: tuple[str, ...] = ()
                if isinstance(value, str) and ptr in choices:
                    sugg = close_matches(value, dict.fromkeys(choices[ptr]))
                self.report(
                    code,
                    f"{prefix}{dotted or what}: {' or '.join(msgs)}{got}",
                    node=node,
                    pointer=ptr,
                    hint=join_hints(
                        self.config_hint(original, rel, _wanted(wants.get((ptr, group), []))),
                        self.override_hint(ptr),
                        _field_hint(model, rel),
                    ),
                    suggestions=sugg,
                )

    def config_hint(self, original: Mapping[str, Any], rel: list[str], wanted: str) -> str | None:
        """Where to fix a bad param value that came from a ``${...}`` reference.

        ``original``: the params as written (before config resolution); ``rel``: the path
        of the bad value inside them; ``wanted``: what a good value is (``"a value >= 1"``).
        Names each config key the reference reads, its JSON pointer and file location (or
        the ``--set`` override it came from). None when the value was written literally.
        """
        text = _origin_ref(original, rel)
        if text is None:
            return None
        try:
            ref = parse_config_ref(text)
        except ConfigRefError:
            return None  # reported as PG113/PG118 already
        if ref is None or not ref.keys:
            return None
        places = [self._config_place(k) for k in ref.keys]
        if ref.is_plain_key:
            key = ref.keys[0]
            if key in self.overrides:
                default = ""
                if key in self.plan.config:
                    default = (
                        f" (the plan's default {_json_text(self.plan.config[key])} is "
                        f"{self._config_place(key, default=True)})"
                    )
                return (
                    f"the value comes from {self.set_text(key, self.overrides[key])}: "
                    f"pass {wanted} instead{default}"
                )
            return f"set config.{key} to {wanted} ({places[0]}), or pass {self.set_text(key)}"
        keys = ", ".join(f"config.{k} ({p})" for k, p in zip(ref.keys, places, strict=True))
        return (
            f"the value is computed by {text} from {keys}: change them so that it is "
            f"{wanted.removeprefix('a value ')}, e.g. with {self.set_text(ref.keys[0])}"
        )

    def _config_place(self, key: str, *, default: bool = False) -> str:
        """Where config ``key`` gets its value: ``at /config/k, plan.json:4:25`` (the file
        location only when known exactly), or the override. ``default``: the plan's own."""
        ptr = f"/config/{key}"
        if key in self.overrides and not default:
            return f"overridden by {self.set_text(key, self.overrides[key])}"
        if key not in self.plan.config:
            return "not declared in the plan's config"
        loc = self.source.values.get(ptr) if self.source is not None else None
        return f"at {ptr}" + (f", {loc}" if loc is not None else "")


def _json_text(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"))


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    return v


def pointers_overlap(a: str, b: str) -> bool:
    """JSON pointers ``a`` and ``b`` are the same place or one is inside the other."""
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def join_hints(*hints: str | None) -> str | None:
    parts = [h for h in hints if h]
    return "; ".join(parts) if parts else None


_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "multiple_of": "a multiple of"}
_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
}


def _requirement(kind: str, ctx: Mapping[str, Any]) -> str | None:
    """What pydantic error ``kind`` asks of a value: ``">= 1"``, ``"an integer"``, or None."""
    for name, op in _BOUNDS.items():
        if name in ctx and kind != "literal_error":
            return f"{op} {ctx[name]}"
    if kind == "literal_error" and ctx.get("expected"):
        return f"one of {ctx['expected']}"
    return _TYPE_WORDS.get(kind)


def _wanted(reqs: list[str]) -> str:
    """``[">= 1", "<= 8"]`` -> ``"a value >= 1 and <= 8"``; ``[]`` -> ``"a valid value"``."""
    if not reqs:
        return "a valid value"
    if reqs[0][0] in "<>" or reqs[0].startswith("a multiple"):
        return "a value " + " and ".join(reqs)
    return " and ".join(reqs)


def _real_path(raw: Any, loc: tuple[Any, ...]) -> list[str]:
    """The part of a pydantic error ``loc`` that exists in the data (drops union tags)."""
    out: list[str] = []
    cur = raw
    for tok in loc:
        if isinstance(cur, Mapping) and isinstance(tok, str) and tok in cur:
            out.append(tok)
            cur = cur[tok]
        elif isinstance(cur, list | tuple) and isinstance(tok, int) and 0 <= tok < len(cur):
            out.append(str(tok))
            cur = cur[tok]
        elif isinstance(cur, Mapping) and isinstance(tok, str) and tok not in cur:
            # a missing or unknown key is the last token; union tags are skipped
            if tok == loc[-1]:
                out.append(tok)
    return out


def _below(raw: Any, path: list[str], more: list[str], value: Any) -> tuple[list[str], Any]:
    """``path`` extended by ``more`` (a validator's ``ctx["at"]``, e.g. ``["2", "0"]``) as
    far as the data has it, and the value found there (else ``value``)."""
    cur: Any = raw
    for p in path:
        cur = cur.get(p) if isinstance(cur, Mapping) else cur[int(p)]
    out = list(path)
    for p in more:
        if isinstance(cur, Mapping) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list | tuple) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            return out, value
        out.append(p)
    return out, cur


def _dotted(parts: list[str]) -> str:
    s = ""
    for p in parts:
        s += f"[{p}]" if p.isdigit() else (f".{p}" if s else p)
    return s


def _origin_ref(original: Mapping[str, Any], rel: list[str]) -> str | None:
    """The ``${...}`` text the value at ``rel`` (or a container of it) was written as."""
    cur: Any = original
    for p in rel:
        if isinstance(cur, Mapping) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list | tuple) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            return None
        if isinstance(cur, str) and cur.startswith("${"):
            return cur
    return None


def _origin(original: Mapping[str, Any], rel: list[str]) -> str:
    ref = _origin_ref(original, rel)
    return f", from {ref}" if ref is not None else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    # The open registries: a policy or model field holds any registered settings model.
    if annotation is AlgorithmConfig:
        return [spec.config for spec in algorithms().values()]
    if annotation is ModelSettings:
        return [spec.config for spec in model_types().values()]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for a in typing.get_args(annotation):
        out += _models_in(a)
    return out


def _model_at(model: type[BaseModel], raw: Any, path: list[str]) -> list[type[BaseModel]]:
    models = [model]
    cur = raw
    for p in path:
        nxt: list[type[BaseModel]] = []
        for m in models:
            f = m.model_fields.get(p)
            if f is not None:
                nxt += _models_in(f.annotation)
        cur = cur.get(p) if isinstance(cur, Mapping) else None
        if len(nxt) > 1 and isinstance(cur, Mapping):
            # discriminated union: keep the member whose literal tag matches the data
            tagged = [
                m
                for m in nxt
                if any(
                    k in m.model_fields and m.model_fields[k].default == v
                    for k, v in cur.items()
                    if isinstance(v, str)
                )
            ]
            nxt = tagged or nxt
        models = nxt
    return models


def _fields_at(model: type[BaseModel], raw: Any, path: list[str]) -> tuple[str, ...]:
    names: dict[str, None] = {}
    for m in _model_at(model, raw, path):
        names.update(dict.fromkeys(m.model_fields))
    return tuple(names)


def _field_hint(model: type[BaseModel], rel: list[str]) -> str | None:
    parts = [p for p in rel if not p.isdigit()]
    if not parts:
        return None
    ms = _model_at(model, {}, parts[:-1]) if len(parts) > 1 else [model]
    for m in ms:
        f = m.model_fields.get(parts[-1])
        if f is not None and f.description:
            return f"{parts[-1]}: {summary(f.description)}"
    return None
