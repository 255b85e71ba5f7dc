"""Bounded replacement of dead rollout workers: the restart policy and what a death says.

A rollout worker whose *process* dies (a native library ending it, a segfault, the OOM
killer) reaches the driver as ``ray.exceptions.RayActorError``; the ``WorkerSet`` replaces it, but
only ``max_worker_restarts`` times per worker within a sliding ``window_s``, waiting an
exponential backoff before each replacement. One more death raises
:class:`WorkerRestartError` naming the plan node, the worker and the original cause
(Ray's exit type and detail, the worker's pid, and the last lines the process wrote to
stderr when its log is on this node). An env that *raises* in ``step`` is not a death:
Ray reports it as a task error, which the flow engine raises as ``OperatorError`` at once.

RLlib's equivalent is ``max_num_worker_restarts`` (a total for the run) with a fixed
``delay_between_worker_restarts_s``; a per-worker window keeps a run that loses a worker
once an hour alive while a worker that dies on every step stops it within seconds.
"""

from __future__ import annotations

import collections
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from plangraph.flow.errors import OperatorError

__all__ = [
    "MAX_BACKOFF_S",
    "RestartPolicy",
    "WorkerRestartError",
    "describe_actor_death",
    "missing_module",
]

MAX_BACKOFF_S = 60.0
"""Upper bound of one backoff wait (s), however many replacements came before."""

_STDERR_TAIL_LINES = 12


@dataclass
class RestartPolicy:
    """At most ``max_restarts`` replacements of one worker within any ``window_s`` seconds;
    the k-th replacement in the window waits ``min(backoff_s * 2**(k-1), MAX_BACKOFF_S)``
    seconds first.

    Raises:
        ValueError: ``max_restarts < 0``, ``window_s <= 0`` or ``backoff_s < 0``.
    """

    max_restarts: int = 3
    window_s: float = 300.0
    backoff_s: float = 1.0
    _deaths: dict[int, collections.deque[float]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.window_s <= 0 or self.backoff_s < 0:
            raise ValueError(
                f"RestartPolicy: need max_restarts >= 0, window_s > 0, backoff_s >= 0; got "
                f"{self.max_restarts}, {self.window_s}, {self.backoff_s}"
            )

    def restarts_in_window(self, worker_index: int, now: float | None = None) -> int:
        """Replacements of ``worker_index`` within the last ``window_s`` seconds."""
        deaths = self._deaths.setdefault(worker_index, collections.deque())
        now = time.monotonic() if now is None else now
        while deaths and deaths[0] <= now - self.window_s:
            deaths.popleft()
        return len(deaths)

    def admit(self, worker_index: int) -> float | None:
        """Record a death of ``worker_index`` now: the backoff (s) to wait before replacing
        it, or ``None`` when the limit is reached and it must not be replaced."""
        now = time.monotonic()
        earlier = self.restarts_in_window(worker_index, now)
        if earlier >= self.max_restarts:
            return None
        self._deaths[worker_index].append(now)
        return min(self.backoff_s * 2.0**earlier, MAX_BACKOFF_S)


class WorkerRestartError(OperatorError):
    """A rollout worker kept dying: more than ``max_worker_restarts`` replacements of it
    within ``worker_restart_window_s``.

    Attributes (besides ``OperatorError``'s ``node_id``, ``detail``, ``traceback_text``):
        worker_index: the worker's ``worker_index`` (1..num_workers).
        num_restarts: replacements of this worker in the window before it gave up.
        cause: what the first death in the window said (exit type/detail, pid, stderr).
    """

    def __init__(
        self,
        node_id: str,
        worker_index: int,
        num_restarts: int,
        cause: str,
        detail: str | None = None,
        traceback_text: str = "",
    ) -> None:
        self.worker_index = worker_index
        self.num_restarts = num_restarts
        self.cause = cause
        super().__init__(
            node_id,
            detail
            or (
                f"WorkerRestartError: rollout worker {worker_index} died again after "
                f"{num_restarts} replacement(s) within the restart window; cause: {cause}"
            ),
            traceback_text,
            f"rollout worker {worker_index}",
        )

    def __reduce__(self) -> tuple[type[WorkerRestartError], tuple[object, ...]]:  # type: ignore[override]
        return (
            type(self),
            (
                self.node_id,
                self.worker_index,
                self.num_restarts,
                self.cause,
                self.detail,
                self.traceback_text,
            ),
        )


def describe_actor_death(error: BaseException) -> str:
    """One paragraph on why an actor died, from a ``RayActorError``: its pid, Ray's
    ``Worker exit type``/``exit detail`` (an exit code when the process called
    ``sys.exit``; Ray sees only a closed connection for a process ended without Python's
    shutdown or by a signal), the exception of a failed constructor, and the tail of the
    process's stderr log when it is readable on this node (a Python fatal-signal report,
    whatever the env printed)."""
    message = str(getattr(error, "error_msg", "") or error)
    parts: list[str] = []
    pid_match = re.search(r"\bpid[:=] ?(\d+)", message)
    pid = int(pid_match.group(1)) if pid_match else None
    exit_match = re.search(r"Worker exit type: (\S+) Worker exit detail: ([^.]*\.)", message)
    node_match = re.search(r"its node has died\. Node Id: ([0-9a-f]+)", message)
    if node_match:
        parts.append(f"its node {node_match.group(1)[:12]} died")
    elif exit_match:
        parts.append(f"worker process exit type {exit_match.group(1)}: {exit_match.group(2)}")
    elif "creation task" in message:
        lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
        parts.append(f"its constructor raised {lines[-1]}")
    else:
        parts.append(message.strip().splitlines()[0] if message.strip() else type(error).__name__)
    if pid is not None:
        parts.append(f"pid {pid}")
        tail = _stderr_tail(pid)
        if tail:
            parts.append("its last stderr lines: " + " | ".join(tail))
    return "; ".join(parts)


def missing_module(error: BaseException) -> str | None:
    """The module a dead actor could not import (its constructor, or unpickling its
    arguments, raised ``ModuleNotFoundError``), or ``None``."""
    message = str(getattr(error, "error_msg", "") or error)
    m = re.search(r"ModuleNotFoundError: No module named '([^']+)'", message)
    return m.group(1) if m else None


def _stderr_tail(pid: int) -> list[str]:
    """The last lines of the local Ray worker ``pid``'s stderr log ([] if not readable).

    Best effort: Ray keeps each worker's stderr in ``worker-*-<pid>.err`` under the logs
    folder of its session, ``/tmp/ray/session_*/logs`` (Ray's documented logging
    directory; ``/tmp`` is ``$RAY_TMPDIR`` or ``$TMPDIR`` where set); the newest such file
    is this worker's (``session_latest`` may be another Ray instance's on this machine).
    No public API returns a dead worker's log without the dashboard, which plangraph does
    not start, and a remote node's logs are not here."""
    tmp = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
    try:
        files = sorted(
            Path(tmp, "ray").glob(f"session_*/logs/worker-*-{pid}.err"),
            key=lambda f: f.stat().st_mtime,
        )
        if not files:
            return []
        text = files[-1].read_text(errors="replace")
    except OSError:  # a missing log must never hide the death itself
        return []
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip() and not ln.startswith(":")]
    return lines[-_STDERR_TAIL_LINES:]
