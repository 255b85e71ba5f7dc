"""``plangraph tune PLAN --grid KEY=V1,V2 --seeds 0 1 2``: a sweep on Ray Tune.

Runs ``plangraph.tune.tuner`` (Ray Tune's ``Tuner`` with the plan as a function trainable):
a grid over each ``--grid`` key's values and over ``--seeds``, repeated ``--num-samples``
times; Tune prints its trial table, keeps each trial's checkpoints, and every trial
directory (``OUT/NAME/<trial>``) has the layout of a ``plangraph run`` directory. Before
Ray starts, every grid point's plan is compiled and checked as ``plangraph run`` checks
one before Ray starts (``BuildContext.preflight``: env ids and spaces, overrides, replay
memory, workers per CPU, seeds), so a typo is one located error, not one failed trial
each, and no Ray process is started for a sweep that cannot run.

Exit status: 0 every trial finished, 1 the plan has errors or a trial failed, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "tune",
        help="sweep config values and seeds with Ray Tune",
        description=(
            "Train PLAN once per combination of the --grid values and --seeds, as Ray Tune "
            "trials (Tune's Tuner, trial table and checkpoints)."
        ),
    )
    p.add_argument("plan", help="plan file (.json or .py)")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="config key and the values to try (repeatable), e.g. --grid lr=1e-3,3e-4",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every trial (repeatable)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="run seeds (default 0)")
    p.add_argument("--num-samples", type=int, default=1, help="repeats of the grid (default 1)")
    p.add_argument(
        "--stop",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="end a trial when result[KEY] >= VALUE (repeatable)",
    )
    p.add_argument("--max-iterations", type=int, help="iterations per trial at most")
    p.add_argument("--env", help="gymnasium env id (default: the plan's)")
    p.add_argument("--num-workers", type=int, help="remote rollout workers per trial")
    p.add_argument("--checkpoint-every", type=int, default=10, metavar="K")
    p.add_argument(
        "--cpus-per-trial", type=float, default=1.0, help="CPUs each trial reserves (default 1)"
    )
    p.add_argument("--max-concurrent-trials", type=int, help="trials at once (default: Tune's)")
    p.add_argument("--out", type=Path, default=Path("runs"), help="storage path (default runs)")
    p.add_argument("--name", help="experiment name (default tune-<plan>-<time>)")
    p.add_argument("--address", help="Ray cluster address to join (default: start Ray here)")
    from plangraph.commands.user_modules import add_import_option

    add_import_option(p)
    return p


def _error(msg: str) -> int:
    print(f"plangraph tune: error: {msg}", file=sys.stderr)
    return 2


def parse_grid(items: list[str]) -> dict[str, list[Any]]:
    """``["lr=1e-3,3e-4"]`` -> ``{"lr": [0.001, 0.0003]}`` (each value JSON, else text).

    Raises:
        ValueError: an item without ``KEY=`` or without values (the message names it).
    """
    import json

    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        values = [v.strip() for v in raw.split(",") if v.strip()]
        if not sep or not key or not values:
            raise ValueError(f"--grid {item!r}: expected KEY=V1,V2,..., e.g. --grid lr=1e-3,3e-4")
        parsed: list[Any] = []
        for v in values:
            try:
                parsed.append(json.loads(v))
            except json.JSONDecodeError:
                parsed.append(v)
        grid[key] = parsed
    return grid


MAX_PREFLIGHT_POINTS = 256
"""Most grid points whose plans are compiled and checked before Ray Tune starts."""


def _preflight(
    args: argparse.Namespace, overrides: dict[str, Any], grid: dict[str, list[Any]], first: Any
) -> int | None:
    """Check every trial's plan as ``plangraph run`` would before Ray starts (the
    compiler's errors, then ``BuildContext.preflight``: env, overrides, replay memory,
    workers per CPU, seeds), so that a sweep whose trials would all fail is refused here;
    an exit code, or None when every trial may start. Beyond ``MAX_PREFLIGHT_POINTS`` grid
    points only the first ones are checked (each costs one compilation)."""
    import itertools

    from plangraph.commands.validate import analyze_safely
    from plangraph.compiler import Capacity
    from plangraph.errors import PlangraphError
    from plangraph.runtime.build_context import BuildContext

    points = itertools.islice(itertools.product(*grid.values()), MAX_PREFLIGHT_POINTS)
    for i, values in enumerate(points):
        point = dict(zip(grid, values, strict=True))
        shown = ", ".join(f"{k}={v!r}" for k, v in point.items()) or "every trial"
        compiled = (
            first
            if i == 0
            else analyze_safely(
                args.plan,
                {**overrides, **point},
                Capacity.unknown() if args.address else None,
            )
        )
        if compiled is None:
            return 1
        if not compiled.ok:
            for d in compiled.diagnostics:
                print(d.format(), file=sys.stderr)
            print(f"{args.plan} ({shown}): not tuned: fix the errors above first", file=sys.stderr)
            return 1
        for seed in args.seeds if i == 0 else args.seeds[:1]:
            try:
                BuildContext.preflight(
                    compiled.executed,
                    env=args.env,
                    num_workers=args.num_workers,
                    seed=seed,
                    address=args.address,
                )
            except PlangraphError as exc:
                return _error(f"grid point {shown}: {exc}" if point else str(exc))
    return None


def run(args: argparse.Namespace) -> int:
    import importlib.util

    from plangraph.errors import PlangraphError
    from plangraph.runtime.stopping import StopCriteria, parse_key_values

    if importlib.util.find_spec("ray.tune") is None or importlib.util.find_spec("pandas") is None:
        return _error("Ray Tune is not installed; pip install 'plangraph[tune]'")
    try:
        grid = parse_grid(args.grid)
        overrides = parse_key_values(args.overrides, what="--set")
        stop = StopCriteria.parse(parse_key_values(args.stop, what="--stop"))
    except (ValueError, PlangraphError) as exc:
        return _error(str(exc))
    if not grid and len(args.seeds) == 1 and args.num_samples == 1:
        return _error("nothing to sweep: give --grid KEY=V1,V2, several --seeds or --num-samples")
    if not stop.thresholds and args.max_iterations is None:
        return _error("give a stop criterion, e.g. --stop episode_return_mean=475")
    if args.num_samples < 1 or (args.max_iterations is not None and args.max_iterations < 1):
        return _error("--num-samples and --max-iterations must be >= 1")
    if "seed" in grid:
        return _error("--grid seed=...: sweep seeds with --seeds 0 1 2")

    from plangraph.commands.user_modules import import_user_modules
    from plangraph.commands.validate import analyze_safely, check_paths
    from plangraph.compiler import Capacity

    problem = check_paths([args.plan]) or import_user_modules(args.imports)
    if problem:
        return _error(problem)
    first = {**overrides, **{k: v[0] for k, v in grid.items()}}
    compiled = analyze_safely(args.plan, first, Capacity.unknown() if args.address else None)
    if compiled is None:
        return 1
    for d in compiled.diagnostics:
        print(d.format(), file=sys.stderr)
    if not compiled.ok:
        print(f"{args.plan}: not tuned: fix the errors above first", file=sys.stderr)
        return 1

    refused = _preflight(args, overrides, grid, compiled)
    if refused is not None:
        return refused

    from plangraph.runtime.ray_session import ensure_ray
    from plangraph.tune import tuner

    name = args.name or f"tune-{compiled.plan.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    ensure_ray(args.address)
    try:
        results = tuner(
            args.plan,
            grid=grid,
            seeds=args.seeds,
            num_samples=args.num_samples,
            config=overrides,
            env=args.env,
            num_workers=args.num_workers,
            stop=dict(stop.thresholds),
            max_iterations=args.max_iterations,
            checkpoint_every=args.checkpoint_every,
            cpus_per_trial=args.cpus_per_trial,
            max_concurrent_trials=args.max_concurrent_trials,
            storage_path=args.out,
            name=name,
            imports=args.imports,
        ).fit()
    finally:
        import ray

        ray.shutdown()
    failed = [r for r in results if r.error is not None]
    print(f"{len(results)} trials in {args.out / name} ({len(failed)} failed)")
    for r in results:
        ret = (r.metrics or {}).get("episode_return_mean")
        shown = "-" if ret is None else f"{ret:.2f}"
        print(f"  {Path(r.path).name}: episode_return_mean {shown}")
    print(f"plot them: plangraph plot {args.out / name}/*")
    return 1 if failed else 0
