"""``Algorithm``: a compiled plan lowered onto Ray actors, trained one iteration at a time.

compiled = plangraph.compile("plans/ppo.json")
algo = compiled.build(env="CartPole-v1", num_workers=2, seed=0)
result = algo.train()              # one iteration: a ``Result`` (plangraph.runtime.result)
algo.run(stop={"episode_return_mean": 475})
algo.run_state.counters             # the run's counters, iteration, time, episode window
algo.save("ckpt"); algo.restore("ckpt"); algo.stop()
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from plangraph.errors import BuildError
from plangraph.runtime.build_context import BuildContext
from plangraph.runtime.counters import SAMPLED
from plangraph.runtime.run_state import RunState
from plangraph.runtime.stopping import StopCriteria
from plangraph.runtime.training_loop import TrainingLoop

if TYPE_CHECKING:
    from plangraph.compiler import CompiledPlan
    from plangraph.runtime.result import Result

CHECKPOINT_VERSION = 1


class Algorithm:
    """A running plan: worker sets and replay buffers as declared, the dataflow lowered.

    Built by ``CompiledPlan.build(env=None, num_workers=None, seed=0, address=None)``;
    ``env``/``num_workers`` override every ``WorkerSet`` resource of the plan.

    Attributes:
        run_state: the run's counters, learner stats, iteration, total time and episode
            window (``plangraph.runtime.run_state.RunState``).
        ctx: the built resources (``worker_sets``, ``buffers``) the lowered plan uses.

    Raises:
        PlanValidationError: the compiled plan has errors.
        BuildError: an override is invalid, the env id is unknown, or an operator has no
            implementation (all before Ray starts).
    """

    def __init__(
        self,
        compiled: CompiledPlan,
        *,
        env: str | None = None,
        num_workers: int | None = None,
        seed: int = 0,
        address: str | None = None,
    ) -> None:
        if not compiled.ok:
            from plangraph.compiler import PlanValidationError

            raise PlanValidationError(compiled.diagnostics)
        from plangraph.runtime.lowering import check_implementations, lower_plan

        check_implementations(compiled)  # before any actor starts
        self.compiled = compiled
        self.seed = seed
        self.run_state = RunState.for_plan(compiled)
        self.ctx = BuildContext.create(
            compiled,
            env=env,
            num_workers=num_workers,
            seed=seed,
            address=address,
            run_state=self.run_state,
        )
        self._results = iter(lower_plan(compiled, self.ctx))
        self._stopped = False

    @property
    def iteration(self) -> int:
        """Training iterations completed (restored ones included)."""
        return self.run_state.iteration

    def train(self) -> Result:
        """Run one training iteration (as the plan's ``StandardMetricsReporting`` defines
        it) and return its ``Result`` (keys: ``plangraph.runtime.result.Result``)."""
        if self._stopped:
            raise BuildError("this Algorithm was stopped; build a new one")
        return next(self._results)

    def run(self, stop: Mapping[str, float], *, max_iterations: int | None = None) -> Result:
        """Train until any ``result[key] >= threshold`` in ``stop`` (or ``max_iterations``);
        return the last result.

        Raises:
            StopCriterionError: a key of ``stop`` is not a result key, or a threshold is
                not a number.
        """
        loop = TrainingLoop(self.train, StopCriteria.parse(stop), max_iterations=max_iterations)
        for _result in loop:
            pass
        assert loop.result is not None  # the loop trains at least once
        return loop.result

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write a checkpoint directory: policy states (weights, optimizer, target net),
        replay buffers, counters and info, episode window, iteration and time.

        Written to ``path.tmp`` and renamed, so a crash never leaves half a checkpoint.
        """
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        # One flat dict, as checkpoints have always been laid out.
        state = {**self.run_state.get_state(), **self.ctx.get_state()}
        with (tmp / "state.pkl").open("wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
        (tmp / "plan.json").write_text(self.compiled.to_json(), encoding="utf-8")
        meta = {
            "version": CHECKPOINT_VERSION,
            "plan": self.compiled.plan.name,
            "iteration": self.run_state.iteration,
            "num_env_steps_sampled": self.run_state.counters.get(SAMPLED, 0),
            "time_total_s": self.run_state.time_total_s,
            "saved_at": time.time(),
        }
        (tmp / "algorithm.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
        return path

    def restore(self, path: str | os.PathLike[str]) -> None:
        """Load a checkpoint written by ``save`` (any process) and continue from it.

        For bulk-sync plans the run continues exactly as the uninterrupted one would have
        (same counters, episodes, learner stats and weights, bit for bit): the checkpoint
        holds the learner and every rollout worker (envs, partial episodes, RNGs, weights as
        last broadcast), the replay buffers and the stateful operators (pending batches,
        ``Concurrently``'s place in its rotation). The dataflow is lowered afresh, so the
        same holds when restoring into an ``Algorithm`` that has already trained. Not
        exact: sub-envs whose state cannot be captured (reset instead, with a warning at
        save time; see ``RolloutWorker``) and asynchronous plans (requests in flight are
        not checkpointed).

        Raises:
            FileNotFoundError: ``path`` is not a complete checkpoint directory.
            ValueError: the checkpoint was written by a different plan, or by a build
                with another number of rollout workers or sub-envs per worker.
        """
        path = Path(path)
        meta_file = path / "algorithm.json"
        if not meta_file.exists():
            raise FileNotFoundError(f"{path}: not a plangraph checkpoint (no algorithm.json)")
        meta = json.loads(meta_file.read_text())
        if meta.get("plan") != self.compiled.plan.name:
            raise ValueError(
                f"{path}: checkpoint of plan {meta.get('plan')!r}, "
                f"but this Algorithm runs {self.compiled.plan.name!r}"
            )
        with (path / "state.pkl").open("rb") as f:
            state = pickle.load(f)
        from plangraph.runtime.lowering import lower_plan

        # A fresh dataflow: whatever the running one held between items (a union's place in
        # its rotation, pending batches) is replaced by the checkpoint's operator states.
        self._results = iter(lower_plan(self.compiled, self.ctx))
        # The run state first: the weights sent to the workers carry its global vars.
        self.run_state.set_state(state)
        self.ctx.set_state(state)

    def stop(self) -> None:
        """Release every actor this Algorithm started. Idempotent."""
        if not self._stopped:
            self._stopped = True
            self.ctx.stop()

    def __enter__(self) -> Algorithm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
