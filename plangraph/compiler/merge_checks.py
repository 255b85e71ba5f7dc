"""Checks on how a ``Concurrently`` drives its branches: branches that never produce, a
branch that never hands the rotation back, round-robin branches that throttle the others.

What the runtime does, which these checks follow exactly (``plangraph.flow.concurrency``):
a ``Concurrently`` pulls its inputs in turn (``round_robin``: ``weights[i]`` blocking pulls
of input ``i``; ``async``: one non-blocking poll each). A pull returns when the branch
yields an item *or* the not-ready marker; on the marker the turn passes on. Sources that
wait on something local yield the marker instead of blocking (``LocalReplay`` below
``learning_starts``, ``Dequeue`` with an empty out-queue), so a replay branch waiting for
its buffer to fill does *not* hold up the others; only operators that swallow items
without yielding do: ``ConcatBatches`` and ``Batch`` keep pulling until their batch is
complete, ``WaitUntilTimestepsElapsed`` drops items until enough env steps are sampled.

They read only validated params and skip what earlier checks reported (a buffer without a
writer, PG150; learning_starts above capacity, PG173; an unreachable writer, PG160), so
each problem is reported once, where it starts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from plangraph.compiler.context import Context, join_hints
from plangraph.ops.resources import ReplayBufferParams, WorkerSetParams
from plangraph.text import brief

__all__ = ["check_branch_turns", "check_branches_produce", "check_round_robin_throttle"]

_ROLLOUTS = "ParallelRollouts"
_WAIT = "WaitUntilTimestepsElapsed"


def _is_merge(ctx: Context, nid: str) -> bool:
    sig = ctx.sigs.get(nid)
    return sig is not None and sig.category == "merge"


def _emitted_inputs(ctx: Context, nid: str) -> list[int]:
    """Indexes of the inputs whose items a merge node emits (all for Union/Duplicate)."""
    n = len(ctx.plan.nodes[nid].inputs)
    indexes = getattr(ctx.params.get(nid), "output_indexes", None)
    return [i for i in (indexes if indexes is not None else range(n)) if i < n]


def _driven(ctx: Context) -> frozenset[str]:
    """The nodes the output pulls (the only ones that run)."""
    out = ctx.plan.output
    if out not in ctx.plan.nodes:
        return frozenset()
    return ctx.topology.ancestors(out) | {out}


#: resources whose readers emit what their writers put in (a WorkerSet carries weights)
_ITEM_KINDS = ("ReplayBuffer", "LearnerThread")


def _reads(ctx: Context, nid: str) -> list[str]:
    """The item-carrying resources (replay buffers, learner threads) ``nid`` reads."""
    return [
        rid
        for rid, readers in ctx.readers.items()
        if nid in readers
        and rid in ctx.plan.resources
        and ctx.plan.resources[rid].kind in _ITEM_KINDS
    ]


def _replay_never_ready(ctx: Context, rid: str) -> bool:
    params = ctx.res_params.get(rid)
    return isinstance(params, ReplayBufferParams) and params.learning_starts > params.capacity


# -- which nodes can ever produce an item -------------------------------------------------


@dataclass(frozen=True)
class _Liveness:
    """The least fixed point of "can ever emit an item", over the driven nodes."""

    ready: frozenset[str]
    written: frozenset[str]  # resources some writer can ever write


def _liveness(ctx: Context) -> _Liveness:
    driven = _driven(ctx)
    order = [n for n in ctx.topology.topological_order() if n in driven]
    ready: set[str] = set()
    written: set[str] = set()
    # Optimistic where another check already reports the problem: a resource nobody
    # (driven) writes is PG150/PG154/PG160, one that can never fill is PG173.
    for rid in ctx.plan.resources:
        writers = [w for w in ctx.writers.get(rid, []) if w in driven]
        if not writers or _replay_never_ready(ctx, rid):
            written.add(rid)
    changed = True
    while changed:
        changed = False
        for nid in order:
            if nid in ready or nid in ctx.topology.cyclic:
                continue
            node = ctx.plan.nodes[nid]
            if ctx.sigs.get(nid) is None:
                # An unknown operator (PG110: a user's, without --import) is reported
                # already; whatever it would do is unknown, so assume it produces, rather
                # than report its users as a knock-on PG176.
                ready.add(nid)
                changed = True
                continue
            if not node.inputs:
                reads = _reads(ctx, nid)
                live = not reads or any(r in written for r in reads)
            elif _is_merge(ctx, nid):
                live = any(node.inputs[i] in ready for i in _emitted_inputs(ctx, nid))
            else:
                live = all(src in ready for src in node.inputs)
            if live:
                ready.add(nid)
                changed = True
                written.update(rid for rid, ws in ctx.writers.items() if nid in ws)
    return _Liveness(frozenset(ready), frozenset(written))


def _dead_sources(ctx: Context, nid: str, live: _Liveness) -> list[str]:
    """The sources upstream of (or equal to) ``nid`` that never produce, in order."""
    up = ctx.topology.ancestors(nid) | {nid}
    return [
        s
        for s in ctx.topology.sort(up)
        if not ctx.plan.nodes[s].inputs and s not in live.ready and ctx.sigs.get(s) is not None
    ]


def _why_dead(ctx: Context, source: str, live: _Liveness) -> str:
    node = ctx.plan.nodes[source]
    reads = [r for r in _reads(ctx, source) if r not in live.written]
    if not reads:
        return f"{node.op} {brief(source)} never produces an item"
    rid = reads[0]
    res = ctx.plan.resources[rid]
    driven = _driven(ctx)
    writers = [w for w in ctx.writers.get(rid, []) if w in driven]
    verb = "waits for" if res.kind == "LearnerThread" else "reads"
    what = "trained batches" if res.kind == "LearnerThread" else "experience"
    own = set(ctx.readers.get(rid, []))
    # Each writer is dead because of the sources above it: the buffer's own readers (a
    # loop through the resource), or some other source that never produces.
    causes = {s for w in writers for s in _dead_sources(ctx, w, live)}
    names = ", ".join(brief(w) for w in writers)
    who = f"its only writer {names} is" if len(writers) == 1 else f"its writers {names} are"
    if causes <= own:
        how = f"{who} fed only from what the readers of {brief(rid)} emit"
    else:
        other = ctx.topology.sort(causes - own)[0]
        how = f"{who} fed only from {ctx.plan.nodes[other].op} {brief(other)}, which never produces"
    return (
        f"it starts at {node.op} {brief(source)}, which {verb} {res.kind} {brief(rid)}, but "
        f"{how}, so nothing ever puts {what} into it"
    )


def _fix_hint(ctx: Context, nid: str, source: str, live: _Liveness) -> str:
    """How to feed the dead source's resource from a branch that samples."""
    reads = [r for r in _reads(ctx, source) if r not in live.written]
    rollouts = [n for n, node in ctx.plan.nodes.items() if node.op == _ROLLOUTS]
    if not reads:
        return f"give {brief(nid)} an input that produces items"
    rid = reads[0]
    writers = [w for w in ctx.writers.get(rid, []) if w in _driven(ctx)]
    sampled = f"a ParallelRollouts such as {brief(rollouts[0])}" if rollouts else "ParallelRollouts"
    return (
        f"feed {brief(writers[0])} from {sampled} (its inputs), not from what "
        f"{brief(rid)} gives back, and drive that branch with {brief(nid)}"
    )


