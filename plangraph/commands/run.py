"""``plangraph run``: compile a plan, start Ray (in-process or ``--address``), train."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

RUN_ARGS_FILE = "run.json"


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
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a plan config value (repeatable), e.g. --set train_batch_size=4000",
    )
    p.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="stop when result[KEY] >= VALUE (repeatable; any one stops), "
        "e.g. --stop episode_return_mean=475 --stop num_env_steps_sampled=300000",
    )
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--address", help="Ray cluster address to join (default: start Ray here)")
    p.add_argument("--out", type=Path, help="run directory (default: runs/<plan>-<env>-<time>)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run in DIR")
    p.add_argument(
        "--checkpoint-every", type=int, default=10, metavar="K", help="checkpoint every K iters"
    )
    p.add_argument("--max-iterations", type=int, help="stop after this many iterations")
    p.add_argument("--no-progress", action="store_true", help="plain log lines, no progress bar")
    p.add_argument("--no-tensorboard", action="store_true", help="skip TensorBoard event files")
    return p


def _error(msg: str) -> int:
    print(f"plangraph run: error: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from plangraph.runtime.stopping import StopCriteria, StopCriterionError, parse_key_values

    resume_dir: Path | None = args.resume
    saved: dict[str, Any] = {}
    if resume_dir is not None:
        run_file = resume_dir / RUN_ARGS_FILE
        if not run_file.exists():
            return _error(
                f"--resume {resume_dir}: no {RUN_ARGS_FILE} there; is it a run directory?"
            )
        saved = json.loads(run_file.read_text(encoding="utf-8"))
    plan_path = args.plan or saved.get("plan")
    if not plan_path:
        return _error("PLAN is required (or --resume DIR of an earlier run)")
    try:
        overrides = {**saved.get("overrides", {}), **parse_key_values(args.overrides, what="--set")}
        stop_items = parse_key_values(args.stop, what="--stop") or saved.get("stop", {})
        stop = StopCriteria.parse(stop_items)
    except StopCriterionError as exc:
        return _error(str(exc))
    if not stop.thresholds and args.max_iterations is None:
        return _error("give a stop criterion, e.g. --stop episode_return_mean=475")

    from plangraph.commands.validate import analyze_safely, check_paths

    problem = check_paths([str(plan_path)])
    if problem:
        return _error(problem)
    compiled = analyze_safely(str(plan_path), overrides)
    if compiled is None:
        return 1
    for d in compiled.diagnostics:
        print(d.format(), file=sys.stderr)
    if not compiled.ok:
        print(f"{plan_path}: not run: fix the errors above first", file=sys.stderr)
        return 1

    if resume_dir is not None:
        from plangraph.runtime.run_log import read_results

        done = read_results(resume_dir)
        met = stop.met(done[-1]) if done else None
        if met:
            print(
                f"plangraph run: {resume_dir} already meets the stop criterion ({met}); "
                "pass a higher --stop to continue training"
            )
            return 0

    env = args.env or saved.get("env") or _plan_env(compiled)
    num_workers = args.num_workers if args.num_workers is not None else saved.get("num_workers")
    seed = saved.get("seed", args.seed) if resume_dir else args.seed
    run_dir = resume_dir or args.out
    if run_dir is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run_dir = Path("runs") / f"{compiled.plan.name}-{env or 'env'}-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_ARGS_FILE).write_text(
        json.dumps(
            {
                "plan": str(Path(plan_path).resolve()),
                "env": env,
                "num_workers": num_workers,
                "seed": seed,
                "overrides": overrides,
                "stop": dict(stop.thresholds),
            },
            indent=2,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    _write_plan_files(compiled, run_dir)

    from rich.console import Console

    from plangraph.runtime.run_loop import latest_checkpoint, summary_table, train_until

    console = Console(stderr=True)
    console.print(
        f"[bold]plangraph run[/bold] {plan_path} -> {run_dir}", highlight=False, soft_wrap=True
    )
    from plangraph.runtime.build_context import BuildError

    try:
        algo = compiled.build(env=env, num_workers=num_workers, seed=seed, address=args.address)
    except BuildError as exc:
        return _error(str(exc))
    try:
        if resume_dir is not None:
            ckpt = latest_checkpoint(resume_dir)
            if ckpt is None:
                console.print(f"no checkpoint in {resume_dir}; starting from scratch")
            else:
                algo.restore(ckpt)
                console.print(f"resumed from {ckpt} (iteration {algo.iteration})")
        summary = train_until(
            algo,
            stop,
            run_dir,
            checkpoint_every=args.checkpoint_every,
            show_progress=not args.no_progress and console.is_terminal,
            tensorboard=not args.no_tensorboard,
            max_iterations=args.max_iterations,
            console=console,
        )
    finally:
        algo.stop()
    out = Console()
    out.print(summary_table(summary))
    out.print(f"stopped: {summary.reason}", soft_wrap=True, highlight=False)
    if summary.checkpoint is not None:
        out.print(f"checkpoint: {summary.checkpoint}", soft_wrap=True, highlight=False)
        out.print(
            f"continue with: plangraph run --resume {run_dir} --stop KEY=VALUE",
            soft_wrap=True,
            highlight=False,
        )
    return 130 if summary.interrupted else 0


def _plan_env(compiled: Any) -> str | None:
    """The env id of the plan's (first) WorkerSet resource, for naming the run."""
    for res in compiled.resources.values():
        if res.kind == "WorkerSet" and isinstance(res.params.env, str):
            return str(res.params.env)
    return None


def _write_plan_files(compiled: Any, run_dir: Path) -> None:
    """The plan as compiled (JSON) and drawn (DOT, plus SVG when graphviz is installed)."""
    (run_dir / "plan.json").write_text(compiled.to_json(), encoding="utf-8")
    try:
        (run_dir / "plan.dot").write_text(compiled.to_dot(), encoding="utf-8")
        compiled.render(run_dir / "plan.svg")
    except Exception as exc:  # drawing is a convenience; a missing `dot` must not stop training
        print(f"plangraph run: note: plan not drawn as SVG ({exc})", file=sys.stderr)
