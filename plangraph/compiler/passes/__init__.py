"""Optimisation passes: rewrite the executed plan after the checks, and say so.

:data:`BUILTIN_PASSES` runs in this order (each pass reads what the ones before decided):

1. ``rollout-sizing``: ``rollout_fragment_length: "auto"`` sized so that one round of
   fragments is the train batch;
2. ``worker-side-maps``: pure per-batch operators that read a rollout source run on the
   rollout workers;
3. ``map-fusion``: chains of per-item driver operators run as one flow stage;
4. ``broadcast-coalescing``: weight broadcasts that no sample can observe are merged.

Every pass is on by default and keeps the run's results (counters, learner stats,
weights) as they are without it; each one's module says why. A plan with errors is not
optimised. ``analyze(plan, disable_passes=["map-fusion"])`` (``--no-pass NAME`` on the
command line) turns passes off; :func:`check_pass_names` refuses unknown names with a
did-you-mean. The results (:class:`PassResult`: changes with before/after/why, or why
not) are ``CompiledPlan.optimisations``; ``plangraph explain`` prints them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from plangraph.compiler.context import Context
from plangraph.compiler.passes import (
    broadcast_coalescing,
    map_fusion,
    rollout_sizing,
    worker_maps,
)
from plangraph.compiler.passes.base import (
    Change,
    Draft,
    OptimisationPass,
    Outcome,
    PassResult,
    PassStatus,
)
from plangraph.errors import UnknownPassError
from plangraph.text import close_matches

__all__ = [
    "ALL",
    "BUILTIN_PASSES",
    "Change",
    "Draft",
    "OptimisationPass",
    "Outcome",
    "PassResult",
    "PassStatus",
    "check_pass_names",
    "pass_names",
    "run_passes",
]

BUILTIN_PASSES: tuple[OptimisationPass, ...] = (
    rollout_sizing.PASS,
    worker_maps.PASS,
    map_fusion.PASS,
    broadcast_coalescing.PASS,
)

ALL = "all"
"""``--no-pass all`` turns every pass off."""


def pass_names() -> tuple[str, ...]:
    """The passes' names, in run order."""
    return tuple(p.name for p in BUILTIN_PASSES)


def check_pass_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` as a set of pass names (``"all"``: every pass).

    Raises:
        UnknownPassError: a name is no pass's (the message suggests close ones and lists
            the passes).
    """
    known = pass_names()
    out: set[str] = set()
    for name in names:
        if name == ALL:
            out.update(known)
            continue
        if name not in known:
            close = close_matches(name, known)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UnknownPassError(
                f"unknown optimisation pass {name!r}{hint} (the passes: {', '.join(known)}; "
                f"{ALL!r} turns them all off)"
            )
        out.add(name)
    return frozenset(out)


def run_passes(
    ctx: Context,
    disabled: frozenset[str] = frozenset(),
    passes: Sequence[OptimisationPass] = BUILTIN_PASSES,
) -> tuple[Draft, tuple[PassResult, ...]]:
    """Run ``passes`` (default :data:`BUILTIN_PASSES`) on a checked, error-free plan; the
    executed plan's draft and one :class:`PassResult` per pass.

    A pass that raises is a bug in the pass: its changes are rolled back, it is reported
    as PG199 naming it (with ``--no-pass`` as the way round it), and the others still run.
    """
    draft = Draft.of(ctx)
    results: list[PassResult] = []
    for p in passes:
        fn = p.when_off if p.name in disabled else p.run
        saved = draft.snapshot()
        try:
            outcome = fn(draft) if fn is not None else Outcome()
        except Exception as exc:  # a bug in the pass; KeyboardInterrupt still stops
            draft = saved
            what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ctx.report(
                "PG199",
                f"optimisation pass {p.name!r} crashed with {what}",
                hint=f"a bug in the pass, not in the plan: please report it with the plan; "
                f"--no-pass {p.name} compiles without it",
            )
            results.append(PassResult(p.name, p.doc, "not applied", notes=("it crashed",)))
            continue
        status: PassStatus
        if p.name in disabled:
            status = "off"
        else:
            status = "applied" if outcome.changes else "not applied"
        results.append(
            PassResult(p.name, p.doc, status, tuple(outcome.changes), tuple(outcome.notes))
        )
    return draft, tuple(results)
