"""Pass ``broadcast-coalescing``: skip weight broadcasts that no sample can observe.

``TrainOneStep`` broadcasts the learner's weights to the rollout workers after every
update. A rollout worker uses the weights it holds only when it samples; with ``k``
updates between two rollout rounds, the first ``k - 1`` broadcasts are overwritten before
any sample reads them. This pass derives ``k`` from the plan and sets the executed
``TrainOneStep``'s ``update_workers_every`` to it (one broadcast per round, after the
round's last update), where it can prove that the updates come in whole blocks of ``k``
between rollout rounds:

* a ``Concurrently(mode="round_robin")`` drives both: the trainer's input has an integer
  weight ``k >= 2`` (a fractional weight rounds at random; ``"*"`` takes what is ready),
  and every rollout source of the worker set reaches another of its inputs through nodes
  that each have this one reader (so a source is pulled only in its own turn);
* the trainer's branch turns each pull into exactly one update: its source is a
  ``LocalReplay`` (ready for a whole turn or not at all: the buffer only grows, and only
  in the other branch), and between it and the ``Concurrently`` there are only
  ``TrainOneStep`` itself, ``UpdateTarget`` and pure maps, each the only reader of the one
  before, so a turn is ``k`` updates or none, and the update count is a multiple of ``k``
  whenever a rollout round starts;
* the rollouts are ``bulk_sync`` (a round is requested only when pulled; ``async``
  requests are re-sent as fragments arrive, in the middle of a turn);
* nothing else broadcasts or reads the worker set's weights: no other ``TrainOneStep``,
  ``ApplyGradients`` or ``UpdateWorkerWeights`` on it, no learner thread training it.

The broadcast phase is counted in the run's counters (``num_updates/<node>``, so a
resumed run keeps it): the one counter the pass adds. A plan that sets
``update_workers_every`` above 1 itself keeps its value.
"""

from __future__ import annotations

from plangraph.compiler.passes.base import Change, Draft, OptimisationPass, Outcome
from plangraph.compiler.semantic_checks import _worker_set
from plangraph.ir.refs import resource_ref_id
from plangraph.ops.resources import LearnerThreadParams
from plangraph.text import brief

__all__ = ["PASS"]

#: operators that send the learner weights to the rollout workers
_BROADCASTERS = frozenset({"TrainOneStep", "ApplyGradients", "UpdateWorkerWeights"})
#: operators allowed in the trainer's branch besides pure maps: one update or none per item
_IN_BRANCH = frozenset({"TrainOneStep", "UpdateTarget"})


def _only_reader_path(draft: Draft, start: str, stop: str) -> tuple[list[str], int] | None:
    """The nodes from ``start`` down to ``stop``, each the only reader of the one before,
    and the input port of ``stop`` they reach; None when the path branches or ends."""
    path = [start]
    cur = start
    while True:
        users = draft.users(cur)
        if len(users) != 1:
            return None
        if users[0] == stop:
            return path, list(draft.inputs(stop)).index(cur)
        cur = users[0]
        if cur in path:
            return None
        path.append(cur)


def _weight_k(weights: object, port: int) -> tuple[int | None, str]:
    if weights is None:
        return None, "it has no weights: one item per input per round, one update per turn"
    assert isinstance(weights, tuple)
    w = weights[port]
    if w == "*":
        return None, 'its weight is "*": a turn takes whatever is ready'
    if not float(w).is_integer():
        return None, f"its weight {w:g} is fractional: a turn is rounded at random"
    k = int(w)
    if k < 2:
        return None, "its weight is 1: one update per turn, nothing to merge"
    return k, ""


