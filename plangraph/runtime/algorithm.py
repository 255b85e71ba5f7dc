"""``Algorithm``: a compiled plan lowered onto Ray actors, trained one iteration at a time.

compiled = plangraph.compile("plans/ppo.json")
algo = plangraph.build(compiled, env="CartPole-v1", num_workers=2, seed=0)
result = algo.train()              # one iteration: a ``Result`` (plangraph.runtime.result)
algo.run(stop={"episode_return_mean": 475})
algo.run_state.counters             # the run's counters, iteration, time, episode window
algo.save("ckpt"); algo.restore("ckpt"); algo.stop()
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from plangraph.errors import BuildError, CheckpointError
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.checkpoint import LEGACY_STATE_FILE, read_state, write_state
from plangraph.runtime.counters import SAMPLED
from plangraph.runtime.run_state import RunState
from plangraph.runtime.stopping import StopCriteria
from plangraph.runtime.training_loop import TrainingLoop

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan
    from plangraph.ir.profile import RunProfile
    from plangraph.runtime.result import Result

CHECKPOINT_VERSION = 2
"""2: data-only state (``state.json`` + ``arrays.npz``); 1 was a pickle, no longer read."""

META_FILE = "algorithm.json"


class CheckpointMeta(pydantic.BaseModel):
    """``algorithm.json`` of a checkpoint directory: what it is and where the run was."""

    model_config = pydantic.ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    version: Literal[2]
    plan: str = pydantic.Field(description="name of the plan that wrote the checkpoint")
    iteration: int = pydantic.Field(ge=0, description="iterations completed")
    num_env_steps_sampled: int = pydantic.Field(ge=0, description="env steps sampled")
    time_total_s: float = pydantic.Field(ge=0, description="training time so far (s)")
    saved_at: float = pydantic.Field(description="Unix time of the save (s)")
    state_sha256: str | None = pydantic.Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of state.json (which records the SHA-256 of arrays.npz); "
        "written by every save, checked on load when present",
    )


def _state_sha256(path: Path) -> str:
    from plangraph.runtime.checkpoint import STATE_FILE

    return hashlib.sha256((path / STATE_FILE).read_bytes()).hexdigest()


def read_checkpoint_meta(path: Path) -> CheckpointMeta:
    """Validate ``path/algorithm.json``.

    Raises:
        CheckpointError: missing, not JSON, an old (pickle) checkpoint, or not the
            ``CheckpointMeta`` shape; one line naming the file and the field.
    """
    meta_file = path / META_FILE
    try:
        raw = json.loads(meta_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: not a plangraph checkpoint (no {META_FILE})") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(f"{meta_file}: not readable JSON ({exc})") from None
    if isinstance(raw, dict) and raw.get("version") == 1:
        raise CheckpointError(
            f"{path}: version-1 checkpoint ({LEGACY_STATE_FILE}, a pickle); it is not loaded "
            "because unpickling a file can run arbitrary code. Start a new run"
        )
    try:
        return CheckpointMeta.model_validate(raw)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        where = "/".join(map(str, err["loc"])) or "/"
        raise CheckpointError(f"{meta_file}: {where}: {err['msg']}") from None


def _check_evaluation(interval: Any, episodes: Any) -> None:
    """Raise ``BuildError`` unless ``interval`` >= 0 and ``episodes`` >= 1 are ints."""
    for name, value, low in (
        ("evaluation_interval", interval, 0),
        ("evaluation_episodes", episodes, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise BuildError(f"{name}={value!r}: must be an integer >= {low}")


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint directory read and validated, not yet applied (``Algorithm.restore``).

    Attributes:
        path: the directory.
        meta: its ``algorithm.json``.
        state: the state tree (``plangraph.runtime.checkpoint``): ``iteration``,
            ``time_total_s``, ``metrics``, ``episodes``, ``policies``, ``buffers``, ...
    """

    path: Path
    meta: CheckpointMeta
    state: dict[str, Any]

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, plan: str | None = None) -> Checkpoint:
        """Read ``path`` (JSON and a pickle-free npz only; nothing in it can run code).

        Raises:
            CheckpointError: not a complete checkpoint; corrupt, truncated or hand-edited;
                an old pickle checkpoint (refused); of a plan other than ``plan``; or its
                state lacks one of the run's parts.
        """
        path = Path(path)
        meta = read_checkpoint_meta(path)
        if plan is not None and meta.plan != plan:
            raise CheckpointError(f"{path}: checkpoint of plan {meta.plan!r}, not of {plan!r}")
        try:
            digest = _state_sha256(path) if meta.state_sha256 is not None else None
        except OSError as exc:
            raise CheckpointError(f"{path}: cannot read the state ({exc})") from None
        if digest != meta.state_sha256:
            # state.json is strict JSON, so a hand edit still parses: only the hash tells.
            raise CheckpointError(
                f"{path}: state.json does not match {META_FILE} (SHA-256 differs): the "
                "checkpoint is corrupt or was edited"
            )
        state = read_state(path)
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: state is a {type(state).__name__}, not an object")
        missing = {"iteration", "time_total_s", "metrics", "episodes", "policies", "buffers"}
        missing -= set(state)
        if missing:
            raise CheckpointError(f"{path}: state lacks {sorted(missing)}")
        for part in ("policies", "buffers"):
            if not isinstance(state[part], dict):
                raise CheckpointError(f"{path}: state {part!r} is not an object")
        return cls(path=path, meta=meta, state=state)


