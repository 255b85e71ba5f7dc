"""Checks on ``AggregateBatches`` (IMPALA's tree aggregation): PG215, PG216, PG217.

At run time an ``AggregateBatches`` takes its source's place: its aggregation actors send
the sample requests to the source's rollout workers themselves and the driver never pulls
the source's own stream. So the source must be an ``async`` ``ParallelRollouts`` (a
``bulk_sync`` round is concatenated in the driver from every worker), read directly (an
operator in between would never see an item), of the same worker set, and there must be
at least one rollout worker per aggregator. The checks read validated params only.
"""

from __future__ import annotations

from plangraph.compiler.context import Context, join_hints
from plangraph.ir.refs import resource_ref_id
from plangraph.ops.resources import WorkerSetParams
from plangraph.text import brief, count

__all__ = ["check_aggregation"]


def check_aggregation(ctx: Context) -> None:
    """AggregateBatches reads an async ParallelRollouts of its worker set directly, and
    has at most one aggregation actor per rollout worker."""
    for nid, node in ctx.plan.nodes.items():
        if node.op != "AggregateBatches" or len(node.inputs) != 1:
            continue
        params = ctx.params.get(nid)
        if params is None or nid in ctx.topology.cyclic:
            continue
        src = node.inputs[0]
        source = ctx.plan.nodes.get(src)
        if source is None:
            continue  # an unknown input: PG111 already
        sp = ctx.params.get(src)
        if source.op != "ParallelRollouts":
            ctx.report(
                "PG215",
                f"AggregateBatches {brief(nid)} reads {brief(src)} ({source.op}), but its "
                "aggregation actors sample the rollout workers of a ParallelRollouts "
                "themselves, so it must read one directly: an operator in between would "
                "never see an item",
                node=nid,
                pointer=f"/nodes/{nid}/inputs/0",
                hint='read ParallelRollouts(mode="async") directly; a per-fragment map '
                "belongs on the rollout workers (the worker set's wrappers), a per-batch one "
                "after AggregateBatches",
            )
            continue
        if sp is None:
            continue
        if getattr(sp, "mode", None) != "async":
            ctx.report(
                "PG215",
                f"AggregateBatches {brief(nid)} reads {brief(src)}, a bulk_sync "
                "ParallelRollouts: each of its items is every worker's fragment, gathered "
                "and concatenated in the driver, which is what the aggregation actors are "
                "there to take off the driver",
                node=src,
                pointer=f"/nodes/{src}/params/mode",
                hint=join_hints(
                    f'set mode to "async" (/nodes/{src}/params/mode)',
                    ctx.config_hint(source.params, ["mode"], '"async"'),
                ),
            )
            continue
        ws_ref, src_ref = getattr(params, "workers", None), getattr(sp, "workers", None)
        if resource_ref_id(ws_ref) != resource_ref_id(src_ref):
            ctx.report(
                "PG215",
                f"AggregateBatches {brief(nid)} names worker set {ws_ref}, but its source "
                f"{brief(src)} samples {src_ref}: the aggregators sample the source's "
                "workers and send them the weights of the learner policy of their own",
                node=nid,
                pointer=f"/nodes/{nid}/params/workers",
                hint=f"set workers to {src_ref}",
            )
            continue
        rid = resource_ref_id(ws_ref)
        ws = ctx.res_params.get(rid) if rid is not None else None
        if rid is None or not isinstance(ws, WorkerSetParams):
            continue
        n = params.num_aggregation_workers  # type: ignore[attr-defined]
        if n > ws.num_workers:
            has = (
                "no remote rollout worker (num_workers 0: the driver samples)"
                if ws.num_workers == 0
                else count(ws.num_workers, "rollout worker")
            )
            ctx.report(
                "PG216",
                f"AggregateBatches {brief(nid)} asks for "
                f"{count(n, 'aggregation actor')}, but worker set {brief(rid)} has {has}: "
                "each aggregator owns at least one rollout worker",
                node=nid,
                pointer=f"/nodes/{nid}/params/num_aggregation_workers",
                hint=_too_many_hint(ctx, nid, rid, n, ws.num_workers),
            )
            continue
        if ws.max_worker_restarts > 0:
            ctx.report(
                "PG217",
                f"worker set {brief(rid)} replaces a dead rollout worker up to "
                f"{count(ws.max_worker_restarts, 'time')} (max_worker_restarts), but "
                f"AggregateBatches {brief(nid)} samples it through its aggregation actors, "
                "where a dead worker stops the run (naming the node) instead",
                node=nid,
                pointer=f"/resources/{rid}/params/max_worker_restarts",
                hint=f"set max_worker_restarts to 0 (/resources/{rid}/params/"
                "max_worker_restarts) to say so, or use ParallelRollouts -> "
                "UpdateWorkerWeights -> ConcatBatches, which replaces dead workers",
            )


def _too_many_hint(ctx: Context, nid: str, rid: str, n: int, num_workers: int) -> str | None:
    """PG216's hint: fewer aggregators or more workers; with no remote rollout worker
    fewer aggregators cannot help (at least one is needed), so more workers, or sampling
    in the driver without AggregateBatches."""
    more_workers = join_hints(
        f"{'or ' if num_workers else ''}give worker set {brief(rid)} at least "
        f"{count(n, 'rollout worker')} (/resources/{rid}/params/num_workers)",
        ctx.config_hint(ctx.plan.resources[rid].params, ["num_workers"], f"a value >= {n}"),
    )
    if num_workers == 0:
        return join_hints(
            more_workers,
            f"or, to sample in the driver, drop {brief(nid)}: ParallelRollouts -> "
            "UpdateWorkerWeights -> ConcatBatches, as plans/impala",
        )
    return join_hints(
        f"use at most {count(num_workers, 'aggregation actor')} "
        f"(/nodes/{nid}/params/num_aggregation_workers)",
        ctx.config_hint(
            ctx.plan.nodes[nid].params, ["num_aggregation_workers"], f"a value <= {num_workers}"
        ),
        more_workers,
    )
