"""Checks on per-shard streams (``Shard[T]``): where they flow, and that they are gathered.

A ``Shard[T]`` stream lives on the rollout workers of one WorkerSet, one shard per worker
(``ParallelRollouts(mode="raw")``, then per-shard operators, ``placement="shard"``); only
``GatherShards`` brings it to the driver. The "types" check leaves an edge between a shard
and a driver port to this check, which says which side is wrong:

* PG200: a shard stream fed to a driver operator (even one whose port takes ``Any``);
* PG201: a driver stream fed to a per-shard operator or to ``GatherShards``;
* PG202: the plan output is a shard stream (nothing gathers it);
* PG203: a per-shard operator (or ``GatherShards``) reading the shards of two different
  WorkerSets: the shards of one worker set are not those of another.

Also fills ``ctx.shard_sets``: node id -> the worker sets whose shards its stream is.
"""

from __future__ import annotations

from plangraph.compiler.context import Context
from plangraph.ir.refs import resource_ref_id
from plangraph.ir.types import is_shard
from plangraph.text import brief

__all__ = ["GATHER", "check_shards", "is_shard_op", "shard_worker_sets"]

GATHER = "GatherShards"
_SOURCE = "ParallelRollouts"


def is_shard_op(ctx: Context, nid: str) -> bool:
    """Whether node ``nid`` runs a per-shard operator (``placement="shard"``)."""
    sig = ctx.sigs.get(nid)
    return sig is not None and sig.placement == "shard"


def _reads_shards(ctx: Context, nid: str) -> bool:
    """Whether node ``nid``'s ports are ``Shard[...]``: a per-shard op or GatherShards."""
    return is_shard_op(ctx, nid) or ctx.plan.nodes[nid].op == GATHER


def _makes_shards(ctx: Context, nid: str) -> bool:
    """Whether ``nid`` is where a shard stream legitimately comes from (a raw
    ``ParallelRollouts``, a per-shard op): a driver node passing one on (``Duplicate``)
    was reported already, where it read it."""
    return ctx.plan.nodes[nid].op == _SOURCE or is_shard_op(ctx, nid)


def shard_worker_sets(ctx: Context) -> dict[str, tuple[str, ...]]:
    """Node id -> the worker sets (resource ids, declaration order) whose shards the
    node's ``Shard`` stream holds: a raw ``ParallelRollouts``' own, a per-shard op's
    inputs'. Nodes whose stream is not a shard stream are absent."""
    out: dict[str, tuple[str, ...]] = {}
    order = list(ctx.plan.resources)
    for nid in ctx.topology.topological_order():
        if not is_shard(ctx.types.get(nid)):
            continue
        node = ctx.plan.nodes[nid]
        if node.op == _SOURCE:
            rid = resource_ref_id(getattr(ctx.params.get(nid), "workers", None))
            out[nid] = (rid,) if rid is not None else ()
            continue
        found: set[str] = set()
        for src in node.inputs:
            found.update(out.get(src, ()))
        out[nid] = tuple(sorted(found, key=lambda r: order.index(r) if r in order else len(order)))
    return out


