"""The plan compiler: load, resolve, check and type a plan; report every problem at once.

``analyze(plan)`` always returns a :class:`CompiledPlan` (best effort for broken plans,
with ``.diagnostics``); ``compile(plan)`` returns it only when it has no errors and
raises :class:`PlanValidationError` otherwise. Imports pydantic and networkx only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plangraph.compiler import graph_checks as _graph_checks
from plangraph.compiler import resolve as _resolve
from plangraph.compiler.compiled import CompiledNode, CompiledPlan, CompiledResource, PassRecord
from plangraph.compiler.context import CHECKS, Check, Context, check
from plangraph.compiler.diagnostics import CODES, Diagnostic, PlanValidationError
from plangraph.compiler.loader import load
from plangraph.ir.plan import Plan, canonical_json_value
from plangraph.ir.source import Location

__all__ = [
    "CHECKS",
    "CODES",
    "Check",
    "CompiledNode",
    "CompiledPlan",
    "CompiledResource",
    "Diagnostic",
    "PlanValidationError",
    "analyze",
    "check",
    "compile",
    "load_plan",
]

del _graph_checks, _resolve  # imported for their registered checks (order matters)


def load_plan(source: Any) -> Plan:
    """Load a plan from a path (``.json``/``.py``), JSON text or dict, without checking
    it beyond its shape. Raises :class:`PlanValidationError` if it cannot be loaded."""
    loaded = load(source)
    if loaded.diagnostics:
        raise PlanValidationError(loaded.diagnostics)
    return loaded.plan


def analyze(source: Any, config: Mapping[str, Any] | None = None) -> CompiledPlan:
    """Check a plan and infer its types; never raises on a bad plan.

    ``source``: a :class:`Plan`, a path to a ``.json`` or ``.py`` plan, JSON text, or the
    JSON form as a dict. ``config``: overrides for the plan's config defaults. Returns a
    :class:`CompiledPlan` whose ``diagnostics`` hold every problem found (``ok`` is False
    if any is an error). Raises ``TypeError`` only for a ``source`` of the wrong type.
    """
    loaded = load(source)
    overrides: dict[str, Any] = {}
    extra: list[Diagnostic] = []
    for k, v in (config or {}).items():
        try:
            overrides[k] = canonical_json_value(v, f"config override {k!r}")
        except ValueError as exc:
            extra.append(Diagnostic("PG102", str(exc), pointer=f"/config/{k}"))
    ctx = Context(plan=loaded.plan, source=loaded.source, overrides=overrides)
    ctx.diagnostics.extend(loaded.diagnostics)
    ctx.diagnostics.extend(extra)
    records = [PassRecord("load", "Parse the plan and check its shape", len(ctx.diagnostics))]
    for chk in CHECKS:
        before = len(ctx.diagnostics)
        chk.fn(ctx)
        records.append(PassRecord(chk.name, chk.doc, len(ctx.diagnostics) - before))
    return _assemble(ctx, tuple(records))


def compile(source: Any, config: Mapping[str, Any] | None = None) -> CompiledPlan:
    """Like :func:`analyze`, but raises :class:`PlanValidationError` (carrying all
    diagnostics and the best-effort result) unless the plan is free of errors."""
    compiled = analyze(source, config=config)
    if not compiled.ok:
        raise PlanValidationError(compiled.diagnostics, compiled)
    return compiled


def _node_location(ctx: Context, nid: str) -> Location | None:
    return ctx.source.locate(f"/nodes/{nid}", key=True) if ctx.source else None


def _assemble(ctx: Context, records: tuple[PassRecord, ...]) -> CompiledPlan:
    consumers: dict[str, list[str]] = {}
    for nid, node in ctx.plan.nodes.items():
        for src in node.inputs:
            consumers.setdefault(src, []).append(nid)
    nodes: dict[str, CompiledNode] = {}
    for nid in ctx.order:
        node = ctx.plan.nodes[nid]
        nodes[nid] = CompiledNode(
            id=nid,
            op=node.op,
            signature=ctx.sigs.get(nid),
            params=ctx.params.get(nid),
            inputs=tuple(node.inputs),
            input_types=ctx.input_types.get(nid, tuple(None for _ in node.inputs)),
            output_type=ctx.types.get(nid),
            location=_node_location(ctx, nid),
            raw_params=dict(ctx.raw_params.get(nid, {})),
            consumers=tuple(consumers.get(nid, ())),
        )
    resources = {
        rid: CompiledResource(
            id=rid,
            kind=res.kind,
            params=ctx.res_params.get(rid),
            readers=tuple(ctx.readers.get(rid, ())),
            writers=tuple(ctx.writers.get(rid, ())),
            location=ctx.source.locate(f"/resources/{rid}", key=True) if ctx.source else None,
            raw_params=dict(ctx.res_raw_params.get(rid, {})),
        )
        for rid, res in ctx.plan.resources.items()
    }
    for nid in ctx.graph:
        ctx.graph.nodes[nid]["type"] = ctx.types.get(nid)
    return CompiledPlan(
        plan=ctx.plan,
        config=ctx.config,
        output=ctx.plan.output,
        nodes=nodes,
        resources=resources,
        graph=ctx.graph,
        diagnostics=tuple(ctx.diagnostics),
        pass_records=records,
    )
