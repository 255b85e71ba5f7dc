"""Loading a plan from a ``Plan``, a dict, JSON text, or a ``.json`` / ``.py`` file.

Loading never raises on bad input: it returns the best plan it could salvage plus
located diagnostics, so the compiler can go on and report every other problem too.
The shape of a plan is the IR's pydantic models (:class:`Plan`, :class:`Resource`,
:class:`Node`: their fields and ``extra="forbid"``): the plan's top level, each resource
and each node are validated with them separately, so one broken node does not hide the
others, and each pydantic error becomes a located diagnostic in our wording. Unknown keys
are dropped (and reported), broken nodes keep what validated.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from plangraph.compiler.diagnostics import Diagnostic
from plangraph.ir.limits import HINTS as LIMIT_HINTS
from plangraph.ir.limits import screen
from plangraph.ir.plan import SCHEMA_KEY, Node, Plan, Resource, canonical_json_value
from plangraph.ir.refs import CONFIG_KEY_RE, ID_RE
from plangraph.ir.source import (
    JSONLimitError,
    JSONSyntaxError,
    Location,
    SourceMap,
    parse_json_with_positions,
)
from plangraph.ops.registry import close_matches
from plangraph.text import brief

_M = TypeVar("_M", bound=BaseModel)

__all__ = ["Loaded", "load"]

# What a field must be, in the words of a PG102 "<field> must be <this>, got ..." message
# (pydantic's own "Input should be a valid dictionary" names neither the field nor JSON).
_EXPECTED: dict[tuple[type[BaseModel], str], str] = {
    (Plan, "name"): "a non-empty string",
    (Plan, "description"): "a string",
    (Plan, "output"): "a node id (string)",
    (Plan, "config"): "an object",
    (Plan, "resources"): "an object",
    (Plan, "nodes"): "an object of nodes by id",
    (Resource, "kind"): "a string",
    (Resource, "params"): "an object",
    (Node, "op"): "an operator name (string)",
    (Node, "inputs"): "an array of node ids",
    (Node, "params"): "an object",
}


def _keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys ``model`` knows, in field order (``Plan``: name, description, ...)."""
    return tuple(model.model_fields)


def _object_of(model: type[BaseModel]) -> str:
    """``'an object {"kind", "params"}'`` for ``Resource``."""
    return "an object {" + ", ".join(f'"{k}"' for k in _keys(model)) + "}"


@dataclass
class Loaded:
    """A loaded (possibly salvaged) plan. ``valid``: it passed the IR's own validation."""

    plan: Plan
    source: SourceMap | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    valid: bool = True


def _display_path(path: Path) -> str:
    s = str(path)
    if path.is_absolute():
        try:
            rel = os.path.relpath(path)
            if not rel.startswith(".."):
                return rel
        except ValueError:
            pass
    return s


def load(source: Any) -> Loaded:
    """Load ``source``: a :class:`Plan`, a JSON-form mapping, JSON text, or a path."""
    if isinstance(source, Plan):
        # A Plan was validated by its models; only the bounds are left to check (a
        # Python plan may hold 10**5000 where JSON text cannot).
        _, problems = screen(source.to_dict())
        fatal = [p for p in problems if p.fatal]
        if fatal:
            smap = source.source
            return _empty(source.name, smap.file if smap else None, _too_large(fatal, smap))
        return Loaded(source, source.source)
    if isinstance(source, Mapping):
        return _from_data(source, None)
    if isinstance(source, str) and source.lstrip().startswith("{"):
        return _from_text(source, None)
    if isinstance(source, str | os.PathLike):
        return _from_path(Path(source))
    raise TypeError(
        f"analyze() takes a Plan, a dict, JSON text or a path, not {type(source).__name__}"
    )


def _empty(name: str, file: str | None, diags: list[Diagnostic]) -> Loaded:
    plan = Plan.model_construct(
        name=name, description="", config={}, resources={}, nodes={}, output=""
    )
    smap = SourceMap(file=file)
    return Loaded(plan, smap, diags, valid=False)


