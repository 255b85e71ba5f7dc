"""The live state one built plan shares across its lowered operators.

Resources (worker sets, replay buffers) are created once per plan and looked up by
resource id (``"@workers"`` -> ``ctx.worker_sets["workers"]``); the metrics context and the
episode window are shared by every operator of the dataflow.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan
    from plangraph.flow.metrics import MetricsContext, SharedMetrics


def resource_id(ref: str) -> str:
    """``"@replay"`` -> ``"replay"`` (the compiler has already checked the reference)."""
    return ref[1:] if ref.startswith("@") else ref


class BuildError(ValueError):
    """A plan that compiled cleanly cannot be built as asked (e.g. an unknown env id)."""


def _with_overrides(rid: str, params: Any, updates: dict[str, Any]) -> Any:
    """``params`` with ``build()``'s overrides, validated like the plan's own values, and
    its env id checked against gymnasium's registry before any actor starts."""
    import gymnasium
    import pydantic

    try:
        params = type(params).model_validate({**params.model_dump(), **updates})
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise BuildError(f"resource {rid!r}: invalid override ({problems})") from exc
    if isinstance(params.env, str):
        try:
            gymnasium.spec(params.env)
        except gymnasium.error.Error as exc:
            raise BuildError(
                f"resource {rid!r}: env {params.env!r} is not a registered gymnasium env: "
                f"{exc} (pass --env with an id from gymnasium.registry)"
            ) from exc
    return params


@dataclass
class EpisodeWindow:
    """Returns and lengths of the last ``size`` completed training episodes."""

    size: int = 100
    returns: collections.deque[float] = field(default_factory=collections.deque)
    lengths: collections.deque[int] = field(default_factory=collections.deque)
    total: int = 0

    def __post_init__(self) -> None:
        self.returns = collections.deque(self.returns, maxlen=self.size)
        self.lengths = collections.deque(self.lengths, maxlen=self.size)

    def add(self, returns: np.ndarray, lengths: np.ndarray) -> None:
        self.returns.extend(float(r) for r in returns)
        self.lengths.extend(int(n) for n in lengths)
        self.total += len(returns)

    def stats(self) -> dict[str, float]:
        """Means over the window; empty (keys absent, never NaN) before any episode ends."""
        if not self.returns:
            return {}
        return {
            "episode_return_mean": float(np.mean(self.returns)),
            "episode_return_min": float(np.min(self.returns)),
            "episode_return_max": float(np.max(self.returns)),
            "episode_len_mean": float(np.mean(self.lengths)),
        }


@dataclass
class BuildContext:
    """Everything a lowered plan shares: resources, metrics, episode window, iteration."""

    compiled: CompiledPlan
    seed: int
    worker_sets: dict[str, Any]
    buffers: dict[str, Any]
    episodes: EpisodeWindow
    iteration: int = 0
    time_total_s: float = 0.0
    # The output stream's metrics cell, set by lowering (a union re-points the cells of
    # its inputs to one merged context, so the context is only final after lowering).
    shared_metrics: SharedMetrics | None = None

    @property
    def metrics(self) -> MetricsContext:
        if self.shared_metrics is None:
            raise RuntimeError("the plan has not been lowered yet")
        return self.shared_metrics.get()

    @classmethod
    def create(
        cls,
        compiled: CompiledPlan,
        *,
        env: str | None,
        num_workers: int | None,
        seed: int,
        address: str | None = None,
    ) -> BuildContext:
        from plangraph.rl import WorkerSet, make_replay_buffer
        from plangraph.runtime.ray_session import ensure_ray

        updates: dict[str, Any] = {}
        if env is not None:
            updates["env"] = env
        if num_workers is not None:
            updates["num_workers"] = num_workers
        # Every override is checked before Ray starts or any actor is created.
        params = {
            rid: _with_overrides(rid, res.params, updates)
            if res.kind == "WorkerSet"
            else res.params
            for rid, res in compiled.resources.items()
        }
        ensure_ray(address)
        worker_sets: dict[str, Any] = {}
        buffers: dict[str, Any] = {}
        # Each resource gets its own seed stream derived from the run seed.
        seeds = np.random.SeedSequence(seed).spawn(max(1, len(compiled.resources)))
        for (rid, res), ss in zip(sorted(compiled.resources.items()), seeds, strict=False):
            res_seed = int(ss.generate_state(1)[0])
            p = params[rid]
            if res.kind == "WorkerSet":
                worker_sets[rid] = WorkerSet.from_params(p, seed=res_seed)
            elif res.kind == "ReplayBuffer":
                buffers[rid] = make_replay_buffer(p, seed=res_seed)
            else:
                raise NotImplementedError(
                    f"resource {rid!r}: no runtime implementation for kind {res.kind!r}"
                )
        window = 100
        for node in compiled.nodes.values():
            if node.op == "StandardMetricsReporting":
                window = int(node.params.metrics_window)
        return cls(
            compiled=compiled,
            seed=seed,
            worker_sets=worker_sets,
            buffers=buffers,
            episodes=EpisodeWindow(size=window),
        )

    def worker_set(self, ref: str) -> Any:
        return self.worker_sets[resource_id(ref)]

    def buffer(self, ref: str) -> Any:
        return self.buffers[resource_id(ref)]

    def global_vars(self) -> dict[str, int]:
        """Sent with weights to workers; drives epsilon and lr schedules (env steps)."""
        return {"timestep": int(self.metrics.counters.get("num_env_steps_sampled", 0))}

    # -- checkpoint state ------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        return {
            "iteration": self.iteration,
            "time_total_s": self.time_total_s,
            "metrics": self.metrics.save(),
            "episodes": {
                "returns": list(self.episodes.returns),
                "lengths": list(self.episodes.lengths),
                "total": self.episodes.total,
            },
            "policies": {rid: ws.local_policy.get_state() for rid, ws in self.worker_sets.items()},
            "buffers": {rid: buf.get_state() for rid, buf in self.buffers.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.iteration = int(state["iteration"])
        self.time_total_s = float(state["time_total_s"])
        self.metrics.restore(state["metrics"])
        ep = state["episodes"]
        self.episodes = EpisodeWindow(
            size=self.episodes.size,
            returns=collections.deque(ep["returns"]),
            lengths=collections.deque(ep["lengths"]),
            total=int(ep["total"]),
        )
        for rid, policy_state in state["policies"].items():
            ws = self.worker_sets[rid]
            ws.local_policy.set_state(policy_state)
            ws.sync_weights(self.global_vars())
        for rid, buf_state in state["buffers"].items():
            self.buffers[rid].set_state(buf_state)

    def stop(self) -> None:
        for ws in self.worker_sets.values():
            ws.stop()
