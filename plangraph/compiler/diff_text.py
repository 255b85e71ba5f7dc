"""The text form of a :class:`~plangraph.compiler.diff.PlanDiff` (``plangraph diff``).

Sections in a fixed order: the two sides, the plan (name, output), config, nodes in one
dataflow order (unchanged ones too, as context, so a change reads in its place in the
pipeline), resources, and a one-line summary. Each line starts with a marker as in
``diff -u``: ``+`` only in b, ``-`` only in a, ``~`` in both but changed, a space for
unchanged. Values are JSON (strings quoted), resolved as compiled.
"""

from __future__ import annotations

import json
from typing import Any

from plangraph.compiler.diff import ADDED, CHANGED, REMOVED, PlanDiff, ValueChange
from plangraph.text import count

__all__ = ["format_diff", "format_value"]

MARKS = {ADDED: "+", REMOVED: "-", CHANGED: "~", "unchanged": " "}
WIDTH = 92
MAX_VALUE_CHARS = 200


def format_value(value: Any) -> str:
    """A JSON value on one line (``[64, 64]``, ``"CartPole-v1"``, ``null``), cut at
    ``MAX_VALUE_CHARS`` (``--format json`` has it whole)."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "\u2026"


def _change(c: ValueChange) -> str:
    if c.status == ADDED:
        return f"{c.name}: (absent) -> {format_value(c.b)}"
    if c.status == REMOVED:
        return f"{c.name}: {format_value(c.a)} -> (absent)"
    return f"{c.name}: {format_value(c.a)} -> {format_value(c.b)}"


def _ids(ids: tuple[str, ...]) -> str:
    return ", ".join(ids) if ids else "(none)"


def _pack(head: str, items: list[str], indent: str) -> list[str]:
    """``head`` then ``items`` joined by ", ", wrapped at ``WIDTH`` between items."""
    lines, cur = [], indent + head
    for i, item in enumerate(items):
        piece = item + ("," if i < len(items) - 1 else "")
        if cur.strip() != head.strip() and len(cur) + 1 + len(piece) > WIDTH:
            lines.append(cur)
            cur = indent + " " * len(head) + piece
        else:
            cur += ("" if cur.endswith(head) else " ") + piece
    lines.append(cur)
    return lines


def _params(params: dict[str, Any], indent: str) -> list[str]:
    """A node's or resource's params (resource references are left out: they are in
    ``readers``/``writers`` and the diagram's dashed edges)."""
    items = [
        f"{k}={format_value(v)}"
        for k, v in params.items()
        if not (isinstance(v, str) and v.startswith("@"))
    ]
    return _pack("params: ", items, indent) if items else []


def _plan_lines(diff: PlanDiff) -> list[str]:
    lines = []
    if diff.name is not None:
        lines.append(f"  ~ name: {format_value(diff.name[0])} -> {format_value(diff.name[1])}")
    if diff.output is not None:
        lines.append(f"  ~ output: {diff.output[0]} -> {diff.output[1]}")
    return ["plan:", *lines, ""] if lines else []


def _config_lines(diff: PlanDiff) -> list[str]:
    if not diff.config:
        return []
    w = max(len(c.name) for c in diff.config)
    lines = ["config (resolved, overrides applied):"]
    for c in sorted(diff.config, key=lambda c: c.path):
        if c.status == CHANGED:
            value = f"{format_value(c.a)} -> {format_value(c.b)}"
        else:
            value = format_value(c.b if c.status == ADDED else c.a)
        lines.append(f"  {MARKS[c.status]} {c.name:<{w}}  {value}")
    return [*lines, ""]


def _node_lines(diff: PlanDiff) -> list[str]:
    if not diff.order:
        return []
    s = diff.summary()
    if not (s["nodes_added"] or s["nodes_removed"] or s["nodes_changed"] or diff.edges_retyped):
        return [*_pack("nodes: unchanged: ", list(diff.order), ""), ""]
    wid = max(len(n) for n in diff.order)
    ops = {n: (diff.b.nodes.get(n) or diff.a.nodes[n]).op for n in diff.order}
    wop = max(len(o) for o in ops.values())
    detail = " " * (6 + wid)
    lines = ["nodes (dataflow order):"]
    for nid in diff.order:
        status = diff.node_status(nid)
        head = f"  {MARKS[status]} {nid:<{wid}}  "
        if status in (ADDED, REMOVED):
            node = diff.b.nodes[nid] if status == ADDED else diff.a.nodes[nid]
            lines.append(f"{head}{node.op:<{wop}}  inputs: {_ids(node.inputs)}".rstrip())
            if status == ADDED:
                lines += _params(node.params, detail)
            continue
        lines.append(f"{head}{ops[nid]}".rstrip())
        change = diff.node_change(nid)
        if change is None:
            continue
        if change.op is not None:
            lines.append(f"{detail}op: {change.op[0]} -> {change.op[1]}")
        if change.inputs is not None:
            lines.append(f"{detail}inputs: {_ids(change.inputs[0])} -> {_ids(change.inputs[1])}")
        if change.output_type is not None:
            a, b = change.output_type
            lines.append(f"{detail}output type: {a or '?'} -> {b or '?'}")
        lines += [f"{detail}{_change(c)}" for c in _reading_order(change.params)]
    for e in diff.edges_retyped:
        a, b = diff.edge_type(e, "a"), diff.edge_type(e, "b")
        lines.append(f"  ~ edge {e.src} -> {e.dst}[{e.port}]: type {a or '?'} -> {b or '?'}")
    return [*lines, ""]


def _resource_lines(diff: PlanDiff) -> list[str]:
    order = diff.resource_order()
    if not order:
        return []
    if all(diff.resource_status(r) == "unchanged" for r in order):
        return [*_pack("resources: unchanged: ", list(order), ""), ""]
    wid = max(len(r) for r in order)
    detail = " " * (6 + wid)
    lines = ["resources:"]
    for rid in order:
        status = diff.resource_status(rid)
        res = diff.b.resources.get(rid) or diff.a.resources[rid]
        lines.append(f"  {MARKS[status]} {rid:<{wid}}  {res.kind}")
        if status == ADDED:
            lines += _params(res.params, detail)
        change = diff.resource_change(rid)
        if change is None:
            continue
        if change.kind is not None:
            lines.append(f"{detail}kind: {change.kind[0]} -> {change.kind[1]}")
        lines += [f"{detail}{_change(c)}" for c in _reading_order(change.params)]
    return [*lines, ""]


def _reading_order(changes: tuple[ValueChange, ...]) -> list[ValueChange]:
    """Top-level params first, then each nested group (``policy.*``) with its ``algo`` tag
    first; otherwise in params order."""
    return sorted(changes, key=lambda c: (len(c.path) > 1, c.path[:-1], c.path[-1] != "algo"))


def summary_line(diff: PlanDiff) -> str:
    """``summary: 4 nodes added, 1 removed, 2 changed (1 re-wired), 1 unchanged; ...``
    (resource counts that are 0 left out)."""
    s = diff.summary()
    rewired = f" ({s['nodes_rewired']} re-wired)" if s["nodes_rewired"] else ""
    nodes = (
        f"{count(s['nodes_added'], 'node')} added, {s['nodes_removed']} removed, "
        f"{s['nodes_changed']} changed{rewired}, {s['nodes_unchanged']} unchanged"
    )
    counts = [(s[f"resources_{k}"], k) for k in (ADDED, REMOVED, CHANGED)]
    shown = [(n, k) for n, k in counts if n]
    if shown:
        first, *rest = shown
        res = ", ".join(
            [f"{count(first[0], 'resource')} {first[1]}"] + [f"{n} {k}" for n, k in rest]
        )
    else:
        res = "resources unchanged"
    return f"summary: {nodes}; {count(s['config_changed'], 'config key')} changed; {res}"


def format_diff(diff: PlanDiff) -> str:
    """The text form (a trailing newline included); see the module docstring."""
    head = [
        f"--- a: {diff.a_label} (plan {diff.a.name})",
        f"+++ b: {diff.b_label} (plan {diff.b.name})",
        "",
    ]
    if diff.identical:
        return "\n".join(
            [*head, "identical: same nodes, edges, params, config and resources as compiled", ""]
        )
    body = _plan_lines(diff) + _config_lines(diff) + _node_lines(diff) + _resource_lines(diff)
    return "\n".join([*head, *body, summary_line(diff), ""])
