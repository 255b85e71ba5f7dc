"""A plan diff drawn: one union graph of both plans, coloured by what changed.

Every node, resource and edge of either plan is drawn once, in the shape of its category
(as ``plangraph render`` draws it) and the colour of its status (``style.DIFF_STYLES``):
green added (only in b), red and dashed removed (only in a), amber changed (in both,
something differs: the changed params are listed in the box as ``a → b``), grey unchanged.
Dataflow edges are coloured the same way (amber: kept, with another port type); resource
uses are dashed as in ``plangraph render`` and green or red when added or removed. The
title names both sides, the plan-level and config changes, and the counts; a legend
explains the colours. Deterministic DOT (the diff's order), no Graphviz needed for it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from plangraph.compiler.diff import (
    ABSENT,
    ADDED,
    CHANGED,
    REMOVED,
    UNCHANGED,
    DataEdge,
    PlanDiff,
    ValueChange,
)
from plangraph.compiler.diff_text import format_value, summary_line
from plangraph.diagram.dotlang import DotWriter, Html, clip, escape_html
from plangraph.diagram.errors import UnsupportedFormatError
from plangraph.diagram.graph import RANKDIRS, _has_path
from plangraph.diagram.labels import ParamLine, box_label, edge_label
from plangraph.diagram.output import DOT_SUFFIXES, SUFFIXES, run_dot
from plangraph.diagram.style import (
    DIFF_EDGES,
    DIFF_STYLES,
    FONT,
    MUTED_COLOR,
    RESOURCE_EDGE,
    RESOURCE_STYLE,
    TEXT_COLOR,
    category_style,
)
from plangraph.ops import registry

__all__ = ["diff_to_dot", "render_diff"]

MAX_LINES = 8
"""Changed params shown in one box; the rest are counted (the text form has them all)."""
MAX_TITLE_LINES = 8
"""Config changes shown in the title."""
ARROW = "\u2192"
_LEGEND_PREFIX = "legend/"  # "/" cannot occur in a plan id: no clash with a node


def _shape_attrs(op: str) -> dict[str, Any]:
    try:
        category: str | None = registry.get_op(op).category
    except KeyError:  # an op of the saved plan that is not registered here
        category = None
    cat = category_style(category)
    attrs: dict[str, Any] = {"shape": cat.shape}
    if cat.peripheries != 1:
        attrs["peripheries"] = cat.peripheries
    if "rounded" in cat.style:
        attrs["style"] = "rounded,filled"
    return attrs


def _status_attrs(status: str, base: dict[str, Any]) -> dict[str, Any]:
    style = DIFF_STYLES[status]
    attrs = {**base, "fillcolor": style.fill, "color": style.border, "penwidth": style.penwidth}
    kinds = set(str(attrs.get("style", "filled")).split(","))
    kinds |= set(style.style.split(","))
    attrs["style"] = ",".join(k for k in ("rounded", "dashed", "filled") if k in kinds)
    if status == UNCHANGED:
        attrs["fontcolor"] = MUTED_COLOR
    return attrs


def _change_lines(changes: tuple[ValueChange, ...]) -> list[ParamLine]:
    return [
        ParamLine(c.name, f"{_shown(c.a)} {ARROW} {_shown(c.b)}")
        for c in sorted(changes, key=lambda c: (len(c.path) > 1, c.path[:-1], c.path[-1] != "algo"))
    ]


def _shown(value: Any) -> str:
    return "(absent)" if value is ABSENT else format_value(value)


def _cap(lines: list[ParamLine]) -> list[ParamLine]:
    if len(lines) <= MAX_LINES:
        return lines
    return [*lines[: MAX_LINES - 1], ParamLine("\u2026", f"{len(lines) - MAX_LINES + 1} more")]


def _plain_params(params: dict[str, Any]) -> list[ParamLine]:
    """An added node's or resource's params, resource references left to the edges."""
    items = [
        ParamLine(k, format_value(v))
        for k, v in params.items()
        if not (isinstance(v, str) and v.startswith("@")) and not isinstance(v, dict)
    ]
    return _cap(items)


def _node(w: DotWriter, diff: PlanDiff, nid: str) -> None:
    status = diff.node_status(nid)
    node = diff.b.nodes.get(nid) or diff.a.nodes[nid]
    change = diff.node_change(nid)
    op = node.op
    lines: list[ParamLine] = []
    if change is not None:
        if change.op is not None:
            op = f"{change.op[0]} {ARROW} {change.op[1]}"
        if change.inputs is not None:
            a, b = (", ".join(x) or "(none)" for x in change.inputs)
            lines.append(ParamLine("inputs", f"{a} {ARROW} {b}"))
        if change.output_type is not None:
            a, b = (t or "?" for t in change.output_type)
            lines.append(ParamLine("output type", f"{a} {ARROW} {b}"))
        lines += _change_lines(change.params)
    elif status == ADDED:
        lines = _plain_params(node.params)
    attrs = _status_attrs(status, _shape_attrs(node.op))
    attrs["label"] = box_label(nid, f"{op} \u00b7 {status}", _cap(lines))
    attrs["tooltip"] = f"{nid}: {op} ({status})"
    w.node(nid, attrs)


def _resource(w: DotWriter, diff: PlanDiff, rid: str) -> None:
    status = diff.resource_status(rid)
    res = diff.b.resources.get(rid) or diff.a.resources[rid]
    change = diff.resource_change(rid)
    kind = res.kind
    lines: list[ParamLine] = []
    if change is not None:
        if change.kind is not None:
            kind = f"{change.kind[0]} {ARROW} {change.kind[1]}"
        lines = _change_lines(change.params)
    elif status == ADDED:
        lines = _plain_params(res.params)
    base: dict[str, Any] = {"shape": RESOURCE_STYLE.shape}
    attrs = _status_attrs(status, base)
    attrs["label"] = box_label(f"@{rid}", f"{kind} \u00b7 {status}", _cap(lines))
    attrs["tooltip"] = f"@{rid}: {kind} ({status})"
    w.node(_resource_name(rid), attrs)


def _resource_name(rid: str) -> str:
    return f"@{rid}"  # "@" cannot start a plan id


def _title(diff: PlanDiff) -> Html:
    rows = [
        f'<FONT POINT-SIZE="16"><B>plan diff: {escape_html(clip(diff.a.name))} {ARROW} '
        f"{escape_html(clip(diff.b.name))}</B></FONT>",
        f'<FONT COLOR="{MUTED_COLOR}">a: {escape_html(diff.a_label)}   '
        f"b: {escape_html(diff.b_label)}</FONT>",
    ]
    if diff.identical:
        rows.append(escape_html("identical"))
        return Html("<BR/>".join(rows))
    rows.append(escape_html(summary_line(diff).removeprefix("summary: ")))
    plan_changes = []
    if diff.output is not None:
        plan_changes.append(f"output: {diff.output[0]} {ARROW} {diff.output[1]}")
    config = sorted(diff.config, key=lambda c: c.path)
    for c in config[:MAX_TITLE_LINES]:
        mark = {ADDED: "+", REMOVED: "-", CHANGED: "~"}[c.status]
        text = f"config {mark} {c.name}: "
        if c.status == CHANGED:
            text += f"{_shown(c.a)} {ARROW} {_shown(c.b)}"
        else:
            text += _shown(c.b if c.status == ADDED else c.a)
        color = DIFF_STYLES[c.status].border
        plan_changes.append(f'<FONT COLOR="{color}">{escape_html(text)}</FONT>')
    if len(config) > MAX_TITLE_LINES:
        plan_changes.append(escape_html(f"\u2026 {len(config) - MAX_TITLE_LINES} more config"))
    if plan_changes:
        rows.append('<FONT POINT-SIZE="11">' + "<BR/>".join(plan_changes) + "</FONT>")
    return Html("<BR/>".join(rows))


def diff_to_dot(diff: PlanDiff, rankdir: str = "TB") -> str:
    """The union graph of ``diff`` as DOT text (see the module docstring).

    Raises:
        ValueError: ``rankdir`` is not ``"TB"`` or ``"LR"``.
    """
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    w = DotWriter(f"diff {diff.a.name} {diff.b.name}")
    w.comment("Generated by `plangraph diff`; regenerate instead of editing.")
    w.defaults(
        "graph",
        {
            "rankdir": rankdir,
            "label": _title(diff),
            "labelloc": "t",
            "labeljust": "c",
            "fontname": FONT,
            "fontcolor": TEXT_COLOR,
            "nodesep": 0.45,
            "ranksep": 0.5,
            "pad": 0.25,
            "newrank": True,
        },
    )
    w.defaults("node", {"fontname": FONT, "fontsize": 11, "fontcolor": TEXT_COLOR, "margin": 0.12})
    w.defaults("edge", {"fontname": FONT, "fontsize": 9, "arrowsize": 0.8})
    resources = diff.resource_order()
    if resources:
        w.blank()
        w.comment("resources of either plan")
    for rid in resources:
        _resource(w, diff, rid)
    w.blank()
    w.comment("operators of either plan, in one dataflow order")
    for nid in diff.order:
        _node(w, diff, nid)
    drawn = set(diff.order)
    adj = _data_edges(w, diff, drawn)
    _use_edges(w, diff, drawn, adj)
    _legend(w, diff, bool(resources))
    return w.source()


def _data_edges(w: DotWriter, diff: PlanDiff, drawn: set[str]) -> dict[str, set[str]]:
    added, removed = set(diff.edges_added), set(diff.edges_removed)
    retyped = set(diff.edges_retyped)
    w.blank()
    w.comment("dataflow edges of either plan, labelled with the port type")
    adj: dict[str, set[str]] = {}
    for nid in diff.order:
        ports = set()
        for side in (diff.b, diff.a):
            node = side.nodes.get(nid)
            if node is not None:
                ports |= {(i, src) for i, src in enumerate(node.inputs)}
        for port, src in sorted(ports):
            if src not in drawn:
                continue  # a hand-edited saved plan naming no node: nothing to attach to
            edge = DataEdge(dst=nid, port=port, src=src)
            if edge in added:
                status, label = ADDED, diff.edge_type(edge, "b") or "?"
            elif edge in removed:
                status, label = REMOVED, diff.edge_type(edge, "a") or "?"
            elif edge in retyped:
                a, b = diff.edge_type(edge, "a") or "?", diff.edge_type(edge, "b") or "?"
                status, label = CHANGED, f"{a} {ARROW} {b}"
            else:
                status, label = UNCHANGED, diff.edge_type(edge, "b") or "?"
            attrs: dict[str, Any] = {**DIFF_EDGES[status], "weight": 4}
            attrs["label"] = edge_label([label])
            attrs["tooltip"] = f"{src} -> {nid} (input {port}): {status}"
            w.edge(src, nid, attrs)
            adj.setdefault(src, set()).add(nid)
    return adj


def _use_edges(w: DotWriter, diff: PlanDiff, drawn: set[str], adj: dict[str, set[str]]) -> None:
    status_of: dict[tuple[str, str, str], str] = {}
    for side, status in ((diff.a, REMOVED), (diff.b, ADDED)):
        for rid, res in side.resources.items():
            for access, nodes in (("read", res.readers), ("write", res.writers)):
                for nid in nodes:
                    key = (nid, rid, access)
                    status_of[key] = UNCHANGED if key in status_of else status
    if not status_of:
        return
    w.blank()
    w.comment("resource use: dashed, resource -> op reads, op -> resource writes")
    # One edge per (node, resource, status); a read and a write of one status share it.
    grouped: dict[tuple[str, str, str], set[str]] = {}
    for (nid, rid, access), status in status_of.items():
        if nid in drawn:
            grouped.setdefault((nid, rid, status), set()).add(access)
    order = {n: i for i, n in enumerate(diff.order)}
    rorder = {r: i for i, r in enumerate(diff.resource_order())}
    keys = sorted(grouped, key=lambda k: (order[k[0]], rorder.get(k[1], 0), k[2]))
    # Reads first, as plangraph render does: a write that would close a loop (the learner
    # writing the weights its own rollouts read) must not move ranks.
    for nid, rid, status in sorted(keys, key=lambda k: "read" not in grouped[k]):
        accesses = grouped[(nid, rid, status)]
        tail, head = (
            (_resource_name(rid), nid) if "read" in accesses else (nid, _resource_name(rid))
        )
        grouped_ok = not _has_path(adj, head, tail)
        if grouped_ok:
            adj.setdefault(tail, set()).add(head)
        else:
            accesses.add("_free")
    for nid, rid, status in keys:
        accesses = grouped[(nid, rid, status)]
        attrs: dict[str, Any] = dict(RESOURCE_EDGE)
        if status != UNCHANGED:
            # The status colour, at a resource edge's weight: the dataflow stays the spine.
            attrs.update(
                {k: v for k, v in DIFF_EDGES[status].items() if k in ("color", "fontcolor")}
            )
            attrs["penwidth"] = 1.4
        both = {"read", "write"} <= accesses
        verb = "reads+writes" if both else ("reads" if "read" in accesses else "writes")
        if both:
            attrs["dir"] = "both"
        attrs["label"] = edge_label([verb if status == UNCHANGED else f"{verb} ({status})"])
        attrs["tooltip"] = f"{nid} {verb} @{rid} ({status})"
        if "_free" in accesses:
            attrs["constraint"] = False
        if "read" in accesses:
            w.edge(_resource_name(rid), nid, attrs)
        else:
            w.edge(nid, _resource_name(rid), attrs)


def _legend(w: DotWriter, diff: PlanDiff, resources: bool) -> None:
    if not diff.order:
        return
    w.blank()
    w.comment("legend, below the plan")
    w.begin_subgraph("cluster_legend")
    w.defaults(
        "graph",
        {
            "label": Html("<B>legend</B>"),
            "fontsize": 10,
            "style": "rounded,dashed",
            "color": "#aab7b8",
            "fontcolor": MUTED_COLOR,
            "margin": 6,
        },
    )
    names = []
    for status in (ADDED, REMOVED, CHANGED, UNCHANGED):
        name = _LEGEND_PREFIX + status
        names.append(name)
        attrs = _status_attrs(status, {"shape": "box"})
        text = DIFF_STYLES[status].description
        w.node(name, {**attrs, "label": Html(escape_html(text)), "fontsize": 9, "height": 0.3})
    rows = [
        f'<FONT COLOR="{DIFF_EDGES[ADDED]["color"]}">green: edge added</FONT>',
        f'<FONT COLOR="{DIFF_EDGES[REMOVED]["color"]}">red, dashed: edge removed</FONT>',
        f'<FONT COLOR="{DIFF_EDGES[CHANGED]["color"]}">amber: port type changed</FONT>',
        f'<FONT COLOR="{DIFF_EDGES[UNCHANGED]["color"]}">grey: unchanged (label: type)</FONT>',
    ]
    if resources:
        rows.append(
            f'<FONT COLOR="{RESOURCE_EDGE["color"]}">thin dashed: an op reads / writes a '
            "resource</FONT>"
        )
    rows.append(
        f'<FONT COLOR="{MUTED_COLOR}">changed boxes list what changed as a {ARROW} b</FONT>'
    )
    names.append(_LEGEND_PREFIX + "edges")
    w.node(
        names[-1],
        {
            "shape": "plaintext",
            "fontsize": 9,
            "label": Html("".join(f'{row}<BR ALIGN="LEFT"/>' for row in rows)),
        },
    )
    w.begin_subgraph(f"{_LEGEND_PREFIX}row")
    w.defaults("graph", {"rank": "same"})
    for a, b in itertools.pairwise(names):
        w.edge(a, b, {"style": "invis"})
    w.end_subgraph()
    w.end_subgraph()
    sinks = [n for n in diff.order if n in (diff.b.output, diff.a.output)]
    anchor = sinks[0] if sinks else diff.order[-1]
    w.edge(anchor, names[0], {"style": "invis"})


def render_diff(diff: PlanDiff, path: str | Path, rankdir: str = "TB") -> Path:
    """Draw ``diff`` to ``path``: ``.dot``/``.gv`` (DOT text, no Graphviz needed), ``.svg``
    or ``.png`` (Graphviz ``dot``). Parent directories are created.

    Raises:
        UnsupportedFormatError: any other suffix.
        GraphvizPackageMissingError, DotBinaryMissingError, DotFailedError: for SVG/PNG
            (see ``plangraph.diagram.run_dot``); nothing is written then.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UnsupportedFormatError(path, SUFFIXES)
    source = diff_to_dot(diff, rankdir=rankdir)
    data = source.encode("utf-8") if suffix in DOT_SUFFIXES else run_dot(source, suffix[1:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
