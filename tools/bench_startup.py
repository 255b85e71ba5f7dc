#!/usr/bin/env python3
"""Start-up phases of a run as a user sees them: ``plangraph run`` and the Python API.

Each run is a fresh process (interpreter start and imports count), traced with
``PLANGRAPH_TRACE_STARTUP`` (``plangraph.startup_trace``): every phase mark the driver and
its rollout workers write is a Unix timestamp, set against the moment this script spawned
the process. Modes:

* ``cli``: ``python -m plangraph run PLAN --max-iterations 1 --out TMP --no-progress``;
* ``api``: ``import plangraph; plangraph.compile(PLAN).build(seed=0)``, one ``train()``,
  ``save()``, ``stop()``, ``shutdown_ray()``;
* ``validate``: ``python -m plangraph validate PLAN`` (wall time only);
* ``python``: ``python -c pass``, the interpreter's own start, for reference.

Runs are interleaved (run 1 of every mode and tree, then run 2, ...) so that a change in
the machine's load hits all columns alike; the table shows medians over ``--runs``.
``--tree LABEL=DIR`` (repeatable) runs the same modes with ``PYTHONPATH=DIR``, e.g. a
checkout before a change next to this one.

Usage::

    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5
    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5 --modes cli \\
        --tree before=/tmp/base --tree after=.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRIVER_PHASES = (
    ("cli_imported", "CLI imported, arguments parsed"),
    ("imported", "plangraph imported"),
    ("compiled", "plan compiled"),
    ("ray_ready", "ray.init"),
    ("actors_started", "rollout worker actors created"),
    ("learner_built", "learner policy built"),
    ("first_sample", "first sample (fragments at the driver)"),
    ("first_train", "first train (learner update)"),
    ("first_result", "first result"),
    ("checkpoint_saved", "checkpoint written"),
    ("actors_stopped", "actors stopped"),
    ("ray_shutdown", "ray.shutdown"),
    ("exit", "process exit"),
)
"""(mark, label) of the driver's phases, in the order a run reaches them."""

API_SCRIPT = """
import sys
from plangraph.startup_trace import mark
import plangraph
mark("imported")
compiled = plangraph.compile(sys.argv[1])
mark("compiled")
algo = compiled.build(seed=0)
algo.train()
algo.save(sys.argv[2])
algo.stop()
try:
    from plangraph.runtime.ray_session import shutdown_ray
except ImportError:  # a checkout from before shutdown_ray
    from ray import shutdown as shutdown_ray
shutdown_ray()
mark("ray_shutdown")
"""