def _analyse(draft: Draft, nid: str) -> tuple[int, str, str] | str:
    """``(k, concurrently id, why)`` when ``nid``'s broadcasts can be merged, else why not."""
    ctx = draft.ctx
    found = _worker_set(ctx, nid)
    if found is None:
        return "its worker set is not a valid WorkerSet"
    rid = found[0]
    others = [w for w in ctx.writers.get(rid, []) if w != nid and draft.op(w) in _BROADCASTERS]
    if others:
        return (
            f"{', '.join(f'{brief(w)} ({draft.op(w)})' for w in others)} also send worker "
            f"set {brief(rid)}'s weights"
        )
    for lid, params in draft.res_params.items():
        if isinstance(params, LearnerThreadParams) and resource_ref_id(params.workers) == rid:
            return f"learner thread {brief(lid)} trains worker set {brief(rid)} too"
    samplers = [
        s
        for s in draft.order()
        if (sig := draft.sig(s)) is not None
        and sig.placement == "actors"
        and (f := _worker_set(ctx, s))
        and f[0] == rid
    ]
    if not samplers:
        return f"no ParallelRollouts samples worker set {brief(rid)}"
    for s in samplers:
        if draft.op(s) != "ParallelRollouts":
            return (
                f"{brief(s)} ({draft.op(s)}) samples on the workers as its results arrive, "
                "so any broadcast may be the one it samples with"
            )
        if draft.param(s, "mode") != "bulk_sync":
            return (
                f"{brief(s)} samples asynchronously: its requests are re-sent as fragments "
                "arrive, so any broadcast may be the one a fragment samples with"
            )
    own = [s for s in samplers if s in ctx.topology.ancestors(nid)]
    if own:
        return (
            f"its batches come from {brief(own[0])}: each update is followed by the next "
            "rollout round, which samples with its weights"
        )
    # The trainer's branch: down to the Concurrently that drives it, then up to its source.
    down = nid
    merge = None
    while True:
        users = draft.users(down)
        if len(users) != 1:
            return (
                f"the items of {brief(down)} go to {len(users)} readers, not to one "
                "round-robin Concurrently"
            )
        nxt = users[0]
        if draft.op(nxt) == "Concurrently":
            merge = nxt
            break
        sig = draft.sig(nxt)
        if sig is None or not (draft.op(nxt) in _IN_BRANCH or sig.pure):
            return (
                f"{brief(nxt)} ({draft.op(nxt)}) stands between {brief(nid)} and the "
                "Concurrently that drives it: a turn need not be one update per item"
            )
        down = nxt
    up = nid
    while True:
        ins = draft.inputs(up)
        if len(ins) != 1:
            return f"{brief(up)} does not read exactly one stream"
        src = ins[0]
        if draft.users(src) != (up,):
            return f"the items of {brief(src)} also go elsewhere"
        if draft.op(src) == "LocalReplay":
            break
        sig = draft.sig(src)
        if sig is None or not (src != nid and (draft.op(src) in _IN_BRANCH or sig.pure)):
            return (
                f"{brief(nid)} is fed by {brief(src)} ({draft.op(src)}), not by a LocalReplay "
                "through pure maps: a turn of its branch need not be one update per item"
            )
        up = src
    if draft.param(merge, "mode") != "round_robin":
        return f"{brief(merge)} is async: it drives its branches as items become ready"
    port = list(draft.inputs(merge)).index(down)
    k, why_not = _weight_k(draft.param(merge, "weights"), port)
    if k is None:
        return f"input {port} of {brief(merge)} ({brief(down)}): {why_not}"
    for s in samplers:
        reached = _only_reader_path(draft, s, merge)
        if reached is None:
            return (
                f"the rollouts of {brief(s)} do not reach {brief(merge)} through nodes that "
                "each have one reader, so they may be pulled in the middle of a turn"
            )
        if reached[1] == port:
            return f"{brief(s)} is in the same input of {brief(merge)}"
    turns = ", ".join(brief(s) for s in samplers)
    why = (
        f"{brief(merge)} (round_robin) pulls {k} items per turn from {brief(down)}; each is "
        f"one update, from a LocalReplay that is ready for a whole turn or not at all, so "
        f"updates come in blocks of {k} and the rollouts of {turns} (bulk_sync, another "
        f"input) always sample with the weights of a block's last update"
    )
    return k, merge, why


def _run(draft: Draft) -> Outcome:
    out = Outcome()
    trainers = [n for n in draft.order() if draft.op(n) == "TrainOneStep" and draft.params.get(n)]
    if not trainers:
        out.notes.append("no TrainOneStep (whose broadcasts this pass merges) in the plan")
        return out
    for nid in trainers:
        params = draft.params[nid]
        assert params is not None
        label = f"node {brief(nid)}"
        # A plan that asks for fewer broadcasts keeps them; 1 (the default, also as written
        # out in full by CompiledPlan.to_plan) is what the pass may merge.
        if draft.param(nid, "update_workers_every") != 1:
            out.notes.append(
                f"{label}: update_workers_every={draft.param(nid, 'update_workers_every')} is "
                "set in the plan, which is kept"
            )
            continue
        found = _analyse(draft, nid)
        if isinstance(found, str):
            out.notes.append(f"{label}: broadcasts after every update: {found}")
            continue
        k, merge, why = found
        draft.params[nid] = params.model_copy(update={"update_workers_every": k})
        out.changes.append(
            Change(
                label,
                f"update_workers_every=1 ({k} broadcasts per turn of {brief(merge)})",
                f"update_workers_every={k} (1 per turn, after its last update)",
                why,
            )
        )
    return out


PASS = OptimisationPass(
    "broadcast-coalescing",
    "Merge weight broadcasts that no sample can observe",
    _run,
)