def check_branches_produce(ctx: Context) -> None:
    """Each branch a Concurrently drives can produce items (no branch fed only by itself)."""
    live = _liveness(ctx)
    driven = _driven(ctx)
    for nid in ctx.topology.topological_order():
        if nid not in driven or not _is_merge(ctx, nid) or ctx.params.get(nid) is None:
            continue
        node = ctx.plan.nodes[nid]
        emitted = _emitted_inputs(ctx, nid)
        for i, src in enumerate(node.inputs):
            if src in live.ready or src not in ctx.plan.nodes or src in ctx.topology.cyclic:
                continue
            # Report where it starts: a dead merge upstream is reported at that merge.
            upstream = ctx.topology.ancestors(src) | {src}
            if any(_is_merge(ctx, u) and u not in live.ready for u in upstream):
                continue
            sources = _dead_sources(ctx, src, live)
            if not sources:
                continue
            if nid not in live.ready:
                effect = (
                    f"{node.op} {brief(nid)} therefore never emits an item: the run would "
                    "hang after launch, with no error"
                )
            elif i in emitted:
                effect = f"None of its items ever reach the output of {brief(nid)}"
            else:
                effect = "That branch never does its work"
            ctx.report(
                "PG176",
                f"input {i} ({brief(src)}) of {node.op} {brief(nid)} can never produce an "
                f"item: {_why_dead(ctx, sources[0], live)}. {effect}",
                node=nid,
                pointer=f"/nodes/{nid}/inputs/{i}",
                hint=_fix_hint(ctx, nid, sources[0], live),
            )


