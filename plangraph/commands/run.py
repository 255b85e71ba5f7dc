"""``plangraph run``: compile a plan, start Ray (in-process or ``--address``), train."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from plangraph.commands.user_modules import add_import_option

_T = TypeVar("_T")

# run.json's model lives in plangraph.commands.run_args, imported only when a run starts:
# every `plangraph` command imports this module to build its parser.
__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "run",
        help="train a plan on Ray until a stop criterion",
        description=(
            "Compile PLAN, start Ray in-process (or join --address), and train until a stop "
            "criterion is met. Writes result.jsonl, TensorBoard events, the rendered plan and "
            "checkpoints to the run directory."
        ),
    )
    p.add_argument("plan", nargs="?", help="plan file (.json or .py); optional with --resume")
    p.add_argument("--env", help="gymnasium env id (default: the plan's WorkerSet env)")
    p.add_argument("--num-workers", type=int, help="remote rollout workers (default: the plan's)")
    p.add_argument(
        "--set",
        "-c",
        "--config",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key or, by a dotted path, a node or resource param "
        "(repeatable), e.g. --set train_batch_size=4000, --set nodes.train.num_sgd_iter=5, "
        "--set workers.policy.lr=0.001 (-c/--config are the same option)",
    )
    add_import_option(p)
    p.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="stop when result[KEY] >= VALUE (repeatable; any one stops), "
        "e.g. --stop episode_return_mean=475 --stop num_env_steps_sampled=300000",
    )
    from plangraph.commands.validate import add_pass_option

    add_pass_option(p)
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--address", help="Ray cluster address to join (default: start Ray here)")
    p.add_argument("--out", type=Path, help="run directory (default: runs/<plan>-<env>-<time>)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run in DIR")
    p.add_argument(
        "--checkpoint-every",
        type=int,
        metavar="K",
        help="checkpoint every K iterations (default 10; 0: only at the end)",
    )
    p.add_argument(
        "--evaluation-interval",
        type=int,
        metavar="K",
        help="play greedy evaluation episodes every K iterations (default 0: never); the "
        "result gains evaluation/episode_return_mean, usable with --stop",
    )
    p.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="record every rollout source's sampled rows to DIR (Parquet files and "
        "metadata.json; docs/offline.md), e.g. to train BC or MARWIL from later",
    )
    p.add_argument(
        "--evaluation-episodes",
        type=int,
        metavar="N",
        help="episodes per evaluation (default 10)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=int,
        metavar="K",
        help="keep the K newest checkpoints plus the best by --checkpoint-score "
        "(default 3; 0 keeps all)",
    )
    p.add_argument(
        "--checkpoint-score",
        metavar="KEY",
        help="result key that ranks checkpoints, higher is better (default: "
        "evaluation/episode_return_mean when evaluating, else episode_return_mean)",
    )
    p.add_argument(
        "--max-iterations",
        type=int,
        metavar="N",
        help="stop once the run has N iterations in all (a resumed run counts its earlier ones)",
    )
    p.add_argument("--no-progress", action="store_true", help="plain log lines, no progress bar")
    p.add_argument(
        "--tensorboard",
        action=argparse.BooleanOptionalAction,
        help="write TensorBoard event files (default; --no-tensorboard skips them)",
    )
    p.add_argument(
        "--logger",
        dest="loggers",
        action="append",
        default=[],
        choices=("mlflow", "wandb"),
        help="also log metrics to MLflow or Weights & Biases (repeatable; optional extras "
        "plangraph[mlflow], plangraph[wandb]; W&B offline unless WANDB_MODE is set)",
    )
    p.add_argument(
        "--mlflow-uri",
        metavar="URI",
        help="MLflow tracking URI (default file:RUN_DIR/mlruns, a local store)",
    )
    p.add_argument(
        "--experiment",
        metavar="NAME",
        help="MLflow experiment / W&B project name (default: the plan's name)",
    )
    return p


def _error(msg: str) -> int:
    print(f"plangraph run: error: {msg}", file=sys.stderr)
    return 2


@dataclass(frozen=True)
class _Launch:
    """Everything a run needs, checked before Ray starts or any file is written."""

    compiled: Any
    plan_path: str
    source: str  # run.json's "plan": where the plan first came from (a record)
    env: str | None
    num_workers: int | None
    seed: int
    overrides: dict[str, Any]
    no_pass: tuple[str, ...]
    stop: Any
    run_dir: Path
    checkpoint: Any  # a loaded plangraph.runtime.algorithm.Checkpoint, or None
    imports: tuple[str, ...]  # --import modules (a .py path absolute; recorded in run.json)
    evaluation_interval: int  # iterations between evaluations (0: never)
    evaluation_episodes: int
    keep_checkpoints: int  # newest checkpoints kept, plus the best (0: all)
    checkpoint_score: str  # the result key that ranks checkpoints
    checkpoint_every: int  # iterations between checkpoints (0: only at the end)
    tensorboard: bool  # write TensorBoard event files


def _option_problem(args: argparse.Namespace) -> str | None:
    """The first command-line value that makes no sense, as a message; ``None`` if all do."""
    from plangraph.commands.run_args import MAX_SEED

    if args.env is not None and not args.env.strip():
        return "--env '': give a gymnasium env id, e.g. --env CartPole-v1"
    if args.num_workers is not None and args.num_workers < 0:
        return f"--num-workers {args.num_workers}: num_workers: Input should be >= 0"
    if not 0 <= args.seed <= MAX_SEED:
        return f"--seed {args.seed}: the seed must be an integer in [0, 2**63 - 1]"
    if args.checkpoint_every is not None and args.checkpoint_every < 0:
        return f"--checkpoint-every {args.checkpoint_every}: must be >= 0 (0: only at the end)"
    if args.max_iterations is not None and args.max_iterations < 1:
        return f"--max-iterations {args.max_iterations}: must be >= 1"
    if args.evaluation_interval is not None and args.evaluation_interval < 0:
        return f"--evaluation-interval {args.evaluation_interval}: must be >= 0 (0: never)"
    if args.evaluation_episodes is not None and args.evaluation_episodes < 1:
        return f"--evaluation-episodes {args.evaluation_episodes}: must be >= 1"
    if args.keep_checkpoints is not None and args.keep_checkpoints < 0:
        return f"--keep-checkpoints {args.keep_checkpoints}: must be >= 0 (0: keep all)"
    if args.loggers:
        from plangraph.runtime.loggers import logger_problem

        return logger_problem(args.loggers)
    return None


def _run_dir_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` cannot be created or written (checked without creating it)."""
    if run_dir.exists():
        if not run_dir.is_dir():
            return f"--out {run_dir}: exists and is not a directory"
        return None if os.access(run_dir, os.W_OK | os.X_OK) else f"--out {run_dir}: not writable"
    parent = run_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"--out {run_dir}: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"--out {run_dir}: cannot create it in {parent} (not writable)"
    return None