class Algorithm:
    """A running plan: worker sets and replay buffers as declared, the dataflow lowered.

    Built by ``plangraph.build(compiled, env=None, num_workers=None, seed=0, address=None)``;
    ``env``/``num_workers`` override every ``WorkerSet`` resource of the plan. ``env`` is a
    gymnasium env id (registered in this process: by gymnasium, a Python plan file or a
    module you imported) or a callable returning a ``gym.Env``; either travels to every
    rollout worker (``plangraph.rl.envs``). ``evaluation_interval`` (iterations; 0: never)
    and ``evaluation_episodes`` add greedy evaluation episodes to every
    ``evaluation_interval``-th result (``plangraph.runtime.evaluation``).

    Attributes:
        compiled: the plan as compiled (declared params; what checkpoints record).
        executed: ``compiled.executed``, the optimisation passes' plan that is lowered.
        run_state: the run's counters, learner stats, iteration, total time and episode
            window (``plangraph.runtime.run_state.RunState``).
        ctx: the built resources (``worker_sets``, ``buffers``) the lowered plan uses.

    Raises:
        PlanValidationError: the compiled plan has errors.
        BuildError: an override or an evaluation setting is invalid, the env id is
            unknown, or an operator has no implementation (all before Ray starts).
    """

    def __init__(
        self,
        compiled: CompiledPlan,
        *,
        env: str | Callable[..., Any] | None = None,
        num_workers: int | None = None,
        seed: int = 0,
        address: str | None = None,
        evaluation_interval: int = 0,
        evaluation_episodes: int = 10,
        record: str | None = None,
    ) -> None:
        if not compiled.ok:
            from plangraph.compiler import PlanValidationError

            raise PlanValidationError(compiled.diagnostics, compiled)
        from plangraph.runtime.lowering import check_implementations, lower_plan

        # The declared plan is what a run records (plan.json); the optimisation passes'
        # executed plan is what runs.
        self.compiled = compiled
        self.executed = compiled.executed
        check_implementations(self.executed)  # before any actor starts
        _check_evaluation(evaluation_interval, evaluation_episodes)
        self.seed = seed
        self.run_state = RunState.for_plan(self.executed)
        self.ctx = BuildContext.create(
            self.executed,
            env=env,
            num_workers=num_workers,
            seed=seed,
            address=address,
            run_state=self.run_state,
            record_dir=record,
        )
        self._stopped = False
        self.evaluation_interval = int(evaluation_interval)
        self.evaluation_episodes = int(evaluation_episodes)
        self._evaluator: Any = None
        try:
            self._results = iter(lower_plan(self.executed, self.ctx))
            if self.evaluation_interval:
                self._evaluator = self._make_evaluator(self.evaluation_episodes)
        except BaseException:
            self.stop()
            raise
        self._profile_start()

    @property
    def iteration(self) -> int:
        """Training iterations completed (restored ones included)."""
        return self.run_state.iteration

    def train(self) -> Result:
        """Run one training iteration (as the plan's ``StandardMetricsReporting`` defines
        it) and return its ``Result`` (keys: ``plangraph.runtime.result.Result``); every
        ``evaluation_interval`` iterations it also holds ``evaluation`` (greedy episodes,
        ``plangraph.runtime.evaluation``)."""
        if self._stopped:
            raise BuildError("this Algorithm was stopped; build a new one")
        result = next(self._results)
        if self._evaluator is not None and result["iteration"] % self.evaluation_interval == 0:
            result["evaluation"] = self._evaluator.evaluate(result["iteration"])
        return result

    # -- the trained policy ----------------------------------------------------------------

    @property
    def policy(self) -> Any:
        """The learner ``TorchPolicy`` of the plan's worker set (the first by resource id
        when it declares several)."""
        return self.ctx.worker_sets[self._policy_resource()].local_policy

    def _policy_resource(self) -> str:
        if not self.ctx.worker_sets:
            raise BuildError(f"plan {self.compiled.plan.name!r} declares no WorkerSet")
        return sorted(self.ctx.worker_sets)[0]

    def _make_evaluator(self, episodes: int) -> Any:
        from plangraph.runtime.evaluation import Evaluator

        rid = self._policy_resource()
        return Evaluator(
            self.ctx.worker_sets[rid], self.ctx.policy_lock(rid), episodes=episodes, seed=self.seed
        )

    def compute_actions(self, obs: Any, explore: bool = False) -> Any:
        """Actions of the learner policy for a batch of observations.

        Args:
            obs: float32 ``[B, *obs_shape]`` (the env's observation dtype).
            explore: sample (``True``) or act greedily (``False``: argmax of the policy
                logits, or of Q for DQN).

        Returns:
            int64 ``[B]``.
        """
        import numpy as np

        rid = self._policy_resource()
        policy = self.ctx.worker_sets[rid].local_policy
        batch = np.asarray(obs, dtype=policy.observation_space.dtype)
        with self.ctx.policy_lock(rid):
            actions, _ = policy.compute_actions(batch, explore=explore)
        return actions

    def evaluate(self, episodes: int | None = None, *, round_: int | None = None) -> dict:
        """Play greedy evaluation episodes now (``evaluation_episodes`` unless given) with
        the learner's current weights; returns ``episode_return_mean/std/min/max``,
        ``episode_len_mean`` and ``time_s`` (the ``evaluation`` of a result). ``round_``
        picks the seed round (default: the iteration).

        Raises:
            BuildError: ``episodes`` < 1.
        """
        n = self.evaluation_episodes if episodes is None else episodes
        _check_evaluation(self.evaluation_interval, n)
        evaluator = self._evaluator
        if evaluator is None or evaluator.episodes != n:
            evaluator = self._make_evaluator(n)
        try:
            return dict(evaluator.evaluate(self.iteration if round_ is None else round_))
        finally:
            if evaluator is not self._evaluator:
                evaluator.close()

    def profile(self) -> RunProfile:
        """Where the wall time of the iterations since the build (or the last restore) went:
        seconds, items and phases per plan node, the learner threads' busy time
        (``plangraph.ir.profile.RunProfile``, what ``profile.json`` holds)."""
        from plangraph.ir.profile import LearnerThreadProfile, NodeProfile, RunProfile

        snap = self.run_state.metrics.profile.snapshot()
        return RunProfile(
            plan=self.compiled.plan.name,
            iterations=self.run_state.iteration - self._profiled_from,
            first_iteration=self._profiled_from + 1,
            wall_s=snap["wall_s"],
            phases=snap["phases"],
            nodes={nid: NodeProfile(**n) for nid, n in snap["nodes"].items()},
            learner_threads={
                rid: LearnerThreadProfile(
                    busy_s=max(0.0, t.busy_s - self._learner_busy_from.get(rid, 0.0))
                )
                for rid, t in sorted(self.ctx.learners.items())
            },
        )

    def _profile_start(self) -> None:
        """Start profiling afresh from the current iteration (build, restore)."""
        self.run_state.metrics.profile.reset()
        self._profiled_from = self.run_state.iteration
        self._learner_busy_from = {rid: t.busy_s for rid, t in self.ctx.learners.items()}

    def run(
        self, stop: Mapping[str, float] | None = None, *, max_iterations: int | None = None
    ) -> Result:
        """Train until any ``result[key] >= threshold`` in ``stop`` or ``max_iterations``
        iterations, whichever comes first; return the last result. At least one of the two
        must be given (as ``plangraph run`` needs ``--stop`` or ``--max-iterations``).

        Raises:
            ValueError: neither ``stop`` nor ``max_iterations`` given (the run would never
                end).
            StopCriterionError: a key of ``stop`` is not a result key, or a threshold is
                not a number.
        """
        if not stop and max_iterations is None:
            raise ValueError(
                "Algorithm.run needs stop={KEY: THRESHOLD, ...} or max_iterations=N (or "
                "both): without either it would never end"
            )
        loop = TrainingLoop(
            self.train, StopCriteria.parse(stop or {}), max_iterations=max_iterations
        )
        for _result in loop:
            pass
        assert loop.result is not None  # the loop trains at least once
        return loop.result

    def plan_that_ran(self) -> Any:
        """The plan as it runs, as a plan file: ``CompiledPlan.to_plan()`` with the
        build's env id and ``num_workers`` written into the worker sets (an env passed as a
        callable cannot be written: the plan's id stays). What a run directory's and each
        checkpoint's ``plan.json`` hold."""
        from plangraph.ir.plan import Resource

        plan = self.compiled.to_plan()
        resources = dict(plan.resources)
        for rid, params in self.ctx.resource_params.items():
            if params is not None and resources[rid].kind == "WorkerSet":
                resources[rid] = Resource(kind="WorkerSet", params=params.model_dump(mode="json"))
        return plan.model_copy(update={"resources": resources})

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a checkpoint directory: policy states (weights, optimizer, target net),
        replay buffers, counters and info, episode window, iteration and time.

        Data only (``plangraph.runtime.checkpoint``: ``state.json`` + ``arrays.npz``, no
        pickle), plus ``algorithm.json`` (``CheckpointMeta``) and ``plan.json``, the plan as
        it runs (``plan_that_ran``: a valid plan, every value explicit). Written to
        ``path.tmp`` and renamed, so a crash never leaves half a checkpoint (and a save
        that raises leaves none: ``path.tmp`` is removed).

        Raises:
            CheckpointError: some state is not storable as data (names its tree path).
            RemoteCallError: a call sent to a rollout worker or replay shard without
                waiting (a weight sync, an add) failed, so the actors do not hold the state
                a checkpoint would record (``WorkerSet.get_state``).
        """
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            # One flat dict, as checkpoints have always been laid out.
            state = {**self.run_state.get_state(), **self.ctx.get_state()}
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        write_state(tmp, state)
        (tmp / "plan.json").write_text(self.plan_that_ran().to_json(), encoding="utf-8")
        meta = {
            "version": CHECKPOINT_VERSION,
            "plan": self.compiled.plan.name,
            "iteration": self.run_state.iteration,
            "num_env_steps_sampled": self.run_state.counters.get(SAMPLED, 0),
            "time_total_s": self.run_state.time_total_s,
            "saved_at": time.time(),
            "state_sha256": _state_sha256(tmp),
        }
        CheckpointMeta.model_validate(meta)  # what restore() will demand
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
        return path

    def restore(self, path: str | os.PathLike[str] | Checkpoint) -> None:
        """Load a checkpoint written by ``save`` (any process), or apply one already read
        with ``Checkpoint.load``, and continue from it.

        For bulk-sync plans the run continues exactly as the uninterrupted one would have
        (same counters, episodes, learner stats and weights, bit for bit): the checkpoint
        holds the learner and every rollout worker (envs, partial episodes, RNGs, weights as
        last broadcast), the replay buffers and the stateful operators (pending batches,
        ``Concurrently``'s place in its rotation). The dataflow is lowered afresh, so the
        same holds when restoring into an ``Algorithm`` that has already trained. Not
        exact: sub-envs whose state cannot be captured (reset instead, with a warning at
        save time; see ``RolloutWorker``) and asynchronous plans (requests in flight are
        not checkpointed).

        Loading reads JSON and a ``numpy.load(allow_pickle=False)`` archive only: nothing in
        the directory can run code. If the state does not fit this plan, part of it may
        already be applied: build a new ``Algorithm`` rather than train this one.

        Raises:
            CheckpointError: ``path`` is not a complete checkpoint; a file is corrupt,
                truncated or hand-edited; it is an old pickle checkpoint (refused, not
                loaded); it was written by a different plan; or its state does not fit
                this plan (its policies, buffers, operators, or number of rollout workers
                and sub-envs per worker).
        """
        ckpt = path if isinstance(path, Checkpoint) else Checkpoint.load(path)
        if ckpt.meta.plan != self.compiled.plan.name:
            raise CheckpointError(
                f"{ckpt.path}: checkpoint of plan {ckpt.meta.plan!r}, "
                f"but this Algorithm runs {self.compiled.plan.name!r}"
            )
        state = ckpt.state
        unknown = set(state["policies"]) - set(self.ctx.worker_sets)
        unknown |= set(state["buffers"]) - set(self.ctx.buffers)
        if unknown:
            raise CheckpointError(
                f"{ckpt.path}: state for resources {sorted(unknown)}, not in this plan"
            )
        from plangraph.runtime.lowering import lower_plan

        # A fresh dataflow: whatever the running one held between items (a union's place in
        # its rotation, pending batches) is replaced by the checkpoint's operator states.
        self._results = iter(lower_plan(self.executed, self.ctx))
        try:
            # The run state first: the weights sent to the workers carry its global vars.
            self.run_state.set_state(state)
            self.ctx.set_state(state)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, RuntimeError) as exc:
            # A tree of the right shape at the top can still be hand-edited below: torch's
            # load_state_dict reports mismatches as RuntimeError/ValueError, our set_state
            # methods as KeyError/TypeError/ValueError. Ray's own errors are not among these.
            raise CheckpointError(
                f"{ckpt.path}: state does not fit this plan ({type(exc).__name__}: {exc})"
            ) from exc
        self._profile_start()

    def stop(self) -> None:
        """Release every actor this Algorithm started. Idempotent."""
        if not self._stopped:
            self._stopped = True
            if getattr(self, "_evaluator", None) is not None:
                self._evaluator.close()
            self.ctx.stop()

    def __enter__(self) -> Algorithm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
