"""``RunState``: everything a training run accumulates, in one object the run owns.

Counters, learner stats and timers (the dataflow's ``MetricsContext``), the iteration
number, the total training time and the window of completed episodes live here and
nowhere else. ``lower_plan`` points the output stream's shared metrics cell at
``RunState.metrics``, so ``plangraph.flow.metrics.get_metrics()`` inside any operator *is*
the run state's context and ``state.counters`` is what the operators count into.

Operators advance the run only through its methods: sources add finished episodes to
``state.episodes``; the sink (``StandardMetricsReporting``) brackets each iteration with
``begin_iteration`` / ``end_iteration``; the latter advances the iteration and time and
makes the ``Result``. Checkpoints hold ``get_state()`` (plain data, no code).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from plangraph.flow.metrics import MetricsContext
from plangraph.flow.timer import Timer
from plangraph.runtime.counters import (
    AGENT_SAMPLED,
    AGENT_TRAINED,
    RESTARTS,
    SAMPLED,
    TARGET_UPDATES,
    TRAINED,
    policy_counter,
)

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan
    from plangraph.runtime.result import Result

__all__ = ["EpisodeWindow", "IterationStart", "RunState"]

DEFAULT_METRICS_WINDOW = 100
"""Episodes averaged when the plan has no ``StandardMetricsReporting`` node to say."""


class EpisodeStats(TypedDict, total=False):
    """The episode keys of a result (``plangraph.runtime.result.Result``), all absent
    before the first episode ends."""

    episode_return_mean: float
    episode_return_min: float
    episode_return_max: float
    episode_len_mean: float


@dataclass
class EpisodeWindow:
    """Returns and lengths (env steps) of the last ``size`` completed training episodes,
    and ``total``, the number of episodes completed in the run."""

    size: int = DEFAULT_METRICS_WINDOW
    returns: collections.deque[float] = field(default_factory=collections.deque)
    lengths: collections.deque[int] = field(default_factory=collections.deque)
    total: int = 0

    def __post_init__(self) -> None:
        self.returns = collections.deque(self.returns, maxlen=self.size)
        self.lengths = collections.deque(self.lengths, maxlen=self.size)

    def add(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        """Record finished episodes: ``returns`` float [E], ``lengths`` int [E] (env steps)."""
        self.returns.extend(float(r) for r in returns)
        self.lengths.extend(int(n) for n in lengths)
        self.total += len(returns)

    def stats(self) -> EpisodeStats:
        """Means over the window; empty (keys absent, never NaN) before any episode ends."""
        if not self.returns:
            return {}
        return {
            "episode_return_mean": float(np.mean(self.returns)),
            "episode_return_min": float(np.min(self.returns)),
            "episode_return_max": float(np.max(self.returns)),
            "episode_len_mean": float(np.mean(self.lengths)),
        }

    def get_state(self) -> dict[str, Any]:
        return {"returns": list(self.returns), "lengths": list(self.lengths), "total": self.total}

    def set_state(self, state: dict[str, Any]) -> None:
        """Refill from ``get_state()`` output, in place (operators keep their reference);
        only the newest ``size`` episodes are kept."""
        self.returns.clear()
        self.returns.extend(state["returns"])
        self.lengths.clear()
        self.lengths.extend(state["lengths"])
        self.total = int(state["total"])


@dataclass(frozen=True)
class IterationStart:
    """Where an iteration in progress began (``RunState.begin_iteration``): the monotonic
    clock (s), env steps sampled and episodes completed by then."""

    clock_s: float
    env_steps_sampled: int
    episodes_total: int


@dataclass
class RunState:
    """The state of one training run: what a checkpoint saves and a result reports.

    Attributes:
        episodes: the completed-episode window (``metrics_window`` episodes).
        metrics: the dataflow's metrics context (counters, timers, info); every operator's
            ``get_metrics()`` once the plan is lowered.
        iteration: training iterations completed.
        time_total_s: seconds spent inside iterations (s), summed over the run.
        policy_episodes: multi-agent: per policy id, the window of its agents' completed
            episodes (lengths in agent steps); empty for single-agent plans.
        policy_learner: multi-agent: per policy id, its last learner stats.
    """

    episodes: EpisodeWindow = field(default_factory=EpisodeWindow)
    policy_episodes: dict[str, EpisodeWindow] = field(default_factory=dict)
    policy_learner: dict[str, dict[str, float]] = field(default_factory=dict)
    metrics: MetricsContext = field(default_factory=MetricsContext)
    iteration: int = 0
    time_total_s: float = 0.0

    @classmethod
    def for_plan(cls, compiled: CompiledPlan) -> RunState:
        """A fresh state, its episode window sized by the plan's ``StandardMetricsReporting``
        (the last such node's ``metrics_window``; 100 without one)."""
        window = DEFAULT_METRICS_WINDOW
        for node in compiled.nodes.values():
            if node.op == "StandardMetricsReporting":
                params: Any = node.params  # StandardMetricsReportingParams
                window = int(params.metrics_window)
        return cls(episodes=EpisodeWindow(size=window))

    @property
    def counters(self) -> collections.defaultdict[str, int]:
        """The run's counters by name (missing keys read as 0; env steps, counts)."""
        return self.metrics.counters

    @property
    def timers(self) -> collections.defaultdict[str, Timer]:
        """Wall-time timers by plan node id."""
        return self.metrics.timers

    @property
    def learner(self) -> dict[str, float]:
        """Scalar stats of the last learner update (empty before the first)."""
        return dict(self.metrics.info.get("learner", {}))

    def global_vars(self) -> dict[str, int]:
        """Sent with weights to workers; drives epsilon and lr schedules (env steps)."""
        # .get, not [...]: reading must not add a counter to the reported ones.
        return {"timestep": int(self.counters.get(SAMPLED, 0))}

    def policy_global_vars(self, policy_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        """Multi-agent: each policy's own global vars, ``{id: {"timestep": its agent steps
        sampled}}``, so its epsilon and lr schedules follow its own experience only."""
        return {
            pid: {"timestep": int(self.counters.get(policy_counter(AGENT_SAMPLED, pid), 0))}
            for pid in policy_ids
        }

    def policy_window(self, policy_id: str) -> EpisodeWindow:
        """The episode window of ``policy_id`` (created, as large as ``episodes``, on first
        use)."""
        window = self.policy_episodes.get(policy_id)
        if window is None:
            window = self.policy_episodes[policy_id] = EpisodeWindow(size=self.episodes.size)
        return window

    # -- iterations ------------------------------------------------------------------------

    def begin_iteration(self) -> IterationStart:
        """Start an iteration now: the returned mark times it and counts its env steps and
        episodes (pass it to ``iteration_progress`` and ``end_iteration``)."""
        return IterationStart(
            clock_s=time.monotonic(),
            env_steps_sampled=self.counters[SAMPLED],
            episodes_total=self.episodes.total,
        )

    def iteration_progress(self, start: IterationStart) -> tuple[float, int]:
        """``(seconds, env steps sampled)`` since ``start``."""
        return time.monotonic() - start.clock_s, self.counters[SAMPLED] - start.env_steps_sampled

    def end_iteration(self, start: IterationStart, elapsed_s: float) -> Result:
        """Close the iteration begun at ``start``, which took ``elapsed_s`` seconds (as
        ``iteration_progress`` measured it): advance ``iteration`` and ``time_total_s`` and
        return the iteration's ``Result``."""
        self.iteration += 1
        self.time_total_s += elapsed_s
        counters = {k: int(v) for k, v in sorted(self.counters.items())}
        sampled = counters.get(SAMPLED, 0)
        steps = self.counters[SAMPLED] - start.env_steps_sampled
        result: Result = {
            "iteration": self.iteration,
            "time_this_iter_s": elapsed_s,
            "time_total_s": self.time_total_s,
            "timestamp": time.time(),
            "num_env_steps_sampled": sampled,
            "num_env_steps_trained": counters.get(TRAINED, 0),
            "num_target_updates": counters.get(TARGET_UPDATES, 0),
            "num_worker_restarts": counters.get(RESTARTS, 0),
            "num_env_steps_sampled_this_iter": steps,
            "env_steps_per_s": steps / elapsed_s if elapsed_s > 0 else 0.0,
            "env_steps_per_s_total": (
                sampled / self.time_total_s if self.time_total_s > 0 else 0.0
            ),
            "episodes_this_iter": self.episodes.total - start.episodes_total,
            "episodes_total": self.episodes.total,
            "counters": counters,
            "timers": {k: t.mean for k, t in sorted(self.timers.items())},
            "learner": self.learner,
        }
        result.update(self.episodes.stats())
        if self.policy_episodes or self.policy_learner:
            result["num_agent_steps_sampled"] = counters.get(AGENT_SAMPLED, 0)
            result["num_agent_steps_trained"] = counters.get(AGENT_TRAINED, 0)
        policies: dict[str, dict[str, Any]] = {}
        for pid in sorted(set(self.policy_episodes) | set(self.policy_learner)):
            window = self.policy_episodes.get(pid)
            entry: dict[str, Any] = dict(window.stats()) if window is not None else {}
            entry["episodes_total"] = window.total if window is not None else 0
            for c in (AGENT_SAMPLED, AGENT_TRAINED):
                entry[c] = counters.get(policy_counter(c, pid), 0)
            entry["learner"] = dict(self.policy_learner.get(pid, {}))
            policies[pid] = entry
        if policies:
            result["policies"] = policies
        return result

    # -- checkpoint state ------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Checkpoint data: ``iteration``, ``time_total_s``, ``metrics`` (counters and info;
        timers restart), ``episodes`` (window and total)."""
        state: dict[str, Any] = {
            "iteration": self.iteration,
            "time_total_s": self.time_total_s,
            "metrics": self.metrics.save(),
            "episodes": self.episodes.get_state(),
        }
        if self.policy_episodes or self.policy_learner:
            state["policy_episodes"] = {
                pid: w.get_state() for pid, w in sorted(self.policy_episodes.items())
            }
            state["policy_learner"] = {
                pid: dict(stats) for pid, stats in sorted(self.policy_learner.items())
            }
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``get_state()`` output (other keys of ``state`` are ignored)."""
        self.iteration = int(state["iteration"])
        self.time_total_s = float(state["time_total_s"])
        self.metrics.restore(state["metrics"])
        self.episodes.set_state(state["episodes"])
        for pid, window in state.get("policy_episodes", {}).items():
            self.policy_window(pid).set_state(window)
        self.policy_learner.update(
            {pid: dict(stats) for pid, stats in state.get("policy_learner", {}).items()}
        )
