"""``--set`` paths into nodes and resources: the override grammar and where each lands.

An override is ``KEY=VALUE`` (VALUE is JSON, else a string). KEY is one of:

* ``key``: a config key (``--set train_batch_size=4000``), read wherever the plan writes
  ``${key}``;
* ``nodes.ID.PARAM[.FIELD...]``: a param of node ``ID`` (``--set nodes.train.num_sgd_iter=5``);
* ``resources.ID.PARAM[.FIELD...]``: a param of resource ``ID``, nested fields by dots
  (``--set resources.workers.policy.lr=0.001``);
* ``ID.PARAM[.FIELD...]``: the same, when ``ID`` names one node or one resource
  (``--set workers.policy.lr=0.001``, ``--set train.num_sgd_iter=5``).

After the id, ``params.`` may be written too, so the JSON path of the value works as it is
(``nodes.train.params.num_sgd_iter``). Ids may contain dots; the longest id that fits wins.
The value replaces what the plan wrote there, a ``${key}`` reference included (that key
keeps its value everywhere else it is read: to change it everywhere, set the key). The
overridden params are then resolved and validated like the plan's own, so a bad value or
an unknown nested field is reported the usual way, with a hint naming the ``--set``.
A KEY that names no config key, node, resource or param is PG117 (an unknown param of a
known node or resource PG119), with a did-you-mean; replacing a ``${key}`` that the plan
also reads elsewhere is warning PG108.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plangraph.compiler.context import pointers_overlap
from plangraph.ir.refs import ConfigRefError, iter_config_refs, parse_config_ref
from plangraph.ops.registry import all_ops, all_resource_kinds, close_matches
from plangraph.text import brief, same_value

__all__ = ["ParamOverride", "apply_param_overrides", "is_param_override"]

_SECTIONS = ("nodes", "resources")


def is_param_override(key: str) -> bool:
    """A dotted KEY names a param path; config keys never hold a dot."""
    return "." in key


@dataclass(frozen=True)
class ParamOverride:
    """One ``--set`` into a param: ``section`` ``"nodes"``/``"resources"``, the ``id``,
    the ``path`` inside its params (param, then nested fields) and the ``value``."""

    key: str
    section: str
    id: str
    path: tuple[str, ...]
    value: Any

    @property
    def pointer(self) -> str:
        return f"/{self.section}/{self.id}/params/" + "/".join(self.path)


def _match(rest: str, ids: Mapping[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    """``(id, remaining path)`` for the longest id that ``rest`` starts with."""
    best = None
    for rid in ids:
        if (rest == rid or rest.startswith(rid + ".")) and (best is None or len(rid) > len(best)):
            best = rid
    if best is None:
        return None
    tail = rest[len(best) + 1 :]
    return best, tuple(tail.split(".")) if tail else ()


def _fields(ctx: Any, section: str, target: str) -> tuple[str, ...] | None:
    """The param names node/resource ``target`` takes (None: its op or kind is unknown)."""
    if section == "nodes":
        sig = all_ops().get(ctx.plan.nodes[target].op)
        return tuple(sig.params_model.model_fields) if sig is not None else None
    kind = all_resource_kinds().get(ctx.plan.resources[target].kind)
    return tuple(kind.params_model.model_fields) if kind is not None else None


def _resolve_target(ctx: Any, key: str) -> tuple[str, str, tuple[str, ...]] | None:
    """``(section, id, path)`` of ``key``; reports PG117 and returns None when it names
    nothing the plan has."""
    plan = ctx.plan
    head, _, rest = key.partition(".")
    sections = {"nodes": plan.nodes, "resources": plan.resources}
    if head in _SECTIONS:
        found = _match(rest, sections[head])
        if found is None:
            what = "node" if head == "nodes" else "resource"
            first = rest.partition(".")[0]
            ctx.report(
                "PG117",
                f"override {brief(key)}: the plan has no {what} {brief(first)}",
                pointer=f"/{head}/{first}",
                hint=f"its {what}s: {', '.join(sections[head]) or '(none)'}",
                suggestions=close_matches(first, sections[head]),
            )
            return None
        return head, *found
    hits = [(s, m) for s in _SECTIONS if (m := _match(key, sections[s])) is not None]
    if len(hits) > 1:
        ctx.report(
            "PG117",
            f"override {brief(key)}: {brief(hits[0][1][0])} is both a node and a resource",
            pointer=f"/nodes/{hits[0][1][0]}",
            hint=f"say which: {ctx.set_text(f'nodes.{key}', placeholder='...')} or "
            f"{ctx.set_text(f'resources.{key}', placeholder='...')}",
        )
        return None
    if not hits:
        known = [*plan.config, *plan.nodes, *plan.resources]
        ctx.report(
            "PG117",
            f"override {brief(key)} names no config key, node or resource of the plan",
            pointer=f"/config/{head}",
            hint="write KEY (config), nodes.ID.PARAM or resources.ID.PARAM; the plan has "
            f"config keys: {', '.join(plan.config) or '(none)'}; nodes: "
            f"{', '.join(plan.nodes) or '(none)'}; resources: "
            f"{', '.join(plan.resources) or '(none)'}",
            suggestions=close_matches(head, known),
        )
        return None
    section, (target, path) = hits[0]
    return section, target, path


def _parse(ctx: Any, key: str, value: Any) -> ParamOverride | None:
    found = _resolve_target(ctx, key)
    if found is None:
        return None
    section, target, path = found
    fields = _fields(ctx, section, target)
    what = f"node {brief(target)}" if section == "nodes" else f"resource {brief(target)}"
    if path[:1] == ("params",) and (fields is None or "params" not in fields):
        path = path[1:]  # the JSON path form: nodes.ID.params.PARAM
    if not path:
        ctx.report(
            "PG117",
            f"override {brief(key)}: name a param of {what}, e.g. {ctx.set_text(f'{key}.PARAM')}",
            pointer=f"/{section}/{target}/params",
            hint=f"{what} takes: {', '.join(fields)}" if fields else None,
        )
        return None
    if fields is not None and path[0] not in fields:
        ctx.report(
            "PG119",
            f"override {brief(key)}: unknown param {brief(path[0])}"
            + ("" if section == "nodes" else f" for {what}"),
            node=target if section == "nodes" else None,
            pointer=f"/{section}/{target}/params/{path[0]}",
            hint=f"{what} takes: {', '.join(fields)}",
            suggestions=close_matches(path[0], fields),
        )
        return None
    return ParamOverride(key, section, target, path, value)


def _set(params: dict[str, Any], path: tuple[str, ...], value: Any) -> str | None:
    """Set ``params[path[0]][path[1]]... = value`` in place; the first path part that is
    not an object (as a message), or None."""
    cur = params
    for i, part in enumerate(path[:-1]):
        nxt = cur.get(part)
        if nxt is None:
            nxt = cur[part] = {}
        if not isinstance(nxt, dict):
            return f"{'.'.join(path[: i + 1])} is {brief(nxt)}, not an object"
        cur = nxt
    cur[path[-1]] = value
    return None


def apply_param_overrides(
    ctx: Any,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, ParamOverride]]:
    """The plan's node and resource params with every dotted override of ``ctx.overrides``
    applied (copies; the plan is left as written), and the applied overrides by pointer.
    Reports PG117/PG119 for a KEY that names nothing."""
    nodes = {nid: copy.deepcopy(_plain(n.params)) for nid, n in ctx.plan.nodes.items()}
    resources = {rid: copy.deepcopy(_plain(r.params)) for rid, r in ctx.plan.resources.items()}
    applied: dict[str, ParamOverride] = {}
    for key, value in ctx.overrides.items():
        if not is_param_override(key):
            continue
        ov = _parse(ctx, key, value)
        if ov is None:
            continue
        clash = next((o for o in applied.values() if pointers_overlap(o.pointer, ov.pointer)), None)
        if clash is not None and not (
            clash.pointer == ov.pointer and same_value(clash.value, ov.value)
        ):
            # Two spellings of one param (train.x and nodes.train.x), or one inside the
            # other: the dict order would decide, which is not what either said.
            ctx.report(
                "PG117",
                f"overrides {brief(clash.key)} and {brief(key)} both set "
                f"{ov.pointer if len(ov.pointer) >= len(clash.pointer) else clash.pointer}"
                f" ({_json(clash.value)} and {_json(value)})",
                node=ov.id if ov.section == "nodes" else None,
                pointer=ov.pointer,
                hint="pass one of them",
            )
            continue
        target = (nodes if ov.section == "nodes" else resources)[ov.id]
        _warn_if_shadowing(ctx, ov, target)
        problem = _set(target, ov.path, value)
        if problem is not None:
            ctx.report(
                "PG117",
                f"override {brief(key)}: {problem}",
                node=ov.id if ov.section == "nodes" else None,
                pointer=ov.pointer,
                hint=f"set the config key it reads instead ({ctx.set_text('KEY')}), or the "
                f"whole value: {ctx.set_text(key.rsplit('.', 1)[0], placeholder='JSON')}",
            )
            continue
        applied[ov.pointer] = ov
    return nodes, resources, applied


def _ref_at(params: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """The ``${...}`` text written at ``path`` (or at a container of it), if any."""
    cur: Any = params
    for part in path:
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
        if isinstance(cur, str) and cur.startswith("${"):
            return cur
    return None


def _warn_if_shadowing(ctx: Any, ov: ParamOverride, written: Mapping[str, Any]) -> None:
    """PG108 when ``ov`` replaces a ``${key}`` reference whose keys the plan reads
    elsewhere too: those places keep the config value (ppo.json's ``lr`` also starts its
    ``lr_schedule``), which is rarely what the user meant."""
    text = _ref_at(written, ov.path)
    if text is None:
        return
    try:
        ref = parse_config_ref(text)
    except ConfigRefError:
        return  # reported by check "config"
    if ref is None or not ref.keys:
        return
    keys = set(ref.keys)
    here = ov.pointer
    elsewhere = []
    for section, items in (("nodes", ctx.plan.nodes), ("resources", ctx.plan.resources)):
        for oid, item in items.items():
            for ptr, other in iter_config_refs(item.params, f"/{section}/{oid}/params"):
                if pointers_overlap(ptr, here):
                    continue
                try:
                    other_ref = parse_config_ref(other)
                except ConfigRefError:
                    continue
                if other_ref is not None and keys & set(other_ref.keys):
                    elsewhere.append(ptr)
    if not elsewhere:
        return
    key = ref.keys[0]
    kept = ", ".join(f"{k}={_json(ctx.config[k])}" for k in ref.keys if k in ctx.config)
    ctx.report(
        "PG108",
        f"override {brief(ov.key)} replaces {text}, which the plan also reads at "
        f"{', '.join(elsewhere)}: there it keeps the config's value"
        + (f" ({kept})" if kept else ""),
        node=ov.id if ov.section == "nodes" else None,
        pointer=here,
        hint=f"to change it everywhere, set the config key: {ctx.set_text(key)}",
    )


def _json(value: Any) -> str:
    return json.dumps(_plain(value), separators=(",", ":"))


def _plain(value: Any) -> Any:
    """Canonical IR values (tuples) as mutable JSON (lists), so overrides can nest."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