def _from_path(path: Path) -> Loaded:
    file = _display_path(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".py"):
        return _empty(
            path.stem,
            file,
            [
                Diagnostic(
                    "PG104",
                    f"unsupported plan file type {suffix or '(none)'!r}",
                    location=Location(file, 1, None),
                    hint="write the plan as .json (see `plangraph schema`) or as .py "
                    "defining `plan`",
                )
            ],
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return _empty(
            path.stem,
            file,
            [Diagnostic("PG104", f"cannot read plan: {reason}", location=Location(file, 1))],
        )
    if suffix == ".json":
        return _from_text(text, file)
    return _from_python(path, file)


def _from_text(text: str, file: str | None) -> Loaded:
    try:
        data, smap = parse_json_with_positions(text, file)
    except JSONLimitError as exc:
        return _empty(
            Path(file).stem if file else "<plan>",
            file,
            [
                Diagnostic(
                    "PG105",
                    exc.msg,
                    pointer=exc.pointer,
                    location=Location(file, exc.line, exc.col),
                    hint=LIMIT_HINTS[exc.kind],
                )
            ],
        )
    except JSONSyntaxError as exc:
        return _empty(
            Path(file).stem if file else "<plan>",
            file,
            [
                Diagnostic(
                    "PG100",
                    f"invalid JSON: {exc.msg}",
                    location=Location(file, exc.line, exc.col),
                    hint="check for a missing comma, quote or bracket just before this point",
                )
            ],
        )
    return _from_data(data, smap)


def _too_large(problems: list[Any], smap: SourceMap | None) -> list[Diagnostic]:
    """Diagnostics for the fatal :class:`~plangraph.ir.limits.LimitProblem` s: PG105, or
    PG102 for a NaN/Infinity (not JSON, as in JSON text)."""
    return [
        Diagnostic(
            "PG102" if p.kind == "nonfinite" else "PG105",
            p.message,
            pointer=p.pointer,
            location=smap.locate(p.pointer) if smap else None,
            hint=LIMIT_HINTS[p.kind],
        )
        for p in problems
    ]


MAX_SHOWN_ERRORS = 10
"""Most pydantic errors :func:`validation_text` spells out (the rest are counted)."""


def validation_text(exc: ValidationError) -> str:
    """Every error of ``exc`` whole, one after another: ``<model>.<location>: <message>
    (input: <value>)``, at most :data:`MAX_SHOWN_ERRORS` of them, values bounded
    (``plangraph.text.brief``)."""
    errors = exc.errors(include_url=False)
    parts = []
    for err in errors[:MAX_SHOWN_ERRORS]:
        where = ".".join(str(p) for p in (exc.title, *err["loc"]))
        shown = f"{where}: {err['msg']}"
        if "input" in err:
            shown += f" (input: {brief(err['input'])})"
        parts.append(shown)
    if len(errors) > MAX_SHOWN_ERRORS:
        parts.append(f"and {len(errors) - MAX_SHOWN_ERRORS} more")
    return "; ".join(parts)


def _from_python(path: Path, file: str) -> Loaded:
    from plangraph.ops.builder import PlanBuildError

    def fail(code: str, msg: str, loc: Location | None, hint: str | None = None) -> Loaded:
        return _empty(path.stem, file, [Diagnostic(code, msg, location=loc, hint=hint)])

    try:
        namespace = runpy.run_path(str(path), run_name=f"plangraph_plan_{path.stem}")
    except PlanBuildError as exc:
        return fail(exc.code, exc.message, exc.location or Location(file, 1))
    except BaseException as exc:  # a plan file may fail in any way; report, don't crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        line = 1
        target = os.path.abspath(path)
        for fs in traceback.extract_tb(exc.__traceback__):
            if os.path.abspath(fs.filename) == target and fs.lineno:
                line = fs.lineno
        if isinstance(exc, SyntaxError) and exc.lineno:
            line = exc.lineno
        if isinstance(exc, ValidationError):
            # The first line of pydantic's text only says how many errors and of what
            # model ("1 validation error for Resource"): the cause is in the errors.
            msg = validation_text(exc)
        else:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return fail(
            "PG103",
            f"plan file raised {type(exc).__name__}" + (f": {msg}" if msg else ""),
            Location(file, line),
        )
    finally:
        sys.modules.pop(f"plangraph_plan_{path.stem}", None)
    plan = namespace.get("plan")
    if not isinstance(plan, Plan):
        got = "nothing" if plan is None else type(plan).__name__
        return fail(
            "PG103",
            f"a Python plan must define `plan` as a plangraph Plan (found {got})",
            Location(file, 1),
            hint="end the file with `plan = Plan.from_builder(output, name=..., ...)`",
        )
    smap = plan.source or SourceMap()
    smap = SourceMap(file=file, values=dict(smap.values), keys=dict(smap.keys))
    return Loaded(plan, smap)


class _Salvage:
    """Walks the JSON form, reporting shape problems and keeping whatever is usable."""

    def __init__(self, smap: SourceMap | None) -> None:
        self.smap = smap
        self.diags: list[Diagnostic] = []

    def loc(self, pointer: str, key: bool = False) -> Location | None:
        return self.smap.locate(pointer, key=key) if self.smap else None

    def err(
        self,
        code: str,
        msg: str,
        pointer: str,
        *,
        node: str | None = None,
        key: bool = False,
        hint: str | None = None,
        suggestions: tuple[str, ...] = (),
    ) -> None:
        self.diags.append(
            Diagnostic(
                code,
                msg,
                node=node,
                pointer=pointer,
                location=self.loc(pointer, key),
                hint=hint,
                suggestions=suggestions,
            )
        )

    def validate(
        self, model: type[_M], obj: Mapping[str, Any], pointer: str, what: str, **kw: Any
    ) -> tuple[_M | None, dict[str, list[dict[str, Any]]]]:
        """Validate ``obj`` as ``model``; report its unknown keys (PG101, with did-you-mean
        from the model's fields) and return ``(the model or None, {field: its errors})``,
        for the caller to word (field order, as pydantic reports them)."""
        try:
            return model.model_validate(obj), {}
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        known = _keys(model)
        by_field: dict[str, list[dict[str, Any]]] = {}
        for e in errors:
            field = str(e["loc"][0]) if e["loc"] else ""
            if e["type"] in ("extra_forbidden", "invalid_key"):  # invalid: not a string
                self.err(
                    "PG101",
                    f"unknown key {brief(field)} in {what}",
                    f"{pointer}/{field}",
                    key=True,
                    hint=f"known keys: {', '.join(known)}",
                    suggestions=close_matches(field, known),
                    **kw,
                )
            else:
                by_field.setdefault(field, []).append(dict(e))
        return None, by_field

    def field_errors(
        self,
        model: type[BaseModel],
        errors: Mapping[str, list[dict[str, Any]]],
        pointer: str,
        **kw: Any,
    ) -> None:
        """Report the field errors of :meth:`validate` other than a missing key (which the
        caller words) as ``"<field> must be <expected>, got <what>"`` (PG102)."""
        for key, errs in errors.items():
            for e in errs:
                if e["type"] == "missing":
                    continue
                if key == "inputs" and len(e["loc"]) > 1:  # one input: inputs[i]
                    idx = "/".join(str(x) for x in e["loc"][1:])
                    self.wrong_type(
                        f"{pointer}/{key}/{idx}",
                        "an input",
                        "a node id (string)",
                        e["input"],
                        **kw,
                    )
                elif e["type"] == "value_error" and isinstance(e["input"], Mapping):
                    self.json_value(e["input"], f"{pointer}/{key}", **kw)
                else:
                    expected = _EXPECTED.get((model, key), "a valid value")
                    self.wrong_type(f"{pointer}/{key}", key, expected, e["input"], **kw)

    def wrong_type(self, pointer: str, what: str, expected: str, value: Any, **kw: Any) -> None:
        self.err(
            "PG102",
            f"{what} must be {expected}, got {_json_type(value)}",
            pointer,
            **kw,
        )

    def json_value(self, value: Any, pointer: str, **kw: Any) -> Any:
        try:
            return canonical_json_value(value)
        except ValueError as exc:
            self.err("PG102", str(exc), pointer, **kw)
            return None

    def check_id(self, ident: Any, pointer: str, what: str) -> bool:
        """Report an ill-formed id; False if it is not a string at all (to be dropped)."""
        if not isinstance(ident, str):
            self.err("PG102", f"{what} id {brief(ident)} must be a string", pointer, key=True)
            return False
        if not ID_RE.fullmatch(ident):
            self.err(
                "PG102",
                f"{what} id {brief(ident)} must start with a letter or '_' and use only letters, "
                "digits, '_', '-' and '.'",
                pointer,
                key=True,
            )
        return True


def _good(raw: Mapping[str, Any], field: str, errors: Mapping[str, Any], default: Any) -> Any:
    """``raw[field]`` if the model found nothing wrong with it (a plain value: the models
    keep str fields as given), else ``default``."""
    return raw.get(field, default) if field not in errors else default


def _good_inputs(raw: Mapping[str, Any], errors: Mapping[str, Any]) -> tuple[str, ...]:
    """A node's inputs, keeping every id that is a string: a lone id is kept as one input
    (it is surely the edge meant), so that no follow-on error appears downstream."""
    value = raw.get("inputs", ())
    if "inputs" not in errors:
        return tuple(value)
    if isinstance(value, str):
        return (value,)
    return tuple(x for x in value if isinstance(x, str)) if isinstance(value, list | tuple) else ()


def _good_params(raw: Mapping[str, Any], errors: Mapping[str, Any]) -> dict[str, Any]:
    """Params as canonical JSON values, or ``{}`` if the model rejected them."""
    if "params" in errors or not isinstance(raw.get("params", {}), Mapping):
        return {}
    return canonical_json_value(raw.get("params", {}))


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"a number ({brief(v)})"
    if isinstance(v, str):
        return f"a string ({brief(v)})"
    if isinstance(v, list | tuple):
        return "an array"
    if isinstance(v, Mapping):
        return "an object"
    return type(v).__name__


def _from_data(data: Any, smap: SourceMap | None) -> Loaded:
    s = _Salvage(smap)
    file = smap.file if smap else None
    data, problems = screen(data)
    if any(p.fatal for p in problems):
        return _empty("<plan>", file, _too_large([p for p in problems if p.fatal], smap))
    for p in problems:  # lone surrogates: escaped in ``data`` now, analysis goes on
        s.err("PG102", p.message, p.pointer, hint=LIMIT_HINTS[p.kind])
    if not isinstance(data, Mapping):
        s.wrong_type("", "a plan", "a JSON object", data)
        return _empty("<plan>", file, s.diags)

    for ptr, loc in smap.duplicates if smap else ():
        parts = ptr.split("/")
        if len(parts) == 3 and parts[1] in ("nodes", "resources"):
            what = "node" if parts[1] == "nodes" else "resource"
            s.diags.append(
                Diagnostic(
                    "PG114",
                    f"duplicate {what} id {brief(parts[2])}: the later definition would silently "
                    "replace the earlier one",
                    node=parts[2] if what == "node" else None,
                    pointer=ptr,
                    location=loc,
                    hint=f"rename one of the two {what}s",
                )
            )
        else:
            s.diags.append(
                Diagnostic(
                    "PG102",
                    f"duplicate key {brief(parts[-1])}",
                    pointer=ptr,
                    location=loc,
                    hint="a JSON object may name each key once",
                )
            )

    top = {k: v for k, v in data.items() if k != SCHEMA_KEY}
    raw_res = top.get("resources", {})
    raw_nodes = top.get("nodes", {})
    # The top level alone: resources and nodes are validated one by one below.
    for k in ("resources", "nodes"):
        if isinstance(top.get(k), Mapping):
            top[k] = {}
    valid, errors = s.validate(Plan, top, "", "the plan")
    for k in _keys(Plan):
        if any(e["type"] == "missing" for e in errors.get(k, ())):
            s.err("PG102", f"missing required key {k!r}", "", hint=f'add "{k}" to the plan')
    # scalars first, then the containers (config, resources, nodes), as the walk reads them
    containers = ("config", "resources", "nodes")
    s.field_errors(Plan, {k: v for k, v in errors.items() if k not in containers}, "")
    name = valid.name if valid else _good(top, "name", errors, "<plan>")
    description = valid.description if valid else _good(top, "description", errors, "")
    output = valid.output if valid else _good(top, "output", errors, "")

    config: dict[str, Any] = valid.config if valid else {}
    if "config" in errors:
        raw_config = top["config"]
        if not isinstance(raw_config, Mapping):
            s.field_errors(Plan, {"config": errors["config"]}, "")
        else:  # the model stops at the first bad entry: salvage the others
            for k, v in raw_config.items():
                if not isinstance(k, str) or not CONFIG_KEY_RE.fullmatch(k):
                    s.err(
                        "PG102",
                        f"config key {brief(k)} must be an identifier (letters, digits, '_')",
                        f"/config/{k}",
                        key=True,
                    )
                    continue
                config[k] = s.json_value(v, f"/config/{k}")
    elif valid is None and isinstance(top.get("config"), Mapping):
        config = {k: canonical_json_value(v) for k, v in top["config"].items()}

    resources: dict[str, Resource] = {}
    if "resources" in errors:
        s.field_errors(Plan, {"resources": errors["resources"]}, "")
        raw_res = {}
    for rid, r in raw_res.items():
        ptr = f"/resources/{rid}"
        if not s.check_id(rid, ptr, "resource"):
            continue
        if not isinstance(r, Mapping):
            s.wrong_type(ptr, f"resource {brief(rid)}", _object_of(Resource), r)
            continue
        res, errs = s.validate(Resource, r, ptr, "a resource")
        if res is not None:
            resources[rid] = res
            continue
        if any(e["type"] == "missing" for e in errs.get("kind", ())):
            s.err(
                "PG102",
                f'resource {brief(rid)} has no "kind"',
                ptr,
                hint='e.g. "kind": "ReplayBuffer"',
            )
        s.field_errors(Resource, errs, ptr)
        resources[rid] = Resource.model_construct(
            kind=_good(r, "kind", errs, ""), params=_good_params(r, errs)
        )

    nodes: dict[str, Node] = {}
    if "nodes" in errors:
        s.field_errors(Plan, {"nodes": errors["nodes"]}, "")
        raw_nodes = {}
    for nid, n in raw_nodes.items():
        ptr = f"/nodes/{nid}"
        if not s.check_id(nid, ptr, "node"):
            continue
        if not isinstance(n, Mapping):
            s.wrong_type(ptr, f"node {brief(nid)}", _object_of(Node), n, node=nid)
            n = {}
        node, errs = s.validate(Node, n, ptr, "a node", node=nid)
        if node is not None:
            nodes[nid] = node
            continue
        if any(e["type"] == "missing" for e in errs.get("op", ())):
            s.err(
                "PG102",
                'node has no "op"',
                ptr,
                node=nid,
                hint="name an operator, see `plangraph ops`",
            )
        s.field_errors(Node, errs, ptr, node=nid)
        nodes[nid] = Node.model_construct(
            op=_good(n, "op", errs, ""), inputs=_good_inputs(n, errs), params=_good_params(n, errs)
        )

    def salvaged() -> Loaded:
        """What the walk recovered, unvalidated, with the diagnostics found so far."""
        plan = Plan.model_construct(
            name=name,
            description=description,
            config=config,
            resources=resources,
            nodes=nodes,
            output=output,
        )
        plan._source = smap
        return Loaded(plan, smap, s.diags, valid=False)

    if s.diags:
        return salvaged()
    try:
        plan = Plan.from_dict(data)
    except ValidationError as exc:  # shapes the walk above does not know; keep going
        for e in exc.errors():
            ptr = "/" + "/".join(str(p) for p in e["loc"])
            s.err("PG102", e["msg"], ptr)
        return salvaged()
    return Loaded(plan.with_source(smap), smap)
