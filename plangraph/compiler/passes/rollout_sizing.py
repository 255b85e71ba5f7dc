"""Pass ``rollout-sizing``: give ``rollout_fragment_length: "auto"`` a number.

For a worker set whose fragment length is ``"auto"``, the fragment is sized so that one
fragment from every worker (``num_workers x num_envs_per_worker x rollout_fragment_length``
env steps: one bulk-sync round, or ``num_workers`` async fragments) is exactly the
``min_batch_size`` of the ``ConcatBatches`` its rollouts feed (the train batch)::

    rollout_fragment_length = ceil(min_batch_size / (num_workers x num_envs_per_worker))

Rounding up keeps the train batch one round, never two: a batch that is not a multiple of
``num_workers x num_envs_per_worker`` gets at most that many env steps more than asked
(fewer than one per sub-env; PG174 reports it), where a fixed fragment length can make
``ConcatBatches`` wait for a second round. Where nothing says what to size for (no
``ConcatBatches`` reads the rollouts, or two ask for different sizes), and with the pass
off, ``"auto"`` is the WorkerSet default, 64. The executed plan records the batch it
sized for, so that a ``num_workers`` override at build time sizes it again.
"""

from __future__ import annotations

import math

from plangraph.compiler.passes.base import Change, Draft, OptimisationPass, Outcome
from plangraph.compiler.semantic_checks import _worker_set, check_batch_sizes, rollout_source
from plangraph.ops.resources import WorkerSetParams
from plangraph.text import brief

__all__ = ["AUTO", "FALLBACK", "PASS", "fragment_for"]

AUTO = "auto"
FALLBACK: int = 64
"""What ``"auto"`` means where it cannot be sized (the WorkerSet's usual default)."""


def fragment_for(train_batch: int, num_workers: int, num_envs_per_worker: int) -> int:
    """The fragment length (env steps per sub-env, >= 1) whose round of one fragment per
    worker holds ``train_batch`` env steps: ``ceil(train_batch / (workers x envs))``;
    ``num_workers == 0`` counts as the one local worker."""
    per_round = max(1, num_workers) * num_envs_per_worker
    return max(1, math.ceil(train_batch / per_round))


def _auto_worker_sets(draft: Draft) -> list[str]:
    return [
        rid
        for rid, p in draft.res_params.items()
        if isinstance(p, WorkerSetParams) and p.rollout_fragment_length == AUTO
    ]


def _samplers(draft: Draft, rid: str) -> list[str]:
    ctx = draft.ctx
    return [
        nid
        for nid in draft.order()
        if draft.op(nid) == "ParallelRollouts"
        and draft.params.get(nid) is not None
        and (found := _worker_set(ctx, nid)) is not None
        and found[0] == rid
    ]


_CONCATS = ("ConcatBatches", "AggregateBatches")
"""The operators that concatenate rollouts into train batches of ``min_batch_size``."""


def _train_batches(draft: Draft, samplers: list[str]) -> dict[str, int]:
    """ConcatBatches (or AggregateBatches) node id -> min_batch_size, for those the
    samplers' rollouts feed."""
    out: dict[str, int] = {}
    for nid in draft.order():
        want = draft.param(nid, "min_batch_size")
        ins = draft.inputs(nid)
        if draft.op(nid) not in _CONCATS or not isinstance(want, int) or len(ins) != 1:
            continue
        if rollout_source(draft.ctx, ins[0]) in samplers:
            out[nid] = want
    return out


def _set(draft: Draft, rid: str, frag: int) -> WorkerSetParams:
    params = draft.res_params[rid]
    assert isinstance(params, WorkerSetParams)
    sized = params.model_copy(update={"rollout_fragment_length": frag})
    draft.res_params[rid] = sized
    return sized


def _recheck(draft: Draft, how: dict[str, tuple[str, bool]]) -> None:
    """PG174/PG175 for the sized worker sets, now that their fragment length is known."""
    if not how:
        return
    saved = draft.ctx.res_params
    draft.ctx.res_params = {**saved, **draft.res_params}
    try:
        check_batch_sizes(draft.ctx, only=set(how), sized=how)
    finally:
        draft.ctx.res_params = saved


def _run(draft: Draft) -> Outcome:
    out = Outcome()
    rids = _auto_worker_sets(draft)
    if not rids:
        out.notes.append('no WorkerSet sets rollout_fragment_length to "auto"')
        return out
    how: dict[str, tuple[str, bool]] = {}
    for rid in rids:
        params = draft.res_params[rid]
        assert isinstance(params, WorkerSetParams)
        samplers = _samplers(draft, rid)
        batches = _train_batches(draft, samplers)
        wants = sorted(set(batches.values()))
        fallback = f'"auto" is {FALLBACK} (the WorkerSet default)'
        if not samplers:
            reason = "no ParallelRollouts samples it"
        elif not batches:
            reason = (
                f"the rollouts of {', '.join(map(brief, samplers))} reach no ConcatBatches, "
                "so no train batch says what to size for"
            )
        elif len(wants) > 1:
            reason = (
                f"its rollouts feed train batches of {' and '.join(map(str, wants))} env "
                "steps; one fragment length cannot make both exact"
            )
        else:
            reason = ""
        if reason:
            _set(draft, rid, FALLBACK)
            how[rid] = (f'"auto" = {FALLBACK}, the default', False)
            out.notes.append(f"resource {brief(rid)}: {reason}; {fallback}")
            continue
        want = wants[0]
        workers, envs = max(1, params.num_workers), params.num_envs_per_worker
        frag = fragment_for(want, params.num_workers, envs)
        _set(draft, rid, frag)
        draft.sized_for[rid] = want
        how[rid] = (f'sized from "auto" by pass {PASS_NAME}', True)
        concat = ", ".join(map(brief, batches))
        round_steps = workers * envs * frag
        unit = (
            "bulk-sync round"
            if all(draft.param(s, "mode") == "bulk_sync" for s in samplers)
            else f"set of {workers} async fragments"
        )
        exact = round_steps == want
        why = (
            f"{workers} worker{'s' if workers > 1 else ''} x {envs} envs x {frag} = "
            f"{round_steps} env steps per {unit}, "
            + (
                f"exactly the min_batch_size {want} of {concat}: one round per train batch"
                if exact
                else f"the fewest that hold the min_batch_size {want} of {concat} in one "
                f"round ({round_steps - want} more, rounded up; PG174 says more)"
            )
        )
        out.changes.append(
            Change(
                f"resource {brief(rid)}",
                'rollout_fragment_length "auto"',
                f"rollout_fragment_length {frag}",
                why,
            )
        )
    _recheck(draft, how)
    return out


def _off(draft: Draft) -> Outcome:
    out = Outcome()
    how: dict[str, tuple[str, bool]] = {}
    for rid in _auto_worker_sets(draft):
        _set(draft, rid, FALLBACK)
        how[rid] = (f'"auto" = {FALLBACK}, pass {PASS_NAME} off', False)
        out.notes.append(f'resource {brief(rid)}: "auto" is {FALLBACK} (the WorkerSet default)')
    _recheck(draft, how)
    return out


PASS_NAME = "rollout-sizing"

PASS = OptimisationPass(
    PASS_NAME,
    'Size "auto" rollout fragments so that one round of them is the train batch',
    _run,
    when_off=_off,
)
