"""The plan compiler: load, resolve, check and type a plan; report every problem at once.

``analyze(plan)`` always returns a :class:`CompiledPlan` (best effort for broken plans,
with ``.diagnostics``); ``compile(plan)`` returns it only when it has no errors and
raises :class:`PlanValidationError` otherwise. The checks run in the order that
:mod:`plangraph.compiler.pipeline` lists them (``CHECKS``); :func:`register_check` adds
one. Then, on a plan without errors, the optimisation passes
(:mod:`plangraph.compiler.passes`) make the executed plan (``CompiledPlan.executed``);
``disable_passes`` turns some off. Imports pydantic only; networkx where a plan has a
cycle, for ``CompiledPlan.graph`` and for plan diffs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from plangraph.compiler import pipeline as _pipeline
from plangraph.compiler.capacity import Capacity
from plangraph.compiler.compiled import CompiledNode, CompiledPlan, CompiledResource, PassRecord
from plangraph.compiler.context import Context
from plangraph.compiler.diagnostics import CODES, Diagnostic, PlanValidationError
from plangraph.compiler.loader import load
from plangraph.compiler.passes import Draft, PassResult, check_pass_names, pass_names, run_passes
from plangraph.compiler.pipeline import Check, register_check, run_checks
from plangraph.compiler.topology import Topology
from plangraph.ir.limits import HINTS as LIMIT_HINTS
from plangraph.ir.limits import screen
from plangraph.ir.plan import Plan, canonical_json_value
from plangraph.ir.source import Location
from plangraph.text import brief

__all__ = [
    "CHECKS",
    "CODES",
    "Capacity",
    "Check",
    "CompiledNode",
    "CompiledPlan",
    "CompiledResource",
    "Diagnostic",
    "PassResult",
    "PlanValidationError",
    "analyze",
    "check_pass_names",
    "compile",
    "load_plan",
    "pass_names",
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
    disable_passes: Iterable[str] = (),
    override_syntax: Literal["python", "cli"] = "python",
) -> CompiledPlan:
    """Check a plan and infer its types, then optimise it; never raises on a bad plan.

    ``source``: a :class:`Plan`, a path to a ``.json`` or ``.py`` plan, JSON text, or the
    JSON form as a dict. ``config``: overrides for the plan's config defaults.
    ``checks``: the pipeline to run after loading (default: ``CHECKS``, the built-in
    checks plus registered ones); a check that crashes is reported as PG199.
    ``capacity``: the machine or cluster the plan will run on, for the rollout-worker
    checks (default: this machine, ``Capacity.local()``). ``disable_passes``: names of
    optimisation passes to turn off (``pass_names()``; ``"all"``: every one).
    ``override_syntax``: how hints spell an override, ``config={'lr': 0.01}`` (Python) or
    ``--set lr=0.01`` (``"cli"``, the commands' own). Returns a
    :class:`CompiledPlan` whose ``diagnostics`` hold every problem found (``ok`` is False
    if any is an error) and whose ``executed`` plan is the passes' result (the plan itself
    when it has errors: those are not optimised).

    Raises:
        TypeError: ``source`` is of the wrong type.
        UnknownPassError: ``disable_passes`` names no pass (did-you-mean in the message).
    """
    disabled = check_pass_names(disable_passes)
    loaded = load(source)
    overrides: dict[str, Any] = {}
    extra: list[Diagnostic] = []
    for k, v in (config or {}).items():
        # A Python caller's override may be anything: bounded first (depth, size, 64-bit
        # integers; without recursion), then converted.
        screened, problems = screen(v, f"/config/{_pointer_token(k)}")
        fatal = [p for p in problems if p.fatal]
        if fatal:
            extra.extend(
                Diagnostic(
                    "PG102" if p.kind == "nonfinite" else "PG105",
                    f"config override {brief(k)}: {p.message}",
                    pointer=p.pointer,
                    hint=LIMIT_HINTS[p.kind],
                )
                for p in fatal
            )
            continue
        try:
            overrides[k] = canonical_json_value(screened, f"config override {k!r}")
        except ValueError as exc:
            extra.append(Diagnostic("PG102", str(exc), pointer=f"/config/{k}"))
    ctx = Context(
        plan=loaded.plan,
        source=loaded.source,
        overrides=overrides,
        capacity=capacity if capacity is not None else Capacity.local(),
        disabled_passes=disabled,
        override_syntax=override_syntax,
    )
    ctx.diagnostics.extend(loaded.diagnostics)
    ctx.diagnostics.extend(extra)
    records = [PassRecord("load", "Parse the plan and check its shape.", len(ctx.diagnostics))]
    records += run_checks(ctx, _pipeline.checks() if checks is None else checks)
    draft: Draft | None = None
    results: tuple[PassResult, ...] = ()
    if not any(d.is_error for d in ctx.diagnostics):
        draft, results = run_passes(ctx, disabled)
    return _assemble(ctx, tuple(records), draft, results)


def _pointer_token(key: Any) -> str:
    """``key`` as one JSON pointer token (``~`` and ``/`` escaped)."""
    text = key if isinstance(key, str) else brief(key)
    return text.replace("~", "~0").replace("/", "~1")


def compile(
    source: Any,
    config: Mapping[str, Any] | None = None,
    *,
    capacity: Capacity | None = None,
    disable_passes: Iterable[str] = (),
) -> CompiledPlan:
    """Like :func:`analyze`, but raises :class:`PlanValidationError` (carrying all
    diagnostics and the best-effort result) unless the plan is free of errors."""
    compiled = analyze(source, config=config, capacity=capacity, disable_passes=disable_passes)
    if not compiled.ok:
        raise PlanValidationError(compiled.diagnostics, compiled)
    return compiled


def _node_location(ctx: Context, nid: str) -> Location | None:
    return ctx.source.locate(f"/nodes/{nid}", key=True) if ctx.source else None


def _placements(
    ctx: Context, draft: Draft | None
) -> dict[str, tuple[str, str | None, tuple[str, ...], tuple[str, ...]]]:
    """Per node, after the passes: ``(placement, host, stage, worker_maps)`` (see
    :class:`CompiledNode`)."""
    hosts = draft.hosts if draft is not None else {}
    stage_of = {n: st for st in (draft.stages if draft is not None else ()) for n in st}
    learners = {
        nid: rid
        for rid, res in ctx.plan.resources.items()
        if res.kind == "LearnerThread"
        for nid in ctx.writers.get(rid, ())
    }
    order = ctx.topology.topological_order()
    out = {}
    for nid in ctx.plan.nodes:
        sig = ctx.sigs.get(nid)
        host: str | None = hosts.get(nid) or learners.get(nid)
        if sig is not None and sig.placement == "shard":
            # A per-shard op runs in the workers of the raw rollout source it reads.
            where, host = "actors", _shard_source(ctx, nid)
        elif nid in hosts or (sig is not None and sig.placement == "actors"):
            where = "actors"
        elif sig is not None and sig.placement == "aggregators":
            where = "aggregators"
        elif nid in learners:
            where = "learner thread"
        else:
            where = "driver"
        maps = tuple(n for n in order if hosts.get(n) == nid)
        out[nid] = (where, host, stage_of.get(nid, ()), maps)
    return out


def _shard_source(ctx: Context, nid: str) -> str | None:
    """The raw ``ParallelRollouts`` whose shards per-shard node ``nid`` maps (up its
    first inputs), or None (an unknown input, a cycle)."""
    seen: set[str] = set()
    while nid in ctx.plan.nodes and nid not in seen:
        seen.add(nid)
        node = ctx.plan.nodes[nid]
        if node.op == "ParallelRollouts":
            return nid
        if not node.inputs:
            return None
        nid = node.inputs[0]
    return None


def _assemble(
    ctx: Context,
    records: tuple[PassRecord, ...],
    draft: Draft | None = None,
    results: tuple[PassResult, ...] = (),
) -> CompiledPlan:
    """Freeze what the checks found into one record per node and the one topology; with
    the passes' draft, also the executed plan."""
    topo = ctx.topology
    if not topo and ctx.plan.nodes:  # check "graph" did not run (or crashed)
        topo = Topology.build({nid: (n.op, n.inputs) for nid, n in ctx.plan.nodes.items()})
    fed_by = _fed_by(ctx, topo)
    placed = _placements(ctx, draft)
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
            placement=placed[nid][0],
            host=placed[nid][1],
            stage=placed[nid][2],
            worker_maps=placed[nid][3],
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
    topo.set_node_types(ctx.types)
    declared = CompiledPlan(
        plan=ctx.plan,
        config=ctx.config,
        output=ctx.plan.output,
        nodes=nodes,
        resources=resources,
        topology=topo,
        diagnostics=tuple(ctx.diagnostics),
        pass_records=records,
        optimisations=results,
        disabled_passes=ctx.disabled_passes,
        capacity=ctx.capacity,
    )
    if draft is None:
        return declared
    executed = dataclasses.replace(
        declared,
        nodes={
            nid: dataclasses.replace(n, params=draft.params.get(nid)) for nid, n in nodes.items()
        },
        resources={
            rid: dataclasses.replace(
                r, params=draft.res_params.get(rid), sized_for=draft.sized_for.get(rid)
            )
            for rid, r in resources.items()
        },
    )
    return dataclasses.replace(declared, executed_plan=executed)


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
