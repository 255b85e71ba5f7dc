"""The learner thread: trains a worker set's learner policy beside the driver's dataflow.

IMPALA/APPO (Espeholt et al. 2018) overlap sampling and learning: the driver keeps pulling
rollouts and puts train batches on the learner's **in-queue** (``Enqueue``) while this
thread trains on them and puts one ``TrainInfo`` per trained batch on its **out-queue**
(``Dequeue``). Both queues are bounded, so a slow learner applies back-pressure to the
driver (``Enqueue`` yields not-ready and retries the same batch; nothing is dropped) and a
driver that stops reading stalls the learner instead of growing memory.

Batches are read through a *minibatch buffer* (RLlib 1.x ``MinibatchBuffer``): a ring of
``minibatch_buffer_size`` slots in which each batch is trained on ``num_sgd_iter`` times,
the passes of different batches interleaved. ``num_env_steps_trained`` counts a batch's
rows once, on its last pass (DESIGN.md: counters count rows trained once per batch).

The policy is shared with the driver (weight syncs, target updates, checkpoints); every
access goes through :attr:`LearnerThread.lock`. A failure inside the thread is kept and
re-raised at the driver by the next ``Enqueue``/``Dequeue`` as an ``OperatorError`` naming
the node, never swallowed; ``stop()`` joins the thread within its poll interval.

Deadlines. The driver waits on the thread in two places, neither for ever: ``Enqueue`` and
``Dequeue`` (through :meth:`LearnerThread.check`) raise ``OperatorTimeoutError`` once one
update has run for :data:`UPDATE_DEADLINE_S`, and ``stop()`` raises ``WaitTimeoutError`` if
the thread has not ended within :data:`STOP_DEADLINE_S`. The thread's own waits (for a batch
from the driver, for room in the out-queue) have none: the driver may legitimately not feed
or read it for as long as it likes (between ``train()`` calls, while it checkpoints), and
both re-check the stop flag every ``_POLL_S``.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plangraph.errors import WaitTimeoutError
from plangraph.flow.errors import OperatorError, OperatorTimeoutError
from plangraph.runtime.items import ReplayPriorities, scalar_stats

__all__ = ["LearnerThread", "LearnerUpdate"]

_POLL_S = 0.05
"""How often a blocked queue operation re-checks the stop flag (seconds)."""

UPDATE_DEADLINE_S = 1800.0
"""Seconds one update of the learner thread (waiting for the policy lock, then one
``learn_on_batch`` pass) may take before the driver, waiting on the thread in ``Enqueue`` or
``Dequeue``, gives up with ``OperatorTimeoutError``. A pass over a train batch takes
milliseconds for the MLPs here and seconds for a large CNN batch on 2 loaded cores; the
driver holds the lock only briefly (reading weights for a broadcast or a checkpoint,
syncing a target). Thirty minutes (as
``plangraph.flow.deadlines.REPLY_DEADLINE_S`` for an actor's reply) only ends a thread that
hangs: a deadlock, a device that stopped answering."""

STOP_DEADLINE_S = 60.0
"""Seconds ``stop()`` waits for the thread to end before it raises ``WaitTimeoutError``.
The thread checks its stop flag between updates and every ``_POLL_S`` while it waits on a
queue, so it ends within one update (well under a second for the MLPs here, seconds for a
large CNN batch on 2 loaded cores)."""


@dataclass(frozen=True)
class LearnerUpdate:
    """What the learner thread reports for one trained batch (its last pass).

    Attributes:
        stats: learner stats of that pass (scalars), plus ``policy_lag``: learner version
            at training time minus the behaviour version the batch was sampled with
            (mean over its rows; 0 when the batch carries no ``policy_version`` column).
        count: env steps (rows) of the batch, counted once.
        version: the learner's policy version after this update (updates so far).
        replay: the batch's TD errors keyed by replay shard and slot, when it was replayed
            from ``ReplayActors`` and the loss reports them (DQN; Ape-X's priorities).
    """

    stats: dict[str, float]
    count: int
    version: int
    replay: ReplayPriorities | None = None


@dataclass
class _Slot:
    batch: Any
    passes_left: int


@dataclass
class LearnerThread:
    """A daemon thread training ``policy`` on batches from :attr:`inqueue`.

    Args:
        policy: the worker set's learner policy (``TorchPolicy``).
        name: the resource id (thread name, errors).
        inqueue_size: train batches waiting for the learner, at most.
        outqueue_size: ``LearnerUpdate`` items waiting for the driver, at most.
        num_sgd_iter: passes over each batch.
        minibatch_buffer_size: batches whose passes are interleaved (ring slots).
        global_vars: callable giving the global vars (``{"timestep": ...}``) to set on the
            policy before each update (lr schedules).
    """

    policy: Any
    name: str
    inqueue_size: int = 16
    outqueue_size: int = 16
    num_sgd_iter: int = 1
    minibatch_buffer_size: int = 1
    global_vars: Any = None
    lock: threading.RLock = field(default_factory=threading.RLock)
    workers: str = "workers"
    """Id of the worker set whose learner policy this trains (weight syncs use it)."""
    version: int = 0
    busy_s: float = 0.0
    """Seconds spent training (the thread's busy time; divide by wall time for a fraction)."""

    def __post_init__(self) -> None:
        self.inqueue: queue.Queue[Any] = queue.Queue(maxsize=self.inqueue_size)
        self.outqueue: queue.Queue[LearnerUpdate] = queue.Queue(maxsize=self.outqueue_size)
        self._slots: collections.deque[_Slot] = collections.deque()
        self._stop = threading.Event()
        self._error: tuple[str, str] | None = None
        self._started_at: float | None = None
        # When the update in progress began (time.monotonic()), None between updates.
        self._update_since: float | None = None
        self._thread = threading.Thread(target=self._run, name=f"learner-{self.name}", daemon=True)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if not self._thread.is_alive() and not self._stop.is_set() and self._started_at is None:
            self._started_at = time.monotonic()
            self._thread.start()

    def stop(self, timeout_s: float | None = None) -> None:
        """Ask the thread to stop and join it (a batch in training finishes first).

        Raises:
            WaitTimeoutError: the thread is still running after ``timeout_s`` seconds
                (default :data:`STOP_DEADLINE_S`); it stops after its current update.
        """
        self._stop.set()
        if not self._thread.is_alive():
            return
        limit = STOP_DEADLINE_S if timeout_s is None else timeout_s
        self._thread.join(limit)
        if self._thread.is_alive():
            raise WaitTimeoutError(
                f"learner thread {self.name!r} did not stop within {limit:g} s "
                f"(STOP_DEADLINE_S of plangraph.runtime.learner_thread): it is "
                f"{self._doing()}; is learn_on_batch stuck (a deadlock, a device that stopped "
                "answering)?"
            )

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def busy_fraction(self) -> float:
        """Training time over the thread's lifetime so far, in [0, 1]."""
        if self._started_at is None:
            return 0.0
        wall = time.monotonic() - self._started_at
        return min(1.0, self.busy_s / wall) if wall > 0 else 0.0

    def check(self, node_id: str) -> None:
        """Raise the thread's failure at the driver, as an ``OperatorError`` of ``node_id``.

        Raises:
            OperatorError: the thread died with an exception (its traceback attached), or
                stopped while the dataflow still needs it.
        """
        if self._error is not None:
            detail, text = self._error
            raise OperatorError(node_id, f"learner thread {self.name!r} failed: {detail}", text)
        if self._started_at is not None and not self._thread.is_alive():
            raise OperatorError(
                node_id, f"learner thread {self.name!r} is not running (it was stopped)"
            )
        since = self._update_since
        if since is not None and time.monotonic() - since > UPDATE_DEADLINE_S:
            raise OperatorTimeoutError(
                node_id,
                f"OperatorTimeoutError: learner thread {self.name!r} has been in one update for "
                f"more than {UPDATE_DEADLINE_S:g} s (UPDATE_DEADLINE_S of "
                f"plangraph.runtime.learner_thread; it is {self._doing()}), so no update "
                "reaches the driver: is learn_on_batch stuck (a deadlock, a device that "
                "stopped answering)?",
            )

    def _doing(self) -> str:
        """What the thread is busy with, for messages."""
        since = self._update_since
        if since is None:
            return "between updates"
        return f"in an update started {time.monotonic() - since:.0f} s ago (version {self.version})"

    # -- the thread ------------------------------------------------------------------------

    def _next_slot(self) -> _Slot | None:
        """The next slot to train on: refill the ring from the in-queue while it has room."""
        while len(self._slots) < self.minibatch_buffer_size:
            block = not self._slots  # with nothing buffered, wait for a batch
            try:
                batch = self.inqueue.get(timeout=_POLL_S) if block else self.inqueue.get_nowait()
            except queue.Empty:
                break
            self._slots.append(_Slot(batch, self.num_sgd_iter))
        if not self._slots:
            return None
        slot = self._slots.popleft()
        slot.passes_left -= 1
        if slot.passes_left > 0:
            self._slots.append(slot)
        return slot

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                slot = self._next_slot()
                if slot is None:
                    continue
                started = self._update_since = time.monotonic()
                with self.lock:
                    if self.global_vars is not None:
                        self.policy.set_global_vars(self.global_vars())
                    lag = _policy_lag(slot.batch, self.version)
                    stats = self.policy.learn_on_batch(slot.batch)
                    self.version += 1
                    version = self.version
                self._update_since = None
                self.busy_s += time.monotonic() - started
                if slot.passes_left == 0:
                    scalars = scalar_stats(stats)
                    scalars["policy_lag"] = lag
                    replay = ReplayPriorities.of(slot.batch, stats)
                    self._put(LearnerUpdate(scalars, int(slot.batch.count), version, replay))
        except BaseException as exc:  # surfaced at the driver by check()
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._error = (detail, "".join(traceback.format_exception(exc)))

    def _put(self, update: LearnerUpdate) -> None:
        while not self._stop.is_set():
            try:
                self.outqueue.put(update, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    # -- checkpoints ---------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """``{"version": int}``: the policy itself is checkpointed with its worker set."""
        with self.lock:
            return {"version": self.version}

    def set_state(self, state: dict[str, Any]) -> None:
        with self.lock:
            self.version = int(state["version"])


def _policy_lag(batch: Any, version: int) -> float:
    """Learner version minus the mean behaviour version of ``batch`` (0 without one)."""
    if "policy_version" not in batch:
        return 0.0
    return float(version - np.mean(batch["policy_version"]))
