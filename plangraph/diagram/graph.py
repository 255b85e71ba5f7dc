"""``to_dot``: a compiled plan as deterministic DOT text.

What is drawn, in this order (so the text is stable for snapshots and diffs):

1. the title (plan name, description, error count and plan-level diagnostics);
2. resources (cylinders), in declaration order, then any ``"@id"`` a node references but
   the plan does not declare (red, dashed);
3. operator nodes in the compiler's topological order, then nodes it could not order,
   then red placeholders for input ids that name no node;
4. dataflow edges (consumer order, then input-port order), labelled with the inferred
   port type; ``Concurrently`` inputs also show their index, weight and whether their
   items are emitted (``output_indexes``);
5. dashed read/write edges between resources and the ops whose params reference them;
6. the legend, built from the same style table as the nodes.

With a run's ``profile`` (``plangraph.ir.profile.RunProfile``) the nodes are filled with
their heat colour and labelled with their share of wall time, time per call and calls
per iteration, and the edges with their items per second (``plangraph.diagram.heat``).

Diagnostics are attached where they point: an ``/nodes/<id>/inputs/<i>`` pointer marks
that edge, other ``/nodes/<id>...`` pointers (or ``Diagnostic.node``) mark the node and
``/resources/<id>...`` the resource; each mark shows the stable code, in red (orange for
warnings), with the full text in the SVG tooltip.
"""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plangraph.diagram import heat
from plangraph.diagram.dotlang import DotWriter, Html, clip, escape_html
from plangraph.diagram.labels import Mark, ParamLine, box_label, edge_label, tooltip
from plangraph.diagram.style import (
    CATEGORY_STYLES,
    DATA_EDGE,
    ERROR_COLOR,
    ERROR_EDGE,
    FONT,
    MARKED_STYLE,
    MISSING_STYLE,
    MUTED_COLOR,
    PASSIVE_EDGE,
    RESOURCE_EDGE,
    RESOURCE_STYLE,
    TEXT_COLOR,
    WARNING_EDGE,
    NodeStyle,
    category_style,
)
from plangraph.ir.refs import resource_ref_id
from plangraph.text import brief, printable

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan, Diagnostic
    from plangraph.compiler.compiled import CompiledNode
    from plangraph.ir.profile import RunProfile

RANKDIRS: tuple[str, ...] = ("TB", "LR")

# DOT names of the legend's nodes contain "/", which plan ids cannot (ir.refs.ID_RE).
_LEGEND_PREFIX = "legend/"
_LEGEND_ROW = 4

# How a merge op's ``None`` params read: what the runtime does when they are absent.
_NONE_MEANS: dict[str, str] = {"output_indexes": "all inputs", "weights": "1 from each input"}


@dataclass
class _Marks:
    """Diagnostics sorted by where they are drawn."""

    nodes: dict[str, list[Mark]] = field(default_factory=dict)
    flagged_nodes: set[str] = field(default_factory=set)
    edges: dict[tuple[str, int], list[Mark]] = field(default_factory=dict)
    params: set[tuple[str, str]] = field(default_factory=set)
    resources: dict[str, list[Mark]] = field(default_factory=dict)
    plan: list[Mark] = field(default_factory=list)


def _match_id(rest: str, ids: Iterable[str]) -> tuple[str, str] | None:
    """Split ``"<id>/tail"`` against known ids (longest match; ids may contain "/")."""
    best: str | None = None
    for ident in ids:
        if (rest == ident or rest.startswith(ident + "/")) and (
            best is None or len(ident) > len(best)
        ):
            best = ident
    if best is None:
        return None
    return best, rest[len(best) + 1 :]


def _sort_marks(compiled: CompiledPlan, node_ids: Iterable[str]) -> _Marks:
    marks = _Marks()
    node_ids = list(node_ids)
    for diag in compiled.diagnostics:
        mark = Mark(diag.code, diag.message, diag.severity)
        if _place_by_pointer(diag, mark, marks, compiled, node_ids):
            continue
        if diag.node is not None:
            marks.nodes.setdefault(diag.node, []).append(mark)
            marks.flagged_nodes.add(diag.node)
        else:
            marks.plan.append(mark)
    return marks


