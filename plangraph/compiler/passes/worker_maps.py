"""Pass ``worker-side-maps``: run pure per-batch operators on the rollout workers.

A node whose operator is declared ``pure`` (``register_op(..., pure=True)``; the built-in
``StandardizeFields``) and that reads a rollout source directly (``ParallelRollouts``, or
another node this pass already moved) is run by the rollout workers themselves, on each
fragment after postprocessing, before the driver gathers it: in parallel on the actors
instead of one after another in the driver. Its results are the same because:

* a pure operator is a function of its input batch alone and keeps its rows, so where it
  runs changes nothing but the process; the source counts env steps and episodes on the
  same rows either way;
* an ``async`` source's items are single fragments, exactly what a worker sees;
* a ``bulk_sync`` source's item is every worker's fragment concatenated, so only a
  ``rowwise`` operator (``f(concat(a, b)) == concat(f(a), f(b))``) may move there.

Left on the driver (with the reason in ``explain``): a source whose batches also go to
another node, a worker set sampled by more than one source (its workers cannot tell the
sources apart), and operators that are not ``SampleBatch -> SampleBatch``.
"""

from __future__ import annotations

from plangraph.compiler.passes.base import Change, Draft, OptimisationPass, Outcome
from plangraph.compiler.semantic_checks import _worker_set
from plangraph.ir.types import parse_type
from plangraph.text import brief

__all__ = ["PASS"]

_SAMPLE_BATCH = parse_type("SampleBatch")


def _samplers_of(draft: Draft, rid: str) -> list[str]:
    """The nodes whose work samples on worker set ``rid``'s workers (``ParallelRollouts``,
    ``AsyncGradients``: operators placed on the actors)."""
    return [
        nid
        for nid in draft.order()
        if (sig := draft.sig(nid)) is not None
        and sig.placement == "actors"
        and (found := _worker_set(draft.ctx, nid)) is not None
        and found[0] == rid
    ]


def _refusal(draft: Draft, nid: str) -> tuple[str | None, str]:
    """``(source id, "")`` when node ``nid`` can move onto that source's workers, else
    ``(None, why not)``."""
    sig = draft.sig(nid)
    assert sig is not None
    ins = draft.inputs(nid)
    src = ins[0] if len(ins) == 1 else None
    if src is None:
        return None, "it does not read exactly one stream"
    host = src if draft.op(src) == "ParallelRollouts" else draft.hosts.get(src)
    if host is None:
        return None, f"it reads {brief(src)} ({draft.op(src)}), not a rollout source"
    if sig.inputs != (_SAMPLE_BATCH,) or sig.output != _SAMPLE_BATCH:
        return None, f"it maps {sig.type_text()}; the workers run SampleBatch -> SampleBatch maps"
    others = [u for u in draft.users(src) if u != nid]
    if others or draft.users(src).count(nid) != 1:
        return None, (
            f"the batches of {brief(src)} also go to {', '.join(map(brief, others))}, which "
            "must see them as sampled"
        )
    if draft.params.get(host) is None or draft.params.get(nid) is None:
        return None, "its params or its source's are invalid"
    found = _worker_set(draft.ctx, host)
    if found is None:
        return None, f"the worker set of {brief(host)} is not a valid WorkerSet"
    rid = found[0]
    samplers = _samplers_of(draft, rid)
    if len(samplers) > 1:
        return None, (
            f"worker set {brief(rid)} is sampled by {', '.join(map(brief, samplers))}; its "
            "workers would apply the map to every one's fragments"
        )
    if draft.param(host, "mode") == "bulk_sync" and not sig.rowwise:
        return None, (
            f"{brief(host)} is bulk_sync, so each item concatenates every worker's fragment, "
            f"and {sig.name} is not row-wise (rowwise=True): on the workers it would see "
            "each fragment alone"
        )
    return host, ""


def _run(draft: Draft) -> Outcome:
    out = Outcome()
    pure = [nid for nid in draft.order() if (sig := draft.sig(nid)) is not None and sig.pure]
    if not pure:
        out.notes.append(
            "no node runs a pure per-batch operator (StandardizeFields, or one registered "
            "with pure=True)"
        )
        return out
    for nid in pure:
        host, why_not = _refusal(draft, nid)
        label = f"node {brief(nid)} ({draft.op(nid)})"
        if host is None:
            out.notes.append(f"{label} stays on the driver: {why_not}")
            continue
        draft.hosts[nid] = host
        found = _worker_set(draft.ctx, host)
        assert found is not None
        mode = draft.param(host, "mode")
        out.changes.append(
            Change(
                label,
                f"on the driver, after {brief(host)} gathered the fragments",
                f"on the rollout workers of {brief(found[0])} ({brief(host)}), on each "
                "fragment after postprocessing, before the gather",
                f"{draft.op(nid)} is pure (a function of its batch that keeps the rows) and "
                + (
                    "row-wise, so mapping each fragment and then concatenating them is mapping "
                    "the concatenation"
                    if mode == "bulk_sync"
                    else f"{brief(host)} is async: each item is one worker's fragment"
                ),
            )
        )
    return out


PASS = OptimisationPass(
    "worker-side-maps",
    "Run pure per-batch maps of rollouts on the rollout workers",
    _run,
)
