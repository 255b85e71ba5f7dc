"""Start-up timestamps: when each phase of a run ends, for ``tools/bench_startup.py``.

With ``PLANGRAPH_TRACE_STARTUP=FILE`` in the environment, every plangraph process (the
driver and, through Ray's inherited environment, each rollout worker) appends one JSON
line per phase to ``FILE`` the first time it reaches it::

    {"phase": "ray_ready", "pid": 4711, "t": 1735689600.123}

``t`` is Unix time (s), so marks of different processes and of the process that started
them share one clock. Phases, in the order a ``plangraph run`` reaches them:
``cli_imported``, ``compiled``, ``warmup_done`` (in a thread while Ray starts: torch
imported, env spaces read), ``ray_ready``, ``actors_started``, ``learner_built``,
``worker_ready`` (in a worker: its ``RolloutWorker`` exists), ``first_sample`` (the first
fragment reached the driver), ``first_train`` (the first learner update returned),
``first_result``, ``checkpoint_saved``, ``actors_stopped`` and ``ray_shutdown``; and
from the process that runs Ray's head node (``plangraph.runtime.local_head``)
``head_imported`` (Ray imported: it can start the node) and ``head_ready`` (its node is up).

Unset (the default), ``mark`` costs one dictionary look-up and writes nothing.
"""

from __future__ import annotations

import json
import os
import time

ENV_VAR = "PLANGRAPH_TRACE_STARTUP"

_seen: set[str] = set()


def mark(phase: str) -> None:
    """Record that this process has just finished ``phase`` (first time only)."""
    path = os.environ.get(ENV_VAR)
    if not path or phase in _seen:
        return
    _seen.add(phase)
    line = json.dumps({"phase": phase, "pid": os.getpid(), "t": time.time()}) + "\n"
    # One write() on an O_APPEND file: lines of concurrent processes never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
