"""Deadlines of the waits on Ray actors: no wait on an actor's reply lasts forever.

A wait on an actor call ends when the reply comes or when the actor dies (Ray completes the
call's object ref with the error), but an actor stuck inside the call (an env step that
never returns, a deadlock) or one Ray cannot place (it asks for resources no node has) keeps
the ref pending for ever. Every such wait in plangraph waits at most a deadline and then
raises a ``WaitTimeoutError`` (``OperatorTimeoutError`` for a plan node) that says what it
waited for, for how long and what to check (DESIGN.md, "Nothing silent").

A blocking wait in the driver also wakes every :data:`WAIT_SLICE_S` to check the sink's idle
watchdog (``max_idle_s``, :mod:`plangraph.flow.watchdog`), so that a plan's own, tighter
stall limit holds while a source blocks on an actor too.

Ray is imported when a wait starts, so this module is as cheap to import as ``flow.errors``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from plangraph.flow.watchdog import check_watchdog, note_waiting

__all__ = ["REPLY_DEADLINE_S", "WAIT_SLICE_S", "get_all", "not_answered", "wait_all", "wait_refs"]

REPLY_DEADLINE_S = 1800.0
"""Seconds (wall clock) a wait for one Ray actor call's reply lasts before it fails.

The longest calls plangraph waits for are a rollout worker's ``sample()`` (one fragment
from every sub-env: well under a second for the classic-control envs, minutes for a slow env
on a loaded 2-core machine), the calls queued behind one (``get_state``, the observation
filter's moments) and the first call to a new actor, which also waits for its process to
start and its envs to be made and, on an autoscaling cluster, for a node to join (minutes).
Thirty minutes is far above all of these, and still ends a run whose actor hangs with an
error naming it, rather than never. A plan that wants a tighter limit sets its sink's
``max_idle_s``; a caller of the flow API passes ``reply_deadline_s`` to a gather."""

WAIT_SLICE_S = 1.0
"""Seconds one ``ray.wait`` of a blocking wait lasts before the wait checks its deadline
and the sink's idle watchdog again: at most one extra Ray call per second of waiting, and
``max_idle_s`` fires within a second of its time."""

Expired = Callable[[list[Any]], BaseException]
"""``expired(pending_refs)``: the error to raise when a wait's deadline passed."""
Late = Callable[[list[int], float], BaseException]
"""``late(positions, deadline_s)``: the error to raise when the refs at ``positions`` (of
those waited for) were not ready within ``deadline_s`` seconds."""


def not_answered(who: str, call: str, deadline_s: float, stuck: str, raise_it: str = "") -> str:
    """The message of an expired reply deadline: ``who`` did not answer ``call`` within
    ``deadline_s`` seconds; is ``stuck`` (what may hang inside the call), or is the actor
    not started? ``raise_it``: how to give such calls more time, besides the constant."""
    how = f"{raise_it}; default " if raise_it else ""
    return (
        f"{who} did not answer {call} within {deadline_s:g} s: is {stuck}, or is it still "
        "waiting for Ray to start it (resources no node has free: see `ray status`)? If "
        f"such calls are this slow by design, raise the deadline ({how}"
        "plangraph.flow.deadlines.REPLY_DEADLINE_S)"
    )


def wait_refs(
    refs: Sequence[Any],
    num_returns: int,
    until: float,
    expired: Expired,
    *,
    fetch_local: bool = True,
    note: tuple[str, Callable[[], str]] | None = None,
) -> list[Any]:
    """Block until ``num_returns`` of ``refs`` are ready and return the ready ones (as
    ``ray.wait``; a failed task or a dead actor's call counts as ready: its ref holds the
    error).

    Waits in slices of :data:`WAIT_SLICE_S`, checking the armed idle watchdog between them;
    ``note = (node_id, why)`` tells the watchdog, once a slice passed, which plan node
    waits and why (``why()`` is called only if it fires).

    Raises:
        PlanStalledError: the sink's idle watchdog (if one is armed) fired.
        BaseException: ``expired(pending)`` once ``time.monotonic()`` passed ``until`` with
            fewer than ``num_returns`` ready; ``pending`` are the refs not ready.
    """
    import ray

    refs = list(refs)
    while True:
        left = until - time.monotonic()
        ready, pending = ray.wait(
            refs,
            num_returns=num_returns,
            timeout=max(0.0, min(WAIT_SLICE_S, left)),
            fetch_local=fetch_local,
        )
        if len(ready) >= num_returns:
            return list(ready)
        if left <= 0:
            raise expired(list(pending))
        if note is not None:
            note_waiting(*note)
        check_watchdog()


def wait_all(refs: Sequence[Any], late: Late, *, deadline_s: float | None = None) -> None:
    """Block until every one of ``refs`` is ready, at most ``deadline_s`` seconds (default
    :data:`REPLY_DEADLINE_S`, read at the call).

    Raises:
        BaseException: ``late(positions, deadline_s)``, positions (in ``refs``) of the refs
            still pending at the deadline.
    """
    refs = list(refs)
    if not refs:
        return
    limit = REPLY_DEADLINE_S if deadline_s is None else deadline_s

    def expired(pending: list[Any]) -> BaseException:
        still = set(pending)
        return late([i for i, ref in enumerate(refs) if ref in still], limit)

    wait_refs(refs, len(refs), time.monotonic() + limit, expired)


def get_all(refs: Sequence[Any], late: Late, *, deadline_s: float | None = None) -> list[Any]:
    """``ray.get(refs)`` (a list, in order) waiting at most ``deadline_s`` seconds (default
    :data:`REPLY_DEADLINE_S`); past it raises ``late(positions, deadline_s)`` as
    :func:`wait_all` does. A task's error is raised by ``ray.get`` as usual."""
    import ray

    refs = list(refs)
    wait_all(refs, late, deadline_s=deadline_s)
    return list(ray.get(refs))
