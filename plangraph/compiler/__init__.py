"""The plan compiler: load, resolve, check and type a plan; report every problem at once.

``analyze(plan)`` always returns a :class:`CompiledPlan` (best effort for broken plans,
with ``.diagnostics``); ``compile(plan)`` returns it only when it has no errors and
raises :class:`PlanValidationError` otherwise. The checks run in the order that
:mod:`plangraph.compiler.pipeline` lists them (``CHECKS``); :func:`register_check` adds
one. Imports pydantic and networkx only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from plangraph.compiler import pipeline as _pipeline
from plangraph.compiler.capacity import Capacity
from plangraph.compiler.compiled import CompiledNode, CompiledPlan, CompiledResource, PassRecord
from plangraph.compiler.context import Context
from plangraph.compiler.diagnostics import CODES, Diagnostic, PlanValidationError
from plangraph.compiler.loader import load
from plangraph.compiler.pipeline import Check, register_check, run_checks
from plangraph.compiler.topology import Topology
from plangraph.ir.plan import Plan, canonical_json_value
from plangraph.ir.source import Location

__all__ = [
    "CHECKS",
    "CODES",
    "Capacity",
    "Check",
    "CompiledNode",
    "CompiledPlan",
    "CompiledResource",
    "Diagnostic",
    "PlanValidationError",
    "analyze",
    "compile",
    "load_plan",
    "register_check",
]


def __getattr__(name: str) -> Any:
    # CHECKS is the pipeline as it is now: register_check makes a new tuple, so the name
    # is looked up on each access instead of bound once at import.
    if name == "CHECKS":
        return _pipeline.checks()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_plan(source: Any) -> Plan:
    """Load a plan from a path (``.json``/``.py``), JSON text or dict, without checking
    it beyond its shape. Raises :class:`PlanValidationError` if it cannot be loaded."""
    loaded = load(source)
    if loaded.diagnostics:
        raise PlanValidationError(loaded.diagnostics)
    return loaded.plan


def analyze(
    source: Any,
    config: Mapping[str, Any] | None = None,
    *,
    checks: Sequence[Check] | None = None,
    capacity: Capacity | None = None,
) -> CompiledPlan:
    """Check a plan and infer its types; never raises on a bad plan.

    ``source``: a :class:`Plan`, a path to a ``.json`` or ``.py`` plan, JSON text, or the
    JSON form as a dict. ``config``: overrides for the plan's config defaults.
    ``checks``: the pipeline to run after loading (default: ``CHECKS``, the built-in
    checks plus registered ones); a check that crashes is reported as PG199.
    ``capacity``: the machine or cluster the plan will run on, for the rollout-worker
    checks (default: this machine, ``Capacity.local()``). Returns a
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
    ctx = Context(
        plan=loaded.plan,
        source=loaded.source,
        overrides=overrides,
        capacity=capacity if capacity is not None else Capacity.local(),
    )
    ctx.diagnostics.extend(loaded.diagnostics)
    ctx.diagnostics.extend(extra)
    records = [PassRecord("load", "Parse the plan and check its shape", len(ctx.diagnostics))]
    records += run_checks(ctx, _pipeline.checks() if checks is None else checks)
    return _assemble(ctx, tuple(records))


def compile(
    source: Any, config: Mapping[str, Any] | None = None, *, capacity: Capacity | None = None
) -> CompiledPlan:
    """Like :func:`analyze`, but raises :class:`PlanValidationError` (carrying all
    diagnostics and the best-effort result) unless the plan is free of errors."""
    compiled = analyze(source, config=config, capacity=capacity)
    if not compiled.ok:
        raise PlanValidationError(compiled.diagnostics, compiled)
    return compiled


def _node_location(ctx: Context, nid: str) -> Location | None:
    return ctx.source.locate(f"/nodes/{nid}", key=True) if ctx.source else None


def _assemble(ctx: Context, records: tuple[PassRecord, ...]) -> CompiledPlan:
    """Freeze what the checks found into one record per node and the one topology."""
    topo = ctx.topology
    if not topo.graph and ctx.plan.nodes:  # check "graph" did not run (or crashed)
        topo = Topology.build({nid: (n.op, n.inputs) for nid, n in ctx.plan.nodes.items()})
    fed_by = _fed_by(ctx, topo)
    nodes: dict[str, CompiledNode] = {}
    for nid in topo.topological_order():
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
            users=topo.users(nid),
            fed_by=fed_by[nid],
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
    for nid in topo.graph:
        topo.graph.nodes[nid]["type"] = ctx.types.get(nid)
    return CompiledPlan(
        plan=ctx.plan,
        config=ctx.config,
        output=ctx.plan.output,
        nodes=nodes,
        resources=resources,
        topology=topo,
        diagnostics=tuple(ctx.diagnostics),
        pass_records=records,
    )


def _fed_by(ctx: Context, topo: Topology) -> dict[str, dict[str, tuple[str, ...]]]:
    """Per node: resource kind -> ids of the resources of that kind read upstream of it.

    Reads come from check "resources" (``ctx.readers``: the ops' resource params with
    access "read", kinds checked), so any op that reads a replay buffer counts, whatever
    its name. Computed once here; the runtime reads it from the compiled plan.
    """
    reads: dict[str, list[str]] = {}
    for rid in ctx.plan.resources:  # resource declaration order
        for nid in ctx.readers.get(rid, ()):
            reads.setdefault(nid, []).append(rid)
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for nid in ctx.plan.nodes:
        found = {rid for anc in topo.ancestors(nid) for rid in reads.get(anc, ())}
        by_kind: dict[str, tuple[str, ...]] = {}
        for rid, res in ctx.plan.resources.items():
            if rid in found:
                by_kind[res.kind] = (*by_kind.get(res.kind, ()), rid)
        out[nid] = by_kind
    return out