# -- a branch that never gives the turn back ----------------------------------------------


def _chain_up(ctx: Context, nid: str) -> Iterable[str]:
    """``nid`` and the nodes above it through single-input, non-merge operators."""
    cur: str | None = nid
    seen: set[str] = set()
    while cur is not None and cur in ctx.plan.nodes and cur not in seen:
        seen.add(cur)
        yield cur
        node = ctx.plan.nodes[cur]
        cur = node.inputs[0] if len(node.inputs) == 1 and not _is_merge(ctx, cur) else None


def _merge_below(ctx: Context, nid: str) -> str | None:
    merges = [d for d in ctx.topology.sort(ctx.topology.descendants(nid)) if _is_merge(ctx, d)]
    return merges[0] if merges else None


def check_branch_turns(ctx: Context) -> None:
    """No branch of a Concurrently keeps its turn forever (a wait only others can end)."""
    driven = _driven(ctx)
    for nid, node in ctx.plan.nodes.items():
        if node.op != _WAIT or nid not in driven or ctx.params.get(nid) is None:
            continue
        target = getattr(ctx.params[nid], "target", None)
        chain = list(_chain_up(ctx, nid))[1:]
        if not isinstance(target, int) or not chain:
            continue
        top = chain[-1]
        if any(ctx.plan.nodes[c].op == _ROLLOUTS for c in chain):
            continue  # the branch samples itself: it waits, but it gets there
        if ctx.plan.nodes[top].op != "LocalReplay" or ctx.params.get(top) is None:
            continue
        reads = _reads(ctx, top)
        params = ctx.res_params.get(reads[0]) if reads else None
        merge = _merge_below(ctx, nid)
        if not isinstance(params, ReplayBufferParams) or merge is None:
            continue
        if target <= params.learning_starts or _replay_never_ready(ctx, reads[0]):
            continue  # by the time the buffer is ready that many env steps were sampled
        rid = reads[0]
        ctx.report(
            "PG177",
            f"{node.op} drops items until num_env_steps_sampled reaches target={target}, but "
            f"nothing in its branch samples: it is fed by LocalReplay {brief(top)}, which is "
            f"ready (never not-ready again) once ReplayBuffer {brief(rid)} holds "
            f"learning_starts={params.learning_starts} env steps. From then on each pull of "
            f"this branch replays and drops batches without end and never hands the turn "
            f"back, so {ctx.plan.nodes[merge].op} {brief(merge)} never drives the inputs that "
            "sample again and the run hangs after launch, with no error",
            node=nid,
            pointer=f"/nodes/{nid}/params/target",
            hint=join_hints(
                f"wait on the sampling branch instead (ParallelRollouts -> {node.op} -> "
                f"StoreToReplay), or lower target to at most learning_starts="
                f"{params.learning_starts}",
                ctx.config_hint(node.params, ["target"], f"a value <= {params.learning_starts}"),
            ),
        )


# -- round-robin branches that emit nothing for long stretches ------------------------------


@dataclass(frozen=True)
class _Pull:
    """What one item of a branch costs in blocking rollout rounds of its ParallelRollouts."""

    rounds: int  # rollout rounds (items of the source) pulled per item
    env_steps: int  # env steps per item
    source: str  # the ParallelRollouts node
    grouped_by: str | None  # the node that groups rounds (ConcatBatches/Batch), if any