def _place_by_pointer(
    diag: Diagnostic, mark: Mark, marks: _Marks, compiled: CompiledPlan, node_ids: list[str]
) -> bool:
    pointer = diag.pointer
    if pointer.startswith("/nodes/"):
        hit = _match_id(pointer[len("/nodes/") :], node_ids)
        if hit is None:
            return False
        nid, tail = hit
        parts = tail.split("/") if tail else []
        marks.flagged_nodes.add(nid)
        n_inputs = len(compiled.plan.nodes[nid].inputs)
        if (
            len(parts) == 2
            and parts[0] == "inputs"
            and parts[1].isdigit()
            and int(parts[1]) < n_inputs  # else there is no such edge: mark the node
        ):
            marks.edges.setdefault((nid, int(parts[1])), []).append(mark)
            return True
        if len(parts) >= 2 and parts[0] == "params":
            marks.params.add((nid, parts[1]))
        marks.nodes.setdefault(nid, []).append(mark)
        return True
    if pointer.startswith("/resources/"):
        hit = _match_id(pointer[len("/resources/") :], compiled.plan.resources)
        if hit is None:
            return False
        marks.resources.setdefault(hit[0], []).append(mark)
        return True
    return False


def _style_attrs(style: NodeStyle, marks: list[Mark], flagged: bool) -> dict[str, Any]:
    attrs: dict[str, Any] = style.attrs()
    if flagged or marks:
        worst = "error" if any(m.severity == "error" for m in marks) or not marks else "warning"
        edge = ERROR_EDGE if worst == "error" else WARNING_EDGE
        attrs["color"] = edge["color"]
        attrs["penwidth"] = max(float(attrs["penwidth"]), 2.5)
    return attrs


def _config_ref(raw: Any) -> str | None:
    """The ``${...}`` text a raw param value was written as, if it is a config reference."""
    if isinstance(raw, str) and raw.startswith("${") and raw.endswith("}"):
        return raw[2:-1].strip()
    return None


def _param_lines(
    node: CompiledNode | None, raw: Mapping[str, Any], nid: str, flagged: set[tuple[str, str]]
) -> list[ParamLine]:
    """Key params of a node: those the plan sets explicitly (all of them for merge ops),
    with resolved values; resource references are left to the dashed edges."""
    sig = node.signature if node is not None else None
    resource_params = {r.param for r in sig.resources} if sig is not None else set()
    params = node.params if node is not None else None
    if params is not None and sig is not None and sig.category == "merge":
        names = list(type(params).model_fields)
    elif params is not None:
        names = [n for n in type(params).model_fields if n in raw]
    else:
        names = list(raw)
    resolved = node.raw_params if node is not None else {}
    lines = []
    for name in names:
        if name in resource_params and (nid, name) not in flagged:
            continue
        # As written (config refs resolved), so `weights = [1, 2]` is not shown as the
        # validated `[1.0, 2.0]`; defaults that are shown come from the params model.
        if name in resolved:
            value = resolved[name]
        elif params is not None and name in type(params).model_fields:
            value = getattr(params, name)
        else:
            value = raw.get(name)
        if value is None and name in _NONE_MEANS:
            if name == "weights" and getattr(params, "mode", None) == "async":
                continue
            value = _NONE_MEANS[name]
        lines.append(
            ParamLine(name, value, ref=_config_ref(raw.get(name)), flagged=(nid, name) in flagged)
        )
    return lines


def _resource_lines(
    params: Any, raw: Mapping[str, Any], resolved: Mapping[str, Any]
) -> list[ParamLine]:
    """Resource params the plan sets, as written (config refs resolved), in model field
    order; a worker set's policy (each of its policies) is summarised by its algorithm."""
    names = list(raw)
    if params is not None:  # the model's field order, not the order keys were written in
        fields = list(type(params).model_fields)
        names = [n for n in fields if n in raw] + [n for n in raw if n not in fields]
    lines = []
    for name in names:
        value = resolved.get(name, raw[name])
        if name == "policy" and isinstance(value, Mapping) and "algo" in value:
            lines.append(ParamLine("policy", value["algo"]))
            continue
        if name == "policies" and isinstance(value, Mapping):  # multi-agent: id: algo
            algos = {
                pid: cfg.get("algo", "?") if isinstance(cfg, Mapping) else "?"
                for pid, cfg in value.items()
            }
            lines.append(ParamLine("policies", ", ".join(f"{k}: {v}" for k, v in algos.items())))
            continue
        lines.append(ParamLine(name, value, ref=_config_ref(raw[name])))
    return lines