def _prepare(args: argparse.Namespace) -> _Launch | int:
    """Every check that needs neither Ray nor a run directory; an exit code when the run
    must not start (usage problems raise ``PlangraphError``, caught by ``run``)."""
    from plangraph.commands.run_args import PLAN_SNAPSHOT_FILE, RunArgs, read_run_args
    from plangraph.commands.user_modules import import_user_modules, recorded_import
    from plangraph.runtime.stopping import (
        StopCriteria,
        check_policy_keys,
        check_result_key,
        parse_key_values,
    )

    problem = _option_problem(args) or import_user_modules(args.imports)
    if problem:
        return _error(problem)
    resume_dir: Path | None = args.resume
    saved: RunArgs | None = read_run_args(resume_dir) if resume_dir is not None else None
    imports = tuple(recorded_import(m) for m in args.imports)
    forgotten = [m for m in (saved.imports if saved else []) if recorded_import(m) not in imports]
    if forgotten:
        # A run directory is data: it never makes this process import code.
        print(
            f"plangraph run: note: {resume_dir} was run with --import "
            f"{' --import '.join(forgotten)}; pass it again if the plan or env needs it",
            file=sys.stderr,
        )
    if args.plan:
        # A plan named on the command line is the user's own choice, Python or JSON.
        plan_path = str(args.plan)
    elif resume_dir is not None:
        # Never the run.json "plan" path: a shared run directory must not choose a Python
        # file to execute. The JSON snapshot is data, parsed like any plan file.
        snapshot = resume_dir / PLAN_SNAPSHOT_FILE
        if not snapshot.is_file():
            return _error(
                f"--resume {resume_dir}: no {PLAN_SNAPSHOT_FILE} (the plan saved with the "
                "run); name the plan file to resume with it: plangraph run PLAN --resume DIR"
            )
        plan_path = str(snapshot)
    else:
        return _error("PLAN is required (or --resume DIR of an earlier run)")
    overrides = {
        **(saved.overrides if saved else {}),
        **parse_key_values(args.overrides, what="--set"),
    }
    stop_items = parse_key_values(args.stop, what="--stop") or (saved.stop if saved else {})
    stop = StopCriteria.parse(stop_items)
    if not stop.thresholds and args.max_iterations is None:
        return _error("give a stop criterion, e.g. --stop episode_return_mean=475")
    interval = _pick(args.evaluation_interval, saved.evaluation_interval if saved else None, 0)
    episodes = _pick(args.evaluation_episodes, saved.evaluation_episodes if saved else None, 10)
    if not interval and any(k.startswith("evaluation/") for k in stop.thresholds):
        # The key would never appear: the run would only stop by another criterion.
        return _error(
            "--stop evaluation/...: the run does not evaluate; add --evaluation-interval K"
        )
    keep = _pick(args.keep_checkpoints, saved.keep_checkpoints if saved else None, 3)
    every = _pick(args.checkpoint_every, saved.checkpoint_every if saved else None, 10)
    tensorboard = _pick(args.tensorboard, saved.tensorboard if saved else None, True)
    score = args.checkpoint_score or (saved.checkpoint_score if saved else None)
    if score is None:
        score = "evaluation/episode_return_mean" if interval else "episode_return_mean"
    check_result_key(score, what="--checkpoint-score")
    if not interval and score.startswith("evaluation/"):
        return _error(
            f"--checkpoint-score {score}: the run does not evaluate; add --evaluation-interval K"
        )

    from plangraph.commands.validate import analyze_safely, check_paths, parse_passes

    # A resumed run keeps the passes it ran with, unless --no-pass says otherwise.
    no_pass = list(args.no_pass) or (list(saved.no_pass) if saved else [])
    disabled = parse_passes(no_pass)
    if isinstance(disabled, str):
        return _error(disabled)
    problem = check_paths([plan_path])
    if problem:
        return _error(problem)
    # Rollout workers are checked against this machine; a cluster's CPUs are only known
    # once joined, where the build checks them (BuildContext.create).
    from plangraph.compiler import Capacity

    capacity = Capacity.unknown() if args.address else None
    compiled = analyze_safely(plan_path, overrides, capacity, disabled)
    if compiled is None:
        return 1
    for d in compiled.diagnostics:
        # PG196 (a replay buffer beyond this machine's memory) is a lower bound: the run
        # refuses that buffer anyway before Ray starts, in one line with the full estimate.
        if d.code != "PG196":
            print(d.format(), file=sys.stderr)
    if not compiled.ok:
        print(f"{plan_path}: not run: fix the errors above first", file=sys.stderr)
        return 1
    # A policies/<id>/... criterion of a policy the plan does not have would never be met.
    policy_ids = [
        pid
        for r in compiled.resources.values()
        if r.kind == "WorkerSet" and getattr(r.params, "policies", None)
        for pid in r.params.policies
    ]
    check_policy_keys(stop.thresholds, policy_ids, what="--stop")
    check_policy_keys([score], policy_ids, what="--checkpoint-score")

    checkpoint = None
    if resume_dir is not None:
        from plangraph.runtime.algorithm import Checkpoint
        from plangraph.runtime.run_log import read_results
        from plangraph.runtime.run_loop import latest_checkpoint

        try:
            done = read_results(resume_dir)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            return _error(f"{resume_dir / 'result.jsonl'}: not readable JSON lines ({exc})")
        met = stop.met(done[-1]) if done and isinstance(done[-1], dict) else None
        if met:
            print(
                f"plangraph run: {resume_dir} already meets the stop criterion ({met}); "
                "pass a higher --stop to continue training"
            )
            return 0
        ckpt = latest_checkpoint(resume_dir)
        if ckpt is not None:
            # The plan name is checked with every other change below (check_resumed_plan).
            checkpoint = Checkpoint.load(ckpt)
            done_iters = checkpoint.meta.iteration
            if args.max_iterations is not None and done_iters >= args.max_iterations:
                # --max-iterations counts all iterations of the run, restored ones included.
                print(
                    f"plangraph run: {resume_dir} has already run {done_iters} iterations "
                    f"(--max-iterations {args.max_iterations} counts the whole run); pass a "
                    "higher --max-iterations to continue training"
                )
                return 0

    env = args.env or (saved.env if saved else None) or _plan_env(compiled)
    num_workers = args.num_workers
    if num_workers is None and saved is not None:
        num_workers = saved.num_workers
    if checkpoint is not None:
        from plangraph.commands.run_resume import check_resumed_plan

        assert resume_dir is not None and saved is not None
        check_resumed_plan(
            compiled,
            plan_path,
            checkpoint,
            resume_dir,
            saved,
            env=env,
            num_workers=num_workers,
            cli_env=args.env,
            cli_num_workers=args.num_workers,
        )
    run_dir = resume_dir or args.out
    if run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path("runs") / f"{compiled.plan.name}-{env or 'env'}-{stamp}"
    problem = _run_dir_problem(run_dir)
    if problem:
        return _error(problem)
    if resume_dir is None and any(
        (run_dir / name).exists() for name in ("run.json", "result.jsonl", "checkpoints")
    ):
        # Writing a new run into an old one would mix their logs and checkpoints.
        return _error(
            f"--out {run_dir} already holds a run; continue it with --resume {run_dir}, "
            "or pass a new --out"
        )
    if args.address:
        compiled = _join_cluster(args.address, plan_path, overrides, disabled)
        if isinstance(compiled, int):
            return compiled
    return _Launch(
        compiled=compiled,
        plan_path=plan_path,
        source=str(Path(args.plan).resolve()) if args.plan else saved.plan if saved else "",
        env=env,
        num_workers=num_workers,
        seed=saved.seed if saved is not None else args.seed,
        overrides=overrides,
        no_pass=tuple(sorted(disabled)),
        stop=stop,
        run_dir=run_dir,
        checkpoint=checkpoint,
        imports=imports,
        evaluation_interval=interval,
        evaluation_episodes=episodes,
        keep_checkpoints=keep,
        checkpoint_score=score,
        checkpoint_every=every,
        tensorboard=tensorboard,
    )