def _rollout_env_steps(ctx: Context, nid: str) -> int | None:
    from plangraph.ir.refs import resource_ref_id

    params = ctx.params.get(nid)
    rid = resource_ref_id(getattr(params, "workers", None))
    ws = ctx.res_params.get(rid) if rid is not None else None
    if not isinstance(ws, WorkerSetParams) or ws.rollout_fragment_length == "auto":
        return None  # the rollout-sizing pass gives "auto" its number before the checks
    per_worker = ws.num_envs_per_worker * ws.rollout_fragment_length
    if getattr(params, "mode", None) != "bulk_sync":
        return per_worker
    return max(1, ws.num_workers) * per_worker


def _pull_cost(ctx: Context, nid: str) -> _Pull | None:
    """Blocking rollout rounds behind one item of ``nid``, if the chain above it is a
    plain one from ParallelRollouts (None otherwise: replay, merges, unknown ops)."""
    chain = list(_chain_up(ctx, nid))
    top = chain[-1]
    if ctx.plan.nodes[top].op != _ROLLOUTS or ctx.params.get(top) is None:
        return None
    steps = _rollout_env_steps(ctx, top)
    if steps is None:
        return None
    rounds, grouped = 1, None
    for cur in reversed(chain[:-1]):
        op, params = ctx.plan.nodes[cur].op, ctx.params.get(cur)
        if params is None:
            return None
        if op == "ConcatBatches":
            k = math.ceil(params.min_batch_size / steps)  # type: ignore[attr-defined]
            rounds, steps = rounds * k, steps * k
            grouped = cur if k > 1 else grouped
        elif op == "Batch":
            n = params.n  # type: ignore[attr-defined]
            rounds, steps = rounds * n, steps * n
            grouped = cur if n > 1 else grouped
        elif op == _WAIT:
            continue  # a one-time wait at the start, not per item
        else:
            sig = ctx.sigs.get(cur)
            if sig is None or sig.apply not in ("for_each", "filter"):
                return None
    return _Pull(rounds, steps, top, grouped)


def check_round_robin_throttle(ctx: Context) -> None:
    """A round_robin Concurrently has no branch that holds the rotation for many rounds."""
    driven = _driven(ctx)
    for nid, node in ctx.plan.nodes.items():
        params = ctx.params.get(nid)
        if node.op != "Concurrently" or nid not in driven or params is None:
            continue
        if getattr(params, "mode", None) != "round_robin" or len(node.inputs) < 2:
            continue
        weights = getattr(params, "weights", None) or [1] * len(node.inputs)
        for i, src in enumerate(node.inputs):
            weight = weights[i] if i < len(weights) else 1
            if weight == "*" or src not in ctx.plan.nodes:
                continue  # a "*" input is polled without blocking: it never holds the turn
            cost = _pull_cost(ctx, src)
            if cost is None or cost.rounds < 2 or cost.grouped_by is None:
                continue
            rest = [f"{j} ({brief(s)})" for j, s in enumerate(node.inputs) if j != i]
            others = f"input{'s' * (len(rest) > 1)} {', '.join(rest)}"
            group = ctx.plan.nodes[cost.grouped_by]
            turn_rounds = math.ceil(float(weight) * cost.rounds)
            per_round = cost.env_steps // cost.rounds
            ctx.report(
                "PG178",
                f"input {i} ({brief(src)}) of round_robin {node.op} {brief(nid)} emits one "
                f"item per {cost.rounds} rollout rounds of {brief(cost.source)} "
                f"({group.op} {brief(cost.grouped_by)} groups {per_round}-env-step rounds "
                f"into {cost.env_steps} env steps), and each of its turns (weight "
                f"{weight:g}) blocks until then: {turn_rounds} rounds of sampling "
                f"({turn_rounds * per_round} env steps) in which {others} "
                f"{'are' if len(node.inputs) > 2 else 'is'} not pulled",
                node=nid,
                pointer=f"/nodes/{nid}/inputs/{i}",
                hint=f'use mode="async" for {brief(nid)} (each input polled as its items are '
                f"ready), or take {group.op} out of this branch (store or train each "
                "rollout round), or raise the other inputs' weights by the same factor "
                "if that ratio is what you meant",
            )