def check_shards(ctx: Context) -> None:
    """Shard streams go only to per-shard operators and GatherShards, and are gathered."""
    sets = shard_worker_sets(ctx)
    ctx.shard_sets = sets
    # Per-shard ops placed after a driver op (PG201), and the per-shard ops after them:
    # their Shard output reaching a driver op is the same mistake, not a second PG200.
    misplaced: set[str] = set()
    for nid in ctx.topology.topological_order():
        node = ctx.plan.nodes[nid]
        if nid in ctx.topology.cyclic or ctx.sigs.get(nid) is None:
            continue
        reads_shards = _reads_shards(ctx, nid)
        if is_shard_op(ctx, nid) and misplaced.intersection(node.inputs):
            misplaced.add(nid)
        for i, src in enumerate(node.inputs):
            t = ctx.types.get(src) if src in ctx.plan.nodes else None
            if t is None or t.is_any:
                continue
            pointer = f"/nodes/{nid}/inputs/{i}"
            src_op = ctx.plan.nodes[src].op
            if is_shard(t) and not reads_shards and _makes_shards(ctx, src):
                if src in misplaced:
                    continue
                ctx.report(
                    "PG200",
                    f"{node.op} {brief(nid)} runs on the driver but reads {src_op} "
                    f"{brief(src)}, a per-shard stream ({t}) that lives on the rollout "
                    "workers",
                    node=nid,
                    pointer=pointer,
                    hint=f"gather it first with GatherShards: insert "
                    f'{{"op": "GatherShards", "inputs": ["{src}"], "params": {{"mode": '
                    f'"sync"}}}} between {brief(src)} and {brief(nid)}',
                )
            elif not is_shard(t) and reads_shards:
                if src_op == _SOURCE:
                    hint = (
                        f'set "mode": "raw" on {brief(src)}, whose rollouts then stay on the '
                        "workers (Shard[SampleBatch])"
                    )
                elif node.op == GATHER:
                    hint = f"{brief(src)} is on the driver already: read it without GatherShards"
                else:
                    misplaced.add(nid)
                    hint = _misplaced_hint(ctx, nid, src, str(t))
                what = (
                    "gathers a per-shard stream (Shard[...]) to the driver"
                    if node.op == GATHER
                    else "runs in each rollout worker, on its per-shard stream (Shard[...])"
                )
                ctx.report(
                    "PG201",
                    f"{node.op} {brief(nid)} {what}, but {src_op} {brief(src)} emits {t}, a "
                    "stream on the driver",
                    node=nid,
                    pointer=pointer,
                    hint=hint,
                )
        if reads_shards:
            _check_one_worker_set(ctx, nid, sets)
    out = ctx.plan.output
    if out in ctx.plan.nodes and is_shard(ctx.types.get(out)):
        ctx.report(
            "PG202",
            f"the plan output {brief(out)} ({ctx.plan.nodes[out].op}) is a per-shard stream "
            f"({ctx.types[out]}) that nothing gathers to the driver",
            node=out,
            pointer="/output",
            hint=f'gather it with GatherShards ({{"op": "GatherShards", "inputs": ["{out}"]}}), '
            "train on the gathered batches and report their results "
            "(StandardMetricsReporting)",
        )


def _misplaced_hint(ctx: Context, nid: str, src: str, driver_type: str) -> str:
    """PG201's hint for per-shard op ``nid`` reading driver node ``src`` (not a source):
    move it before the GatherShards upstream of ``src``, if there is one, where it reads
    the shards; or make it a driver op."""
    op = ctx.plan.nodes[nid].op
    as_driver = (
        f"to map {brief(src)}'s driver items, register {op} with placement='driver' and "
        f"inputs=['{driver_type}']"
    )
    gather = _gather_upstream(ctx, src)
    if gather is None:
        return (
            "a per-shard operator reads ParallelRollouts(mode='raw') or another per-shard "
            f"operator; {as_driver}"
        )
    before = ", ".join(brief(i) for i in ctx.plan.nodes[gather].inputs)
    return (
        f"move {brief(nid)} before GatherShards {brief(gather)}, onto the shards it gathers "
        f"({before} -> {brief(nid)} -> {brief(gather)}, and {brief(nid)}'s readers read "
        f"{brief(src)}); or, {as_driver}"
    )


def _gather_upstream(ctx: Context, nid: str) -> str | None:
    """The nearest GatherShards at or above ``nid`` (breadth first over its inputs)."""
    seen, queue = {nid}, [nid]
    while queue:
        cur = queue.pop(0)
        node = ctx.plan.nodes.get(cur)
        if node is None:
            continue
        if node.op == GATHER:
            return cur
        for src in node.inputs:
            if src not in seen:
                seen.add(src)
                queue.append(src)
    return None


def _check_one_worker_set(ctx: Context, nid: str, sets: dict[str, tuple[str, ...]]) -> None:
    """PG203: the shards node ``nid`` reads all come from one worker set."""
    node = ctx.plan.nodes[nid]
    if any(len(sets.get(src, ())) > 1 for src in node.inputs):
        return  # reported where the two worker sets met
    seen: dict[str, str] = {}  # worker set -> the first input reading it
    for i, src in enumerate(node.inputs):
        for rid in sets.get(src, ()):
            if rid in seen or not seen:
                seen.setdefault(rid, src)
                continue
            first_rid, first_src = next(iter(seen.items()))
            ctx.report(
                "PG203",
                f"{node.op} {brief(nid)} reads the shards of worker set {brief(rid)} (from "
                f"{brief(src)}) and of worker set {brief(first_rid)} (from {brief(first_src)}): "
                "a per-shard operator runs in each worker of one WorkerSet",
                node=nid,
                pointer=f"/nodes/{nid}/inputs/{i}",
                hint="gather each worker set's shards with its own GatherShards and merge the "
                "driver streams (Union, Concurrently), or sample both from one WorkerSet",
            )
            return
