"""Plans as Ray Tune trainables: sweeps and seeds with Tune's own ``Tuner``.

``trainable(plan)`` is a Tune *function trainable*: for a trial config such as
``{"lr": 3e-4, "seed": 1}`` it compiles ``plan`` with those keys as config overrides
(``seed`` is the run seed), builds the ``Algorithm`` inside the trial, and trains it with
``plangraph.runtime.training_loop.TrainingLoop`` (the loop of ``plangraph run``) until
``stop``/``max_iterations``. Every iteration is reported with ``ray.tune.report`` (Tune's
trial table, schedulers and searchers see the plangraph ``Result``, nested keys as
``a/b``) and written to the trial directory in the layout of a ``plangraph run``
directory (``run.json``, ``plan.source.json``, ``plan.json``, ``result.jsonl``,
``progress.csv``, TensorBoard events); checkpoints are ``Algorithm.save`` directories
handed to Tune as ``ray.tune.Checkpoint`` every ``checkpoint_every`` iterations and at
the end, and a trial that Tune restarts restores from its latest one.

``tuner(...)`` assembles the ``ray.tune.Tuner`` that ``plangraph tune`` runs: a grid
(``tune.grid_search``) over the given values and seeds, ``num_samples`` repeats, one
placement group of ``cpus_per_trial`` CPUs per trial. Tune's own CSV/JSON/TensorBoard
loggers are switched off (``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS``, set by ``trainable``, so
also for a ``Tuner`` of the user's own) because the trainable writes those files itself,
with plangraph's names: both would append to one ``progress.csv``.

Needs the optional extra ``plangraph[tune]`` (``ray[tune]``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "HEADLINE_KEYS",
    "SEED_KEY",
    "grid_space",
    "headline_first",
    "trainable",
    "trial_dirname",
    "tuner",
]

SEED_KEY = "seed"
"""The trial-config key that is the run seed, not a plan config override."""


def _plan_source(plan: Any) -> str | dict[str, Any]:
    """A picklable form of ``plan`` for the trial: an absolute path, or the declared plan
    as JSON data (``CompiledPlan`` / ``Plan``)."""
    if isinstance(plan, str | os.PathLike):
        return str(Path(plan).resolve())
    inner = getattr(plan, "plan", plan)  # CompiledPlan -> its Plan
    if hasattr(inner, "to_json"):
        data: dict[str, Any] = json.loads(inner.to_json())
        return data
    if isinstance(plan, Mapping):
        return dict(plan)
    raise TypeError(f"plan: expected a plan file path, Plan or CompiledPlan, got {plan!r}")


def trainable(
    plan: Any,
    *,
    config: Mapping[str, Any] | None = None,
    env: str | None = None,
    num_workers: int | None = None,
    stop: Mapping[str, float] | None = None,
    max_iterations: int | None = None,
    checkpoint_every: int = 10,
    tensorboard: bool = True,
    imports: Sequence[str] = (),
) -> Callable[[dict[str, Any]], None]:
    """A Ray Tune function trainable that trains ``plan``.

    Args:
        plan: a plan file (``.json``/``.py``), a ``Plan`` or a ``CompiledPlan``.
        config: config overrides for every trial; the trial config's keys win.
        env: as ``plangraph.build`` (default: the plan's).
        num_workers: as ``plangraph.build`` (default: the plan's).
        stop: ``{result key: threshold}``, the trial ends when any is reached
            (``plangraph.runtime.stopping.StopCriteria``); Tune's ``RunConfig(stop=...)``
            works too.
        max_iterations: training iterations at most (``None``: only ``stop``).
        checkpoint_every: iterations between checkpoints (0: only at the end).
        tensorboard: also write TensorBoard event files to the trial directory.
        imports: ``--import`` modules (names or ``.py`` paths) that register the plan's own
            envs and operators; each trial imports them before it compiles the plan, as
            its process never saw them (names resolve from this process's current
            directory, paths are made absolute here).

    Returns:
        ``train_plan(trial_config: dict) -> None``, for ``ray.tune.Tuner`` (or
        ``tune.with_resources``). Sets ``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1`` in this
        process (unless set already): Tune's default loggers would append their rows to
        the trial's ``progress.csv`` and write its TensorBoard events a second time.

    Raises (inside the trial): ``PlanValidationError`` for a plan with errors under the
    trial's config, ``StopCriterionError`` for an unknown ``stop`` key.
    """
    # Read by Tune when a Tuner's fit() starts, in this (the driver's) process.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    source = _plan_source(plan)
    base = dict(config or {})
    thresholds = dict(stop or {})
    # Tune runs each trial in a process of its own, with the trial directory as its
    # working directory: carry where the modules are, not just their names.
    modules = [str(Path(m).resolve()) if m.endswith(".py") else m for m in imports]
    import_dir = os.getcwd()

    def train_plan(trial_config: dict[str, Any]) -> None:
        _train_trial(
            source,
            {**base, **trial_config},
            env=env,
            num_workers=num_workers,
            stop=thresholds,
            max_iterations=max_iterations,
            checkpoint_every=checkpoint_every,
            tensorboard=tensorboard,
            imports=(modules, import_dir),
        )

    train_plan.__name__ = "train_plan"
    return train_plan


def _train_trial(
    source: str | dict[str, Any],
    trial_config: dict[str, Any],
    *,
    env: str | None,
    num_workers: int | None,
    stop: dict[str, float],
    max_iterations: int | None,
    checkpoint_every: int,
    tensorboard: bool,
    imports: tuple[list[str], str] = ([], ""),
) -> None:
    import sys

    import torch
    from ray import tune

    import plangraph
    from plangraph.runtime.algorithm import Checkpoint as AlgoCheckpoint
    from plangraph.runtime.run_log import RunLog
    from plangraph.runtime.stopping import StopCriteria
    from plangraph.runtime.training_loop import TrainingLoop

    torch.set_num_threads(1)  # one trial per CPU it reserved
    modules, import_dir = imports
    if modules:
        from plangraph.commands.user_modules import import_user_modules

        if import_dir and import_dir not in sys.path:
            sys.path.insert(0, import_dir)
        problem = import_user_modules(list(modules))
        if problem is not None:
            raise ImportError(problem)
    overrides = dict(trial_config)
    seed = int(overrides.pop(SEED_KEY, 0))
    compiled = plangraph.compile(source, config=overrides)
    run_dir = Path(tune.get_context().get_trial_dir())
    run_dir.mkdir(parents=True, exist_ok=True)
    criteria = StopCriteria.parse(stop)
    algo = plangraph.build(compiled, env=env, num_workers=num_workers, seed=seed)
    try:
        restored = tune.get_checkpoint()
        if restored is not None:
            with restored.as_directory() as path:
                algo.restore(AlgoCheckpoint.load(Path(path)))
        else:
            _write_run_files(
                run_dir,
                compiled,
                source,
                env,
                num_workers,
                seed,
                overrides,
                stop,
                modules,
                checkpoint_every=checkpoint_every,
                tensorboard=tensorboard,
            )

        def report(result: Mapping[str, Any], *, checkpoint: bool) -> None:
            if not checkpoint:
                tune.report(headline_first(result))
                return
            with tempfile.TemporaryDirectory(prefix="plangraph-ckpt-") as tmp:
                algo.save(Path(tmp) / "algorithm")
                ckpt = tune.Checkpoint.from_directory(str(Path(tmp) / "algorithm"))
                tune.report(headline_first(result), checkpoint=ckpt)

        loop = TrainingLoop(algo.train, criteria, max_iterations=max_iterations)
        # A trial Tune restored runs the iterations after its checkpoint again.
        resumed = algo.iteration if restored is not None else None
        with RunLog(run_dir, tensorboard=tensorboard, resume_iteration=resumed) as log:
            pending = None
            for result in loop:
                log.write(result)
                if pending is not None:
                    report(pending, checkpoint=_due(pending, checkpoint_every))
                pending = result  # the last one is reported below, with a checkpoint
            if pending is not None:
                report(pending, checkpoint=True)
    finally:
        algo.stop()


HEADLINE_KEYS = ("episode_return_mean", "num_env_steps_sampled", "env_steps_per_s")
"""The result keys first in what a trial reports: Tune's trial table shows the first few
numeric keys of a result (beyond its own iteration and time columns), in order."""


def headline_first(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with ``HEADLINE_KEYS`` (those it has) first, the rest in their order."""
    first = {k: result[k] for k in HEADLINE_KEYS if k in result}
    return {**first, **{k: v for k, v in result.items() if k not in first}}


def _due(result: Mapping[str, Any], every: int) -> bool:
    return bool(every) and int(result.get("iteration", 0)) % every == 0


def _write_run_files(
    run_dir: Path,
    compiled: Any,
    source: str | dict[str, Any],
    env: str | None,
    num_workers: int | None,
    seed: int,
    overrides: Mapping[str, Any],
    stop: Mapping[str, float],
    imports: Sequence[str] = (),
    *,
    checkpoint_every: int = 10,
    tensorboard: bool = True,
) -> None:
    """``run.json``, ``plan.source.json`` and ``plan.json`` as ``plangraph run`` writes
    them, so ``plangraph plot``/``profile`` and ``run --resume`` read a trial directory."""
    from plangraph.commands.run_args import PLAN_SNAPSHOT_FILE, RUN_ARGS_FILE, RunArgs

    record = RunArgs(
        plan=source if isinstance(source, str) else "(a Plan object)",
        env=env,
        num_workers=num_workers,
        seed=seed,
        overrides=json.loads(json.dumps(dict(overrides))),
        stop={k: float(v) for k, v in stop.items()},
        imports=list(imports),
        checkpoint_every=checkpoint_every,
        tensorboard=tensorboard,
    )
    text = json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    (run_dir / RUN_ARGS_FILE).write_text(text, encoding="utf-8")
    (run_dir / PLAN_SNAPSHOT_FILE).write_text(compiled.plan.to_json(), encoding="utf-8")
    (run_dir / "plan.json").write_text(compiled.to_json(), encoding="utf-8")


def grid_space(grid: Mapping[str, Sequence[Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """Tune's ``param_space``: a ``tune.grid_search`` per key and one over ``seeds``."""
    from ray import tune

    space: dict[str, Any] = {k: tune.grid_search(list(v)) for k, v in grid.items()}
    space[SEED_KEY] = tune.grid_search(list(seeds)) if len(seeds) > 1 else seeds[0]
    return space


def trial_dirname(trial: Any) -> str:
    """``lr=0.001,seed0-<trial id>``: the swept values first, readable and unique."""
    parts = [
        f"seed{v}" if k == SEED_KEY else f"{k}={v}"
        for k, v in sorted(trial.config.items())
        if not isinstance(v, Mapping)
    ]
    return f"{','.join(parts)}-{trial.trial_id}"[:200]


def tuner(
    plan: Any,
    *,
    grid: Mapping[str, Sequence[Any]],
    seeds: Sequence[int] = (0,),
    num_samples: int = 1,
    config: Mapping[str, Any] | None = None,
    env: str | None = None,
    num_workers: int | None = None,
    stop: Mapping[str, float] | None = None,
    max_iterations: int | None = None,
    checkpoint_every: int = 10,
    cpus_per_trial: float = 1.0,
    max_concurrent_trials: int | None = None,
    storage_path: Path | None = None,
    name: str | None = None,
    keep_checkpoints: int | None = 3,
    tensorboard: bool = True,
    imports: Sequence[str] = (),
) -> Any:
    """The ``ray.tune.Tuner`` of a grid sweep over ``plan`` (see the module docstring);
    ``.fit()`` runs it and returns Tune's ``ResultGrid``. Trial directories are
    ``storage_path/name/<trial_dirname>``."""
    from ray import tune

    fn = trainable(
        plan,
        config=config,
        env=env,
        num_workers=num_workers,
        stop=stop,
        max_iterations=max_iterations,
        checkpoint_every=checkpoint_every,
        tensorboard=tensorboard,
        imports=imports,
    )
    resources = tune.with_resources(fn, tune.PlacementGroupFactory([{"CPU": cpus_per_trial}]))
    return tune.Tuner(
        resources,
        param_space=grid_space(grid, seeds),
        tune_config=tune.TuneConfig(
            num_samples=num_samples,
            max_concurrent_trials=max_concurrent_trials,
            trial_dirname_creator=trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(Path(storage_path).resolve()) if storage_path else None,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=keep_checkpoints),
            verbose=1,
        ),
    )
