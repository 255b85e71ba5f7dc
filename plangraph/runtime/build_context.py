"""What a lowering is given: the built resources of one plan and the run's state.

Resources (worker sets, replay buffers) are created once per plan and looked up by
resource id (``"@workers"`` -> ``ctx.worker_sets["workers"]``). Counters, iteration, time
and the episode window are not kept here: they live in ``ctx.run_state``
(``plangraph.runtime.run_state.RunState``), the one object the run owns.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from plangraph.errors import BuildError
from plangraph.runtime.run_state import RunState

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan


def resource_id(ref: str) -> str:
    """``"@replay"`` -> ``"replay"`` (the compiler has already checked the reference)."""
    return ref[1:] if ref.startswith("@") else ref


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
        # "module:EnvId" (as gymnasium.make accepts it): importing the module registers
        # the env, here and in each rollout worker's own gymnasium.make.
        module, _, env_id = params.env.rpartition(":")
        try:
            if module:
                importlib.import_module(module)
            gymnasium.spec(env_id)
        except ImportError as exc:
            raise BuildError(
                f"resource {rid!r}: env {params.env!r}: cannot import module {module!r} "
                f"({exc}); it must be importable here and in the rollout workers"
            ) from exc
        except gymnasium.error.Error as exc:
            raise BuildError(
                f"resource {rid!r}: env {params.env!r} is not a registered gymnasium env: "
                f"{exc} (pass --env with an id from gymnasium.registry)"
            ) from exc
    return params


@dataclass
class BuildContext:
    """The built plan every lowering shares: compiled plan, run seed, resources by id
    (``worker_sets``, ``buffers``) and ``run_state``, the run's counters and iteration."""

    compiled: CompiledPlan
    seed: int
    worker_sets: dict[str, Any]
    buffers: dict[str, Any]
    run_state: RunState
    learners: dict[str, Any] = field(default_factory=dict)
    """Learner threads by resource id (``plangraph.runtime.learner_thread.LearnerThread``)."""
    policy_locks: dict[str, threading.RLock] = field(default_factory=dict)
    """One lock per worker set, held by whoever touches its learner policy: a learner
    thread while it trains, driver operators while they read weights or sync a target."""

    @classmethod
    def create(
        cls,
        compiled: CompiledPlan,
        *,
        env: str | None,
        num_workers: int | None,
        seed: int,
        address: str | None = None,
        run_state: RunState | None = None,
    ) -> BuildContext:
        """Start the plan's worker sets and create its replay buffers (``env`` and
        ``num_workers`` override every ``WorkerSet``); ``run_state`` defaults to a fresh
        ``RunState.for_plan(compiled)``.

        Raises:
            BuildError: an override is invalid, the env id is unknown, or the replay buffers
                cannot fit in the available memory (all before Ray starts).
        """
        from plangraph.rl import WorkerSet, make_replay_buffer
        from plangraph.runtime.memory_check import check_replay_memory
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
        # A buffer that can never fill is refused now, not after the workers started.
        check_replay_memory(compiled, params)
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
            elif res.kind == "LearnerThread":
                pass  # built below, once the worker set it trains exists
            else:
                raise NotImplementedError(
                    f"resource {rid!r}: no runtime implementation for kind {res.kind!r}"
                )
        ctx = cls(
            compiled=compiled,
            seed=seed,
            worker_sets=worker_sets,
            buffers=buffers,
            run_state=run_state if run_state is not None else RunState.for_plan(compiled),
            policy_locks={rid: threading.RLock() for rid in worker_sets},
        )
        for rid, res in sorted(compiled.resources.items()):
            if res.kind == "LearnerThread":
                ctx.learners[rid] = ctx._learner_thread(rid, params[rid])
        return ctx

    def _learner_thread(self, rid: str, params: Any) -> Any:
        from plangraph.runtime.learner_thread import LearnerThread

        ws_id = resource_id(params.workers)
        if ws_id not in self.worker_sets:
            self.stop()
            raise BuildError(
                f"resource {rid!r}: workers {params.workers!r} names no WorkerSet resource "
                f"(worker sets: {', '.join(sorted(self.worker_sets)) or 'none'})"
            )
        return LearnerThread(
            self.worker_sets[ws_id].local_policy,
            name=rid,
            inqueue_size=params.inqueue_size,
            outqueue_size=params.outqueue_size,
            num_sgd_iter=params.num_sgd_iter,
            minibatch_buffer_size=params.minibatch_buffer_size,
            global_vars=self.run_state.global_vars,
            lock=self.policy_locks[ws_id],
            workers=ws_id,
        )

    def learner(self, ref: str) -> Any:
        """The (started) learner thread ``ref`` names."""
        thread = self.learners[resource_id(ref)]
        thread.start()
        return thread

    def policy_lock(self, ref: str) -> threading.RLock:
        """The lock of worker set ``ref``'s learner policy (see :attr:`policy_locks`)."""
        return self.policy_locks[resource_id(ref)]

    def worker_set(self, ref: str) -> Any:
        return self.worker_sets[resource_id(ref)]

    def buffer(self, ref: str) -> Any:
        return self.buffers[resource_id(ref)]

    # -- checkpoint state ------------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Checkpoint data of the resources: ``policies`` (learner policy state by worker
        set id) and ``buffers`` (replay contents by id). The run's own state is
        ``run_state.get_state()``."""
        policies = {}
        for rid, ws in self.worker_sets.items():
            with self.policy_locks[rid]:  # never half an update of a running learner thread
                policies[rid] = ws.local_policy.get_state()
        state: dict[str, Any] = {
            "policies": policies,
            "buffers": {rid: buf.get_state() for rid, buf in self.buffers.items()},
        }
        if self.learners:
            state["learners"] = {rid: t.get_state() for rid, t in self.learners.items()}
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore ``get_state()`` output and send the restored weights to the rollout
        workers (with ``run_state``'s global vars, so restore that first)."""
        for rid, policy_state in state["policies"].items():
            ws = self.worker_sets[rid]
            ws.local_policy.set_state(policy_state)
            ws.sync_weights(self.run_state.global_vars())
        for rid, buf_state in state["buffers"].items():
            self.buffers[rid].set_state(buf_state)
        for rid, learner_state in state.get("learners", {}).items():
            self.learners[rid].set_state(learner_state)

    def stop(self) -> None:
        """Join the learner threads, then release every actor. Idempotent."""
        for thread in self.learners.values():
            thread.stop()
        for ws in self.worker_sets.values():
            ws.stop()
