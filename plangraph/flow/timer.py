"""``Timer``: wall-clock seconds over a sliding window, the unit of a flow's timers.

A :class:`~plangraph.flow.metrics.MetricsContext` keeps one per operator
(``ctx.timers[name]``) and :class:`~plangraph.flow.profile.FlowProfile` pushes each marked
stream's seconds per item to its timer; both import it from here.
"""

from __future__ import annotations

import time
from collections import deque

__all__ = ["TIMER_WINDOW", "Timer"]

TIMER_WINDOW = 10
"""Samples a :class:`Timer` averages over (RLlib's ``_Timer`` window)."""


class Timer:
    """Wall-clock timer with a sliding window of the last ``window_size`` samples.

    Use as a context manager (``with ctx.timers["learn"]: ...``) or :meth:`push` seconds
    measured elsewhere. Not re-entrant and not thread-safe (one timer per operator).
    """

    def __init__(self, window_size: int = TIMER_WINDOW) -> None:
        if window_size < 1:
            raise ValueError(f"Timer window_size must be >= 1, got {window_size}")
        self._samples: deque[float] = deque(maxlen=window_size)
        self._units: deque[float] = deque(maxlen=window_size)
        self._start: float | None = None
        self.count = 0
        """Samples pushed since creation (not windowed)."""
        self.total_time = 0.0
        """Seconds pushed since creation (not windowed)."""

    def __enter__(self) -> Timer:
        if self._start is not None:
            raise RuntimeError("Timer is already running; timers cannot be nested")
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._start is not None
        self.push(time.perf_counter() - self._start)
        self._start = None

    def push(self, seconds: float) -> None:
        """Record one sample of ``seconds`` (wall time)."""
        self._samples.append(float(seconds))
        self.count += 1
        self.total_time += float(seconds)

    def push_units_processed(self, n: float) -> None:
        """Record that the latest timed section processed ``n`` units (e.g. env steps)."""
        self._units.append(float(n))

    def has_units_processed(self) -> bool:
        return bool(self._units)

    @property
    def mean(self) -> float:
        """Mean seconds over the window; 0.0 with no samples."""
        return sum(self._samples) / len(self._samples) if self._samples else 0.0

    @property
    def mean_units_processed(self) -> float:
        return sum(self._units) / len(self._units) if self._units else 0.0

    @property
    def mean_throughput(self) -> float:
        """Units per second over the window (sum of units / sum of seconds); 0.0 if unknown."""
        seconds = sum(self._samples)
        return sum(self._units) / seconds if self._units and seconds > 0 else 0.0
