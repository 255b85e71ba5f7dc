#!/usr/bin/env python3
"""Start-up as a user sees it: ``plangraph run plans/ppo.json --max-iterations 1`` against
the floor of a plain script doing the same work on public APIs, and ``plangraph validate``.

Each run is a fresh process timed from spawn to exit (interpreter start and imports count).
Modes:

* ``python``: ``python -c pass``, the interpreter's own start, for reference;
* ``validate``: ``python -m plangraph validate plans/ppo.json``;
* ``floor``: ``tools/startup_floor.py``, the same work as the run below (Ray started, 2
  actors importing torch with 8 CartPole sub-envs each, one fragment each, one Adam step,
  a weight broadcast, Ray shut down) on Ray's, torch's and gymnasium's public APIs only;
* ``cli``: ``python -m plangraph run plans/ppo.json --max-iterations 1 --out TMP
  --no-progress`` (its run directory, checkpoint and TensorBoard file included).

Runs are interleaved (run 1 of every mode, then run 2, ...) so that a change in the
machine's load hits all modes alike; the table shows the median, min and max over
``--runs``, and the median of ``cli - floor`` taken run by run.

Usage::

    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLAN = "plans/ppo.json"
TIMEOUT_S = 600.0
"""The longest one run may take before the benchmark stops with an error (s)."""


def _command(mode: str, out: Path) -> list[str]:
    py = sys.executable
    return {
        "python": [py, "-c", "pass"],
        "validate": [py, "-m", "plangraph", "validate", PLAN],
        "floor": [py, str(ROOT / "tools" / "startup_floor.py")],
        "cli": [
            py,
            "-m",
            "plangraph",
            "run",
            PLAN,
            "--max-iterations",
            "1",
            *("--out", str(out / "run"), "--no-progress"),
        ],
    }[mode]


def time_one(mode: str) -> float:
    """Wall seconds of one fresh process of ``mode``, spawn to exit.

    Raises:
        RuntimeError: the process failed or ran over ``TIMEOUT_S``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        cmd = _command(mode, Path(tmp))
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
        elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per mode (default 5)")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["python", "validate", "floor", "cli"],
        choices=["python", "validate", "floor", "cli"],
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    times: dict[str, list[float]] = {m: [] for m in args.modes}
    for i in range(args.runs):
        for mode in args.modes:
            times[mode].append(time_one(mode))
            print(f"run {i + 1}/{args.runs} {mode}: {times[mode][-1]:.2f} s", file=sys.stderr)
    rows = [(m, times[m]) for m in args.modes]
    if "floor" in times and "cli" in times:
        above = [c - f for c, f in zip(times["cli"], times["floor"], strict=True)]
        rows.append(("cli - floor", above))
    print(f"\n| mode | median s | min s | max s |  ({args.runs} runs each, interleaved)")
    print("|---|---:|---:|---:|")
    for mode, ts in rows:
        print(f"| {mode} | {statistics.median(ts):.2f} | {min(ts):.2f} | {max(ts):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