def _title(compiled: CompiledPlan, marks: _Marks, profile: RunProfile | None = None) -> Html:
    plan = compiled.plan
    name = escape_html(clip(plan.name or "(unnamed plan)"))
    rows = [f'<FONT POINT-SIZE="16"><B>{name}</B></FONT>']
    if plan.description:
        for line in textwrap.wrap(" ".join(plan.description.split()), 90)[:3]:
            rows.append(f'<FONT COLOR="{MUTED_COLOR}">{escape_html(line)}</FONT>')
    n_err = len(compiled.errors)
    n_warn = len(compiled.warnings)
    if n_err or n_warn:
        parts = []
        if n_err:
            parts.append(f"{n_err} error{'s' * (n_err != 1)}")
        if n_warn:
            parts.append(f"{n_warn} warning{'s' * (n_warn != 1)}")
        text = " and ".join(parts) + (" (does not validate)" if n_err else "")
        rows.append(f'<FONT COLOR="{ERROR_COLOR}"><B>{escape_html(text)}</B></FONT>')
    for mark in marks.plan:
        msg = textwrap.shorten(mark.message, 100, placeholder="\u2026")
        rows.append(
            f'<FONT COLOR="{mark.color}"><B>{escape_html(mark.code)}</B> {escape_html(msg)}</FONT>'
        )
    if profile is not None:
        rows += [f"<B>{escape_html(line)}</B>" for line in heat.title_lines(profile)]
    return Html("<BR/>".join(rows))


def _resource_uses(
    compiled: CompiledPlan, node_ids: list[str]
) -> list[tuple[str, str, frozenset[str]]]:
    """``(node id, resource id, {"read", "write"})`` in node order, then param order."""
    uses: dict[tuple[str, str], set[str]] = {}
    for nid in node_ids:
        node = compiled.nodes.get(nid)
        if node is None or node.signature is None:
            continue
        for rp in node.signature.resources:
            value = getattr(node.params, rp.param, None) if node.params is not None else None
            if value is None:
                value = node.raw_params.get(rp.param)
            rid = resource_ref_id(value)
            if rid is not None:
                uses.setdefault((nid, rid), set()).add(rp.access)
    return [(nid, rid, frozenset(acc)) for (nid, rid), acc in uses.items()]


