"""Polling in tests: every wait has a deadline and fails saying what it waited for.

A deadline here is a hang guard, never a speed assertion: it is far above what the wait
takes on a loaded 2-core machine. Not a test module (pytest does not collect it).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def wait_until(
    condition: Callable[[], object],
    what: str,
    timeout_s: float = 60.0,
    interval_s: float = 0.1,
    describe: Callable[[], str] | None = None,
) -> None:
    """Call ``condition()`` every ``interval_s`` seconds until it is true.

    ``condition`` may itself fail the test (e.g. assert that a process is still running).

    Raises:
        AssertionError: still false after ``timeout_s`` seconds; the message names
            ``what`` was waited for, for how long, and ``describe()`` (the state seen last)
            when given.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            seen = f"; last seen: {describe()}" if describe is not None else ""
            raise AssertionError(f"waited {timeout_s:g} s for {what}, in vain{seen}")
        time.sleep(interval_s)


def wait_until_dead(actor: Any, timeout_s: float = 60.0) -> None:
    """Until ``actor`` no longer answers: ``ray.kill`` returns before the process is gone,
    and on a loaded machine a ping sent right after it may still be served."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    def dead() -> bool:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except RayActorError:
            return True
        except GetTimeoutError:  # still going down
            pass
        return False

    wait_until(dead, f"actor {actor!r} to stop answering after ray.kill", timeout_s)


def run_has_results(proc: subprocess.Popen[str], log: Path, n: int) -> bool:
    """For :func:`wait_until`: whether the ``plangraph run`` process ``proc`` has written
    ``n`` results to ``log`` (its ``result.jsonl``); fails the test, with the process's
    output, if it exited first."""
    assert proc.poll() is None, proc.communicate()
    return log.exists() and len(log.read_text().splitlines()) >= n


def rollout_workers_up(algo: Any, timeout_s: float = 120.0) -> None:
    """Wait until every remote rollout worker of ``algo`` has started (they import torch):
    a test that arms a short watchdog must not have it fire on a slow start.

    Raises:
        ray.exceptions.GetTimeoutError: a worker did not answer within ``timeout_s``.
    """
    import ray

    workers = [w for ws in algo.ctx.worker_sets.values() for w in ws.remote_workers]
    ray.get([w.get_spaces.remote() for w in workers], timeout=timeout_s)