def _join_cluster(address: str, plan_path: str, overrides: dict[str, Any], disabled: Any) -> Any:
    """Join the cluster at ``address`` (shipping the user's modules: ``ensure_ray``) and
    compile the plan again against its nodes, so that a request it cannot satisfy is a
    located diagnostic before any actor starts; the compiled plan, or an exit code."""
    from plangraph.commands.validate import analyze_safely
    from plangraph.runtime.ray_session import cluster_capacity, ensure_ray

    shipped = ensure_ray(address)
    if shipped:
        print(
            f"plangraph run: shipping to the cluster (runtime_env py_modules): "
            f"{', '.join(shipped)}",
            file=sys.stderr,
        )
    compiled = analyze_safely(plan_path, overrides, cluster_capacity(address), disabled)
    if compiled is None:
        return 1
    for d in compiled.diagnostics:
        if d.code in ("PG186", "PG187", "PG179", "PG180", "PG181"):
            print(d.format(), file=sys.stderr)  # the others were printed by the first compile
    if not compiled.ok:
        print(f"{plan_path}: not run on {address}: fix the errors above first", file=sys.stderr)
        return 1
    return compiled


def _pick(given: _T | None, saved: _T | None, default: _T) -> _T:
    """The command line's value, else run.json's (``--resume``), else the default."""
    return given if given is not None else saved if saved is not None else default


