"""The one stop loop: train until a stop criterion, ``max_iterations`` or an interrupt.

``Algorithm.run`` and ``plangraph run`` (``run_loop.train_until``) both iterate a
:class:`TrainingLoop`; the latter adds its logging, progress bar and checkpoints in the
loop body, which runs after each iteration and before the loop decides whether to go on::

    loop = TrainingLoop(algo.train, StopCriteria.parse({"episode_return_mean": 475}))
    for result in loop:
        log(result)
    loop.reason   # "stop criterion met: episode_return_mean = 480 >= 475"
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plangraph.runtime.result import Result
    from plangraph.runtime.stopping import StopCriteria

__all__ = ["INTERRUPTED", "MAX_ITERATIONS", "TrainingLoop"]

INTERRUPTED = "interrupted (Ctrl-C)"
MAX_ITERATIONS = "max iterations"


def _never() -> bool:
    return False


class TrainingLoop:
    """Iterating it calls ``train()`` once per step and yields each ``Result``; it ends
    after the first result that meets ``stop``, after an iteration that finished once
    ``interrupt_requested()`` became true, or once ``result["iteration"] >=
    max_iterations`` (checked in that order). Single use.

    Attributes:
        result: the last result (``None`` before the first iteration ends).
        reason: why the loop ended, as reported to the user: ``"stop criterion met: <key>
            = <value> >= <threshold>"``, ``INTERRUPTED`` or ``MAX_ITERATIONS``; ``None``
            while it runs.
        interrupted: the loop ended because of an interrupt (exit code 130 for the CLI).
    """

    def __init__(
        self,
        train: Callable[[], Result],
        stop: StopCriteria,
        *,
        max_iterations: int | None = None,
        interrupt_requested: Callable[[], bool] = _never,
    ) -> None:
        self._train = train
        self._stop = stop
        self._max_iterations = max_iterations
        self._interrupt_requested = interrupt_requested
        self.result: Result | None = None
        self.reason: str | None = None
        self.interrupted = False

    def __iter__(self) -> Iterator[Result]:
        if self.reason is not None or self.result is not None:
            raise RuntimeError("a TrainingLoop runs once; make a new one")
        while True:
            self.result = self._train()
            yield self.result
            # Decided after the caller's body ran (log, checkpoint), so a Ctrl-C during it
            # still stops after this iteration.
            met = self._stop.met(self.result)
            if met:
                self.reason = f"stop criterion met: {met}"
                return
            if self._interrupt_requested():
                self.interrupt()
                return
            if self._max_iterations is not None and (
                self.result["iteration"] >= self._max_iterations
            ):
                self.reason = MAX_ITERATIONS
                return

    def interrupt(self) -> None:
        """Record that the run was interrupted (e.g. a ``KeyboardInterrupt`` out of
        ``train()``, which ends the iteration early)."""
        self.interrupted = True
        self.reason = INTERRUPTED