def _has_path(adj: Mapping[str, set[str]], start: str, goal: str) -> bool:
    seen, stack = {start}, [start]
    while stack:
        cur = stack.pop()
        if cur == goal:
            return True
        for nxt in adj.get(cur, ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


def _begin_worker_box(w: DotWriter, source: str, worker_set: str | None) -> None:
    """Open the box (a DOT cluster) around what runs in each worker of rollout source
    ``source``; its name cannot clash with a plan id (those have no ``/``)."""
    w.begin_subgraph(f"cluster_workers/{source}")
    w.defaults(
        "graph",
        {
            "label": Html(
                "<I>on each rollout worker"
                + (f" ({escape_html(worker_set)})" if worker_set else "")
                + "</I>"
            ),
            "labeljust": "l",
            "fontsize": 10,
            "style": "rounded,dashed",
            "color": MUTED_COLOR,
            "fontcolor": MUTED_COLOR,
            "margin": 8,
        },
    )


def to_dot(compiled: CompiledPlan, rankdir: str = "TB", profile: RunProfile | None = None) -> str:
    """The plan as DOT text (UTF-8 safe, deterministic); needs no Graphviz installed.

    Args:
        compiled: the result of ``plangraph.compiler.analyze`` (plans with errors too).
        rankdir: ``"TB"`` (top to bottom) or ``"LR"`` (left to right).
        profile: a run's profile (``profile.json``) to draw on the plan: heat colour,
            share of wall time, ms per call and calls per iteration on each node, items
            per second on each edge.

    Raises:
        ValueError: ``rankdir`` is not ``"TB"`` or ``"LR"``.
    """
    if rankdir not in RANKDIRS:
        raise ValueError(f"rankdir must be one of {', '.join(RANKDIRS)}, got {rankdir!r}")
    plan = compiled.plan
    node_ids = list(compiled.nodes) + [n for n in plan.nodes if n not in compiled.nodes]
    marks = _sort_marks(compiled, node_ids)
    known = set(node_ids)
    missing_inputs = list(
        dict.fromkeys(src for nid in node_ids for src in plan.nodes[nid].inputs if src not in known)
    )
    uses = _resource_uses(compiled, node_ids)
    undeclared = list(dict.fromkeys(rid for _, rid, _ in uses if rid not in plan.resources))

    w = DotWriter(plan.name or "plan")
    w.comment("Generated by `plangraph render`; regenerate instead of editing.")
    w.defaults(
        "graph",
        {
            "rankdir": rankdir,
            "label": _title(compiled, marks, profile),
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

    if plan.resources or undeclared:
        w.blank()
        w.comment("resources: shared state, referenced as @id (not dataflow)")
    for rid in plan.resources:
        res = compiled.resources.get(rid)
        raw = plan.resources[rid].params
        rmarks = marks.resources.get(rid, [])
        kind = res.kind if res is not None else plan.resources[rid].kind
        w.node(
            _resource_name(rid),
            {
                **_style_attrs(RESOURCE_STYLE, rmarks, bool(rmarks)),
                "label": box_label(
                    f"@{rid}",
                    _resource_kind_text(kind, res.params if res else None),
                    _resource_lines(
                        res.params if res else None, raw, res.raw_params if res else {}
                    ),
                    rmarks,
                ),
                "tooltip": tooltip(rmarks, f"@{rid}: {kind}"),
            },
        )
    for rid in undeclared:
        w.node(
            _resource_name(rid),
            {
                **RESOURCE_STYLE.attrs(),
                "style": "dashed,filled",
                "fillcolor": MISSING_STYLE.fill,
                "color": ERROR_COLOR,
                "label": box_label(f"@{rid}", "not declared", []),
                "tooltip": f"@{rid} is referenced but not declared in resources",
            },
        )

    def emit(nid: str) -> None:
        node = compiled.nodes.get(nid)
        raw_node = plan.nodes[nid]
        sig = node.signature if node is not None else None
        style = category_style(sig.category if sig is not None else None)
        nmarks = marks.nodes.get(nid, [])
        flagged = nid in marks.flagged_nodes
        attrs = _style_attrs(style, nmarks, flagged)
        subtitle = raw_node.op if sig is not None else f"{raw_node.op} (unknown op)"
        if node is not None and node.placement == "actors":
            # after the passes: also a pure map moved onto the workers (worker-side-maps)
            subtitle += " · on rollout workers"
        # The op's one-line summary as a hover text, without its reST backticks.
        doc = sig.doc.split("\n", 1)[0] if sig is not None and sig.doc else raw_node.op
        doc = doc.replace("``", "")
        notes: list[str] = []
        if profile is not None:
            notes = heat.node_lines(profile, nid)
            attrs["fillcolor"] = (
                heat.heat_color(profile.share(nid))
                if nid in profile.nodes
                else heat.NOT_PROFILED_FILL
            )
        attrs["label"] = box_label(
            nid,
            subtitle,
            _param_lines(node, raw_node.params, nid, marks.params),
            nmarks,
            notes=notes,
            note_color=TEXT_COLOR,
        )
        attrs["tooltip"] = tooltip(nmarks, "\n".join([f"{nid}: {doc}", *notes]))
        if nid == compiled.output:
            attrs["tooltip"] = f"{attrs['tooltip']}\n(plan output)"
        w.node(nid, attrs)

    w.blank()
    w.comment("operators, in topological order")
    # What runs in each rollout worker (a raw source and its per-shard operators, or the
    # maps pass worker-side-maps moved there) is drawn in one box per rollout source, at
    # the place of the source.
    regions = compiled.shard_regions()
    region_of = {nid: src for src, ids in regions.items() for nid in ids}
    for nid in node_ids:
        src = region_of.get(nid)
        if src is None:
            emit(nid)
        elif nid == src:
            _begin_worker_box(w, src, compiled.worker_set_of(src))
            for member in regions[src]:
                emit(member)
            w.end_subgraph()
    for src in missing_inputs:
        w.node(
            src,
            {
                **MISSING_STYLE.attrs(),
                "label": box_label(src, "no such node", []),
                "tooltip": f"{brief(src)} is named as an input but the plan defines no such node",
            },
        )

    w.blank()
    w.comment("dataflow edges, labelled with the inferred port type")
    for nid in node_ids:
        for index, src in enumerate(plan.nodes[nid].inputs):
            w.edge(src, nid, _data_edge_attrs(compiled, nid, index, marks, profile))
    # What is drawn, for the rank checks below: the compiler's dataflow, plus the edges
    # from the placeholders of unknown inputs (drawn, but not part of the plan's graph).
    adj: dict[str, set[str]] = {nid: set(compiled.users(nid)) for nid in compiled.nodes}
    for nid in node_ids:
        for src in plan.nodes[nid].inputs:
            if src not in compiled.nodes:
                adj.setdefault(src, set()).add(nid)

    if uses:
        w.blank()
        w.comment("resource use: dashed, resource -> op reads, op -> resource writes")
    # Reads first: they may pull a resource above its readers. A write that would close a
    # loop (the learner writing the weights its own rollouts read) must not move ranks.
    ordered = sorted(uses, key=lambda u: "read" not in u[2])
    constrained: dict[tuple[str, str], bool] = {}
    for nid, rid, access in ordered:
        rname = _resource_name(rid)
        tail, head = (rname, nid) if "read" in access else (nid, rname)
        ok = not _has_path(adj, head, tail)
        if ok:
            adj.setdefault(tail, set()).add(head)
        constrained[(nid, rid)] = ok
    for nid, rid, access in uses:
        attrs = dict(RESOURCE_EDGE)
        both = access == {"read", "write"}
        verb = "reads+writes" if both else ("reads" if "read" in access else "writes")
        if both:
            attrs["dir"] = "both"
        attrs["label"] = edge_label([verb])
        attrs["tooltip"] = f"{nid} {verb} @{rid}"
        if not constrained[(nid, rid)]:
            attrs["constraint"] = False
        if rid in undeclared:
            attrs["color"] = attrs["fontcolor"] = ERROR_COLOR
        if "read" in access:
            w.edge(_resource_name(rid), nid, attrs)
        else:
            w.edge(nid, _resource_name(rid), attrs)

    _legend(w, compiled, node_ids, bool(plan.resources or undeclared), profile)
    return w.source()


def _resource_name(rid: str) -> str:
    # "@" cannot start a plan id, so resource and node names never collide.
    return f"@{rid}"


def _data_edge_attrs(
    compiled: CompiledPlan,
    nid: str,
    index: int,
    marks: _Marks,
    profile: RunProfile | None = None,
) -> dict[str, Any]:
    node = compiled.nodes.get(nid)
    src = compiled.plan.nodes[nid].inputs[index]
    port_type = None
    if node is not None and index < len(node.input_types):
        port_type = node.input_types[index]
    if port_type is None and src in compiled.nodes:
        port_type = compiled.nodes[src].output_type
    lines = [str(port_type) if port_type is not None else "?"]
    # Heavier than resource edges: the dataflow spine stays straight.
    attrs: dict[str, Any] = {**DATA_EDGE, "weight": 4}
    params = node.params if node is not None else None
    merge_note = _merge_input_note(params, node.raw_params if node else {}, index)
    if merge_note is not None:
        note, emitted = merge_note
        lines.append(note)
        if not emitted:
            attrs.update(PASSIVE_EDGE)
    rate = heat.edge_note(profile, src) if profile is not None else None
    if rate is not None:
        lines.append(rate)
    emarks = marks.edges.get((nid, index), [])
    if emarks:
        worst = "error" if any(m.severity == "error" for m in emarks) else "warning"
        attrs.update(ERROR_EDGE if worst == "error" else WARNING_EDGE)
    attrs["label"] = edge_label(lines, emarks)
    attrs["tooltip"] = tooltip(emarks, f"{src} -> {nid}: {lines[0]}")
    return attrs


def _merge_input_note(
    params: Any, resolved: Mapping[str, Any], index: int
) -> tuple[str, bool] | None:
    """``("input 1 · weight 2 · output", True)`` for an op with ``output_indexes``."""
    if params is None or not hasattr(params, "output_indexes"):
        return None
    parts = [f"input {index}"]
    weights = resolved.get("weights", getattr(params, "weights", None))
    if weights is not None and index < len(weights):
        parts.append(f"weight {weights[index]}")
    indexes = params.output_indexes
    emitted = indexes is None or index in indexes
    parts.append("output" if emitted else "driven, not output")
    return " \u00b7 ".join(parts), emitted


def _legend(
    w: DotWriter,
    compiled: CompiledPlan,
    node_ids: list[str],
    resources: bool,
    profile: RunProfile | None = None,
) -> None:
    """A column of sample boxes (one per category present) and the edge conventions."""
    if not node_ids:  # nothing drawn (the plan did not load): nothing to explain
        return
    cats = {
        compiled.nodes[n].category
        for n in node_ids
        if n in compiled.nodes and compiled.nodes[n].category is not None
    }
    entries: list[tuple[str, dict[str, Any]]] = [
        (cat, style.attrs()) for cat, style in CATEGORY_STYLES.items() if cat in cats
    ]
    if profile is not None:  # the fill is the heat: shape and border tell the category
        entries = [(cat, {**attrs, "fillcolor": "#ffffff"}) for cat, attrs in entries]
    if resources:
        entries.append(("resource", RESOURCE_STYLE.attrs()))
    if compiled.diagnostics:
        entries.append(("diagnostic", {**MARKED_STYLE.attrs(), "color": ERROR_COLOR}))
    if profile is not None:
        for share in (0.0, 0.5, 1.0):
            entries.append(
                (
                    f"{100 * share:.0f}% of wall time",
                    {"shape": "box", "style": "filled", "fillcolor": heat.heat_color(share)},
                )
            )
    edge_rows = [
        f'<FONT COLOR="{DATA_EDGE["color"]}">solid: dataflow, labelled with the item type</FONT>'
    ]
    if any(hasattr(n.params, "output_indexes") for n in compiled.nodes.values()):
        edge_rows.append(
            f'<FONT COLOR="{PASSIVE_EDGE["color"]}">grey: input driven, its items not output</FONT>'
        )
    if resources:
        edge_rows.append(
            f'<FONT COLOR="{RESOURCE_EDGE["color"]}">dashed: an op reads / writes a resource</FONT>'
        )
    if profile is not None:
        edge_rows.append(
            "fill: the node's share of wall time (shape and border: its category); "
            "call: one item it emitted"
        )
    w.blank()
    w.comment("legend (same style table as the nodes), below the plan output")
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
    names = [_LEGEND_PREFIX + name for name, _ in entries]
    for name, (label, attrs) in zip(names, entries, strict=True):
        w.node(name, {**attrs, "label": Html(escape_html(label)), "fontsize": 9, "height": 0.3})
    names.append(_LEGEND_PREFIX + "edges")
    w.node(
        names[-1],
        {
            "shape": "plaintext",
            "fontsize": 9,
            "label": Html("".join(f'{row}<BR ALIGN="LEFT"/>' for row in edge_rows)),
        },
    )
    # Rows of LEGEND_ROW samples (a column in LR), chained below one another.
    rows = [names[i : i + _LEGEND_ROW] for i in range(0, len(names), _LEGEND_ROW)]
    for number, row in enumerate(rows):
        w.begin_subgraph(f"{_LEGEND_PREFIX}row {number}")
        w.defaults("graph", {"rank": "same"})
        for a, b in itertools.pairwise(row):
            w.edge(a, b, {"style": "invis"})
        w.end_subgraph()
    for upper, lower in itertools.pairwise(rows):
        w.edge(upper[0], lower[0], {"style": "invis"})
    w.end_subgraph()
    anchor = (
        compiled.output if compiled.output in node_ids else (node_ids[-1] if node_ids else None)
    )
    if anchor is not None:
        w.edge(anchor, rows[0][0], {"style": "invis"})


def _resource_kind_text(kind: str, params: Any) -> str:
    """The kind line of a resource box, with where it lives when not in the dataflow (a
    kind as written, newlines escaped: Graphviz refuses a label line of only whitespace)."""
    kind = printable(kind, newlines=False)
    if kind == "LearnerThread":
        return f"{kind} · thread in the driver"
    shards = getattr(params, "num_shards", None)
    if kind == "ReplayActors" and isinstance(shards, int):
        return f"{kind} · {shards} shard actor{'s' if shards != 1 else ''}"
    return kind