def run(args: argparse.Namespace) -> int:
    from plangraph.errors import PlangraphError

    ray = sys.modules.get("ray")
    # Ray that the caller started (a notebook, a test session) is the caller's to stop.
    ray_was_up = ray is not None and ray.is_initialized()
    try:
        try:
            launch = _prepare(args)
        except PlangraphError as exc:  # bad input: one line, no traceback, nothing written
            return _error(str(exc))
        if isinstance(launch, int):
            return launch
        return _train(launch, args)
    finally:
        if not ray_was_up:
            _shutdown_ray()


def _kept_lines(run_dir: Path) -> list[str]:
    """What a failed run leaves: its latest complete checkpoint and how to go on from it,
    or that none was written (or the run directory, holding no result, was removed)."""
    from plangraph.runtime.run_loop import latest_checkpoint

    if not run_dir.exists():
        return [f"nothing was kept: {run_dir} held no result and was removed"]
    kept = latest_checkpoint(run_dir)
    if kept is None:
        return [f"no checkpoint was written before the failure (run directory: {run_dir})"]
    return [
        f"checkpoint kept: {kept} (the iterations after it are lost)",
        f"continue, once fixed, with: {_resume_command(run_dir)}",
    ]


def _resume_command(run_dir: Path) -> str:
    """``plangraph run --resume DIR [--import ...] --stop KEY=VALUE`` for ``run_dir``: the
    run's own envs and operators are not imported by ``--resume`` by itself."""
    from plangraph.commands.run_args import import_flags

    parts = ["--resume", str(run_dir), import_flags(run_dir), "--stop KEY=VALUE"]
    return f"plangraph run {' '.join(p for p in parts if p)}"