def _env(tree: Path, trace: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("PLANGRAPH_TRACE_STARTUP", None)
    if trace is not None:
        env["PLANGRAPH_TRACE_STARTUP"] = str(trace)
    return env


def run_once(mode: str, tree: Path, plan: str, python: str) -> dict[str, float]:
    """One traced process: ``{phase: seconds since spawn}`` (``exit`` included) and, for
    runs with workers, ``worker_ready_first``/``worker_ready_last``."""
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        trace = Path(tmp) / "trace.jsonl"
        out = Path(tmp) / "run"
        if mode == "cli":
            cmd = [python, "-m", "plangraph", "run", plan, "--max-iterations", "1"]
            cmd += ["--out", str(out), "--no-progress"]
        elif mode == "api":
            cmd = [python, "-c", API_SCRIPT, plan, str(out / "checkpoint")]
        elif mode == "validate":
            cmd = [python, "-m", "plangraph", "validate", plan]
        elif mode == "python":
            cmd = [python, "-c", "pass"]
        else:
            raise ValueError(f"unknown mode {mode!r}")
        start = time.time()
        proc = subprocess.run(
            cmd, cwd=tree, env=_env(tree, trace), capture_output=True, text=True, check=False
        )
        end = time.time()
        if proc.returncode != 0:
            raise RuntimeError(f"{mode} in {tree} exited {proc.returncode}:\n{proc.stderr}")
        times: dict[str, float] = {"exit": end - start}
        workers: list[float] = []
        if trace.exists():
            for line in trace.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                t = rec["t"] - start
                if rec["phase"] == "worker_ready":
                    workers.append(t)
                else:
                    times.setdefault(rec["phase"], t)
        if workers:
            times["worker_ready_first"] = min(workers)
            times["worker_ready_last"] = max(workers)
        return times


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(results: dict[tuple[str, str], list[dict[str, float]]]) -> str:
    """Markdown: per phase of the traced modes (``cli``, ``api``), its median duration and
    median end time (s since spawn) per (tree, mode) column; then every mode's whole wall
    time (median [min - max])."""
    traced = [c for c in results if c[1] in ("cli", "api")]
    lines = []
    if traced:
        head = "| phase |" + "".join(f" {t} {m}: s | ends at s |" for t, m in traced)
        lines += [head, "|---|" + "---:|---:|" * len(traced)]
        for phase, label in DRIVER_PHASES:
            if not any(phase in run for col in traced for run in results[col]):
                continue
            row = f"| {label} |"
            for col in traced:
                ends, durations = [], []
                for run in results[col]:
                    if phase in run:
                        prev = [run[p] for p, _ in DRIVER_PHASES if run.get(p, 1e9) < run[phase]]
                        ends.append(run[phase])
                        durations.append(run[phase] - (max(prev) if prev else 0.0))
                row += f" {_fmt(_median(durations))} | {_fmt(_median(ends))} |"
            lines.append(row)
        for key, label in (
            ("head_ready", "Ray head node up in its own process"),
            ("warmup_done", "driver warm-up thread done (torch, env spaces)"),
            ("worker_ready_first", "first rollout worker ready"),
            ("worker_ready_last", "last rollout worker ready"),
        ):
            if any(key in run for col in traced for run in results[col]):
                row = f"| ({label}) |"
                for col in traced:
                    row += f" | {_fmt(_median([r[key] for r in results[col] if key in r]))} |"
                lines.append(row)
        lines.append("")
    lines += ["| command | wall s: median | min | max | runs |", "|---|---:|---:|---:|---:|"]
    for (tree, mode), runs in results.items():
        walls = [r["exit"] for r in runs] or [float("nan")]
        lines.append(
            f"| {tree} {mode} | {_fmt(_median(walls))} | {_fmt(min(walls))} | "
            f"{_fmt(max(walls))} | {len(walls)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="plans/ppo.json", help="plan file, relative to each tree")
    ap.add_argument("--runs", type=int, default=5, help="runs per mode and tree (median)")
    ap.add_argument(
        "--modes", nargs="+", default=["cli", "api", "validate", "python"], metavar="MODE"
    )
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="a plangraph checkout to run (repeatable; default: this one)",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    ap.add_argument("--json", type=Path, help="also write every run's phase times here")
    args = ap.parse_args(argv)

    trees: list[tuple[str, Path]] = []
    for spec in args.tree or [f"this={ROOT}"]:
        label, sep, path = spec.partition("=")
        if not sep:
            ap.error(f"--tree {spec!r}: expected LABEL=DIR")
        trees.append((label, Path(path).resolve()))
    results: dict[tuple[str, str], list[dict[str, float]]] = {
        (label, mode): [] for label, _ in trees for mode in args.modes
    }
    for i in range(args.runs):
        for label, tree in trees:
            for mode in args.modes:
                for attempt in (1, 2, 3):
                    try:
                        times = run_once(mode, tree, args.plan, args.python)
                        break
                    except RuntimeError as exc:  # e.g. ray.init timing out on a loaded host
                        print(
                            f"run {i + 1} {label} {mode} failed ({attempt}/3): "
                            f"{str(exc).splitlines()[-1]}",
                            file=sys.stderr,
                        )
                else:
                    continue
                results[(label, mode)].append(times)
                done = f"run {i + 1}/{args.runs} {label} {mode}: {times['exit']:.2f} s"
                print(done, file=sys.stderr)
                if args.json:  # after every run: a long benchmark cut short keeps its runs
                    _write_json(args.json, results)
    print(table(results))
    return 0


def _write_json(path: Path, results: dict[tuple[str, str], list[dict[str, float]]]) -> None:
    path.write_text(json.dumps({f"{t} {m}": r for (t, m), r in results.items()}, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
