"""Loading a plan from a ``Plan``, a dict, JSON text, or a ``.json`` / ``.py`` file.

Loading never raises on bad input: it returns the best plan it could salvage plus
located diagnostics, so the compiler can go on and report every other problem too.
Unknown keys are dropped (and reported), broken nodes keep what parsed.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from plangraph.compiler.diagnostics import Diagnostic
from plangraph.ir.plan import SCHEMA_KEY, Node, Plan, Resource, canonical_json_value
from plangraph.ir.refs import CONFIG_KEY_RE, ID_RE
from plangraph.ir.source import JSONSyntaxError, Location, SourceMap, parse_json_with_positions
from plangraph.ops.registry import close_matches

__all__ = ["Loaded", "load"]

PLAN_KEYS = ("name", "description", "config", "resources", "nodes", "output")
NODE_KEYS = ("op", "inputs", "params")
RESOURCE_KEYS = ("kind", "params")


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

    def unknown_keys(
        self,
        obj: Mapping[str, Any],
        allowed: tuple[str, ...],
        pointer: str,
        what: str,
        node: str | None = None,
    ) -> None:
        for k in obj:
            if k not in allowed:
                sugg = close_matches(k, allowed)
                self.err(
                    "PG101",
                    f"unknown key {k!r} in {what}",
                    f"{pointer}/{k}",
                    node=node,
                    key=True,
                    hint=f"known keys: {', '.join(allowed)}",
                    suggestions=sugg,
                )

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

    def params(self, value: Any, pointer: str, **kw: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.wrong_type(pointer, "params", "an object", value, **kw)
            return {}
        out = self.json_value(value, pointer, **kw)
        return out if isinstance(out, dict) else {}

    def check_id(self, ident: str, pointer: str, what: str) -> None:
        if not ID_RE.fullmatch(ident):
            self.err(
                "PG102",
                f"{what} id {ident!r} must start with a letter or '_' and use only letters, "
                "digits, '_', '-' and '.'",
                pointer,
                key=True,
            )


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"a number ({v!r})"
    if isinstance(v, str):
        return f"a string ({v!r})"
    if isinstance(v, list | tuple):
        return "an array"
    if isinstance(v, Mapping):
        return "an object"
    return type(v).__name__


def _from_data(data: Any, smap: SourceMap | None) -> Loaded:
    s = _Salvage(smap)
    file = smap.file if smap else None
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
                    f"duplicate {what} id {parts[2]!r}: the later definition would silently "
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
                    f"duplicate key {parts[-1]!r}",
                    pointer=ptr,
                    location=loc,
                    hint="a JSON object may name each key once",
                )
            )

    s.unknown_keys({k: v for k, v in data.items() if k != SCHEMA_KEY}, PLAN_KEYS, "", "the plan")
    for k in ("name", "nodes", "output"):
        if k not in data:
            s.err("PG102", f"missing required key {k!r}", "", hint=f'add "{k}" to the plan')

    name = data.get("name", "<plan>")
    if not isinstance(name, str) or not name:
        if "name" in data:
            s.wrong_type("/name", "name", "a non-empty string", name)
        name = "<plan>"
    description = data.get("description", "")
    if not isinstance(description, str):
        s.wrong_type("/description", "description", "a string", description)
        description = ""
    output = data.get("output", "")
    if not isinstance(output, str):
        s.wrong_type("/output", "output", "a node id (string)", output)
        output = ""

    config: dict[str, Any] = {}
    raw_config = data.get("config", {})
    if not isinstance(raw_config, Mapping):
        s.wrong_type("/config", "config", "an object", raw_config)
    else:
        for k, v in raw_config.items():
            if not CONFIG_KEY_RE.fullmatch(k):
                s.err(
                    "PG102",
                    f"config key {k!r} must be an identifier (letters, digits, '_')",
                    f"/config/{k}",
                    key=True,
                )
                continue
            config[k] = s.json_value(v, f"/config/{k}")

    resources: dict[str, Resource] = {}
    raw_res = data.get("resources", {})
    if not isinstance(raw_res, Mapping):
        s.wrong_type("/resources", "resources", "an object", raw_res)
        raw_res = {}
    for rid, r in raw_res.items():
        ptr = f"/resources/{rid}"
        s.check_id(rid, ptr, "resource")
        if not isinstance(r, Mapping):
            s.wrong_type(ptr, f"resource {rid!r}", 'an object {"kind", "params"}', r)
            continue
        s.unknown_keys(r, RESOURCE_KEYS, ptr, "a resource")
        kind = r.get("kind")
        if not isinstance(kind, str) or not kind:
            if "kind" not in r:
                s.err(
                    "PG102",
                    f'resource {rid!r} has no "kind"',
                    ptr,
                    hint='e.g. "kind": "ReplayBuffer"',
                )
            else:
                s.wrong_type(f"{ptr}/kind", "kind", "a string", kind)
            kind = ""
        params = s.params(r.get("params"), f"{ptr}/params")
        resources[rid] = Resource.model_construct(kind=kind, params=params)

    nodes: dict[str, Node] = {}
    raw_nodes = data.get("nodes", {})
    if not isinstance(raw_nodes, Mapping):
        s.wrong_type("/nodes", "nodes", "an object of nodes by id", raw_nodes)
        raw_nodes = {}
    for nid, n in raw_nodes.items():
        ptr = f"/nodes/{nid}"
        s.check_id(nid, ptr, "node")
        if not isinstance(n, Mapping):
            s.wrong_type(ptr, f"node {nid!r}", 'an object {"op", "inputs", "params"}', n, node=nid)
            n = {}
        s.unknown_keys(n, NODE_KEYS, ptr, "a node", node=nid)
        op = n.get("op")
        if not isinstance(op, str) or not op:
            if "op" not in n:
                s.err(
                    "PG102",
                    'node has no "op"',
                    ptr,
                    node=nid,
                    hint="name an operator, see `plangraph ops`",
                )
            else:
                s.wrong_type(f"{ptr}/op", "op", "an operator name (string)", op, node=nid)
            op = ""
        raw_inputs = n.get("inputs", [])
        inputs: list[str] = []
        if not isinstance(raw_inputs, list | tuple):
            s.wrong_type(f"{ptr}/inputs", "inputs", "an array of node ids", raw_inputs, node=nid)
            if isinstance(raw_inputs, str):  # a lone id: keep the edge, avoid follow-on noise
                inputs.append(raw_inputs)
        else:
            for i, x in enumerate(raw_inputs):
                if isinstance(x, str):
                    inputs.append(x)
                else:
                    s.wrong_type(f"{ptr}/inputs/{i}", "an input", "a node id (string)", x, node=nid)
        params = s.params(n.get("params"), f"{ptr}/params", node=nid)
        nodes[nid] = Node.model_construct(op=op, inputs=tuple(inputs), params=params)

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