def _train(launch: _Launch, args: argparse.Namespace) -> int:
    """Build (Ray starts), restore, write the run directory, train, summarise."""
    from rich.console import Console

    from plangraph.errors import BuildError, CheckpointError, PlangraphError
    from plangraph.flow.errors import OperatorError
    from plangraph.flow.watchdog import PlanStalledError
    from plangraph.runtime import build
    from plangraph.runtime.retention import Retention
    from plangraph.runtime.run_loop import ignoring_sigint, summary_table, train_until

    console = Console(stderr=True)
    run_dir = launch.run_dir
    try:
        algo = build(
            launch.compiled,
            env=launch.env,
            num_workers=launch.num_workers,
            seed=launch.seed,
            address=args.address,
            evaluation_interval=launch.evaluation_interval,
            evaluation_episodes=launch.evaluation_episodes,
            record=str(args.record) if getattr(args, "record", None) else None,
        )
    except BuildError as exc:
        hint = ""
        if args.resume is not None and "not a registered gymnasium env" in str(exc):
            from plangraph.commands.run_args import registration_hint

            hint = registration_hint(args.resume)
        return _error(f"{exc}{hint}")
    # After the build, so that a refused build is one line of error and nothing else.
    console.print(
        f"[bold]plangraph run[/bold] {launch.plan_path} -> {run_dir}",
        highlight=False,
        soft_wrap=True,
    )
    if args.address:
        for line in _placement_lines(algo):
            console.print(line, highlight=False, soft_wrap=True)
    try:
        if args.resume is not None:
            if launch.checkpoint is None:
                console.print(f"no checkpoint in {run_dir}; starting from scratch")
            else:
                try:
                    algo.restore(launch.checkpoint)
                except CheckpointError as exc:
                    return _error(str(exc))
                console.print(f"resumed from {launch.checkpoint.path} (iteration {algo.iteration})")
        fresh, before = args.resume is None, _entries(run_dir)
        try:
            try:
                _write_run_files(launch, algo)
            except OSError as exc:
                return _error(f"--out {run_dir}: cannot write the run directory ({exc})")
            if getattr(args, "owns_process", False):
                # What the process holds now (the modules of torch, Ray and the rest, the
                # plan, the learner) lives until it exits: out of the cyclic GC's sight
                # (gc.freeze), it is not traversed again by each full collection while
                # training and at exit (about 1 s of CPU on the 2-core machine of
                # docs/benchmarks.md). Not when a caller runs the command in its own
                # process (tests, a notebook): the run's objects would never be collected.
                gc.freeze()
            summary = train_until(
                algo,
                launch.stop,
                run_dir,
                checkpoint_every=launch.checkpoint_every,
                show_progress=not args.no_progress and console.is_terminal,
                tensorboard=launch.tensorboard,
                max_iterations=args.max_iterations,
                console=console,
                retention=Retention.load(
                    run_dir, keep=launch.keep_checkpoints, metric=launch.checkpoint_score
                ),
                loggers=_make_loggers(launch, args),
                resume_iteration=algo.iteration if args.resume is not None else None,
            )
        except PlanStalledError as exc:
            # Its message names the starved node and why: a traceback would bury it.
            if fresh:
                _remove_if_no_result(run_dir, before)
            print(f"plangraph run: error: {exc}", file=sys.stderr)
            return 1
        except OperatorError as exc:
            root: BaseException = exc
            while isinstance(root, OperatorError) and root.__cause__ is not None:
                root = root.__cause__
            if fresh:
                _remove_if_no_result(run_dir, before)
            if isinstance(root, OperatorError) or not isinstance(root, PlangraphError):
                raise  # a failure in user code or a library: its traceback is the clue
            # plangraph's own refusal in the driver (a NaN gradient, a bad dataset row): its
            # message says what, where and how to fix it; the stack would only bury it.
            where = f" on actor {exc.actor}" if exc.actor else ""
            lines = [f"plangraph run: error: plan node {exc.node_id!r} failed{where}: {exc.detail}"]
            lines += _kept_lines(run_dir)
            print("\n".join(lines), file=sys.stderr)
            return 1
        except BaseException:
            if fresh:
                _remove_if_no_result(run_dir, before)
            raise
        if fresh and not summary.result:
            _remove_if_no_result(run_dir, before)
    finally:
        with ignoring_sigint():
            algo.stop()
    out = Console()
    out.print(summary_table(summary))
    out.print(f"stopped: {summary.reason}", soft_wrap=True, highlight=False)
    if summary.checkpoint is not None:
        out.print(f"checkpoint: {summary.checkpoint}", soft_wrap=True, highlight=False)
        if summary.best is not None:
            out.print(
                f"best checkpoint ({launch.checkpoint_score}): {summary.best}",
                soft_wrap=True,
                highlight=False,
            )
        out.print(f"continue with: {_resume_command(run_dir)}", soft_wrap=True, highlight=False)
    return 130 if summary.interrupted else 0


def _entries(run_dir: Path) -> set[str] | None:
    """The names in ``run_dir`` now, or None when it does not exist yet."""
    return {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else None


def _remove_if_no_result(run_dir: Path, before: set[str] | None) -> None:
    """Remove what this run wrote into ``run_dir`` (the whole directory when the run made
    it) when it ended before its first result: a failed launch leaves nothing behind."""
    import shutil

    results = run_dir / "result.jsonl"
    if results.is_file() and results.stat().st_size > 0:
        return
    if before is None:
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        for p in run_dir.iterdir():
            if p.name in before:
                continue
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
    print(
        f"plangraph run: no iteration finished; removed what the run wrote to {run_dir}",
        file=sys.stderr,
    )


def _write_run_files(launch: _Launch, algo: Any) -> None:
    """``run.json``, the plan snapshot ``--resume`` builds from, and the plan that runs."""
    from plangraph.commands.run_args import PLAN_SNAPSHOT_FILE, RUN_ARGS_FILE, RunArgs

    run_dir = launch.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    record = RunArgs(
        plan=launch.source,
        env=launch.env,
        num_workers=launch.num_workers,
        seed=launch.seed,
        overrides=launch.overrides,
        no_pass=list(launch.no_pass),
        stop=dict(launch.stop.thresholds),
        imports=list(launch.imports),
        evaluation_interval=launch.evaluation_interval,
        evaluation_episodes=launch.evaluation_episodes,
        keep_checkpoints=launch.keep_checkpoints,
        checkpoint_score=launch.checkpoint_score,
        checkpoint_every=launch.checkpoint_every,
        tensorboard=launch.tensorboard,
    )
    text = json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    (run_dir / RUN_ARGS_FILE).write_text(text, encoding="utf-8")
    snapshot = launch.compiled.plan.to_json()
    (run_dir / PLAN_SNAPSHOT_FILE).write_text(snapshot, encoding="utf-8")
    _write_plan_files(launch.compiled, algo.plan_that_ran(), run_dir)


def _make_loggers(launch: _Launch, args: argparse.Namespace) -> list[Any]:
    """The ``--logger`` loggers, given run.json's settings as params."""
    if not args.loggers:
        return []
    from plangraph.commands.run_args import RUN_ARGS_FILE
    from plangraph.runtime.loggers import make_loggers

    settings = json.loads((launch.run_dir / RUN_ARGS_FILE).read_text(encoding="utf-8"))
    return make_loggers(
        args.loggers,
        launch.run_dir,
        experiment=args.experiment or launch.compiled.plan.name,
        settings=settings,
        mlflow_uri=args.mlflow_uri,
    )


def _shutdown_ray() -> None:
    """Shut down the Ray this command started, Ctrl-C ignored, so nothing is left for
    Ray's atexit hook."""
    session = sys.modules.get("plangraph.runtime.ray_session")
    if session is not None:  # the build imported it: Ray may be up
        from plangraph.runtime.run_loop import ignoring_sigint

        with ignoring_sigint():
            session.shutdown_ray()


def _placement_lines(algo: Any) -> list[str]:
    """``"workers: worker 1 on node 6f9f.. (10.0.0.5), pid 123; ..."``: where each remote
    rollout worker of each worker set started (one Ray call per worker, waited for)."""
    lines = []
    for rid, ws in sorted(algo.ctx.worker_sets.items()):
        if not ws.remote_workers:
            continue
        where = []
        for i, loc in enumerate(ws.worker_locations(), 1):
            if loc is None:
                where.append(f"worker {i} not answering")
            else:
                node = str(loc["node_id"] or "?")[:12]
                where.append(f"worker {i} on node {node} ({loc['node_ip']}), pid {loc['pid']}")
        lines.append(f"{rid}: " + "; ".join(where))
    return lines


def _plan_env(compiled: Any) -> str | None:
    """The env id of the plan's (first) WorkerSet resource, for naming the run."""
    for res in compiled.resources.values():
        if res.kind == "WorkerSet" and isinstance(res.params.env, str):
            return str(res.params.env)
    return None


def _write_plan_files(compiled: Any, ran: Any, run_dir: Path) -> None:
    """The plan as it runs (``ran``: ``Algorithm.plan_that_ran``, a plan file again) and
    as compiled, drawn (DOT, plus SVG when graphviz is installed)."""
    from plangraph.diagram import render, to_dot

    (run_dir / "plan.json").write_text(ran.to_json(), encoding="utf-8")
    try:
        (run_dir / "plan.dot").write_text(to_dot(compiled), encoding="utf-8")
        render(compiled, run_dir / "plan.svg")
    except Exception as exc:  # drawing is a convenience; a missing `dot` must not stop training
        print(f"plangraph run: note: plan not drawn as SVG ({exc})", file=sys.stderr)
