#!/usr/bin/env python3
"""Start-up phases of a run as a user sees them: ``plangraph run`` and the Python API.

Each run is a fresh process (interpreter start and imports count), traced with
``PLANGRAPH_TRACE_STARTUP`` (``plangraph.startup_trace``): every phase mark the driver and
its rollout workers write is a Unix timestamp, set against the moment this script spawned
the process. Modes:

* ``cli``: ``python -m plangraph run PLAN --max-iterations 1 --out TMP --no-progress``;
* ``api``: ``import plangraph; plangraph.build(plangraph.compile(PLAN), seed=0)``, one ``train()``,
  ``save()``, ``stop()``, ``shutdown_ray()``;
* ``validate``: ``python -m plangraph validate PLAN`` (wall time only);
* ``python``: ``python -c pass``, the interpreter's own start, for reference.

Runs are interleaved (run 1 of every mode and tree, then run 2, ...) so that a change in
the machine's load hits all columns alike; the table shows medians over ``--runs``.

``--cpu`` also counts the CPU time (user + system, s) of every process a run starts, by
kind (the driver, each of Ray's processes, the rollout workers), polling ``/proc`` every
20 ms until the run exits ("other processes": any the kinds do not name), their sum, and
the whole machine's CPU time over the run (``/proc/stat``, less this script's own: it
includes whatever else the machine runs meanwhile). On 2 cores a start-up is CPU-bound,
and CPU seconds move far less with the host's load than wall seconds; the poll itself
costs a few percent of one core.
``--tree LABEL=DIR`` (repeatable) runs the same modes with ``PYTHONPATH=DIR``, e.g. a
checkout before a change next to this one.

Usage::

    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5
    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5 --modes cli \\
        --tree before=/tmp/base --tree after=.
    PYTHONPATH=. .venv/bin/python tools/bench_startup.py --runs 5 --modes cli --cpu
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
algo = plangraph.build(compiled, seed=0)
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


PROCESS_KINDS = (
    # Ray's binaries first: the raylet's command line holds its agents' command lines.
    ("/gcs/gcs_server", "Ray GCS server"),
    ("/raylet/raylet", "Ray raylet"),
    ("ray::RolloutWor", "rollout workers"),
    ("plangraph.runtime.local_head", "Ray head process (local_head)"),
    ("ray::DashboardA", "Ray dashboard agent"),
    ("dashboard/agent.py", "Ray dashboard agent"),
    ("ray::RuntimeEnv", "Ray runtime-env agent"),
    ("runtime_env/agent", "Ray runtime-env agent"),
    ("log_monitor", "Ray log monitor"),
)
"""(substring of a process's command line, kind) for ``--cpu``; first match wins (a process
that exits loses its command line: its name, 15 characters, is matched then); the process
this script spawns is the driver; anything else counts as "other processes"."""

CPU_KINDS = ("driver", *dict.fromkeys(k for _, k in PROCESS_KINDS), "other processes")


def _machine_cpu_s() -> float:
    """CPU time (s) the whole machine has spent since boot, idle and I/O wait excluded."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


class CpuSampler:
    """The CPU time of every process that appears while a run goes on, by kind.

    ``poll()`` reads each process's CPU time (``/proc/PID/stat``: user + system, not its
    children's) and command line; a process's last reading is its total, so one that
    lives less than a poll interval may be missed (Ray starts none that matter so)."""

    def __init__(self) -> None:
        self.driver_pid = -1  # set once spawned; processes already running are not counted
        self._before = {int(p) for p in os.listdir("/proc") if p.isdigit()}
        self._seen: dict[int, tuple[float, str]] = {}
        self._tick = os.sysconf("SC_CLK_TCK")

    def poll(self) -> None:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in self._before:
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # gone between the listing and the read
                continue
            name = stat[stat.find("(") + 1 : stat.rfind(")")]
            fields = stat[stat.rfind(")") + 2 :].split()
            cpu = (int(fields[11]) + int(fields[12])) / self._tick
            old = self._seen.get(int(entry), (0.0, ""))
            # A process's command line reads empty once it exits; keep the last one seen.
            self._seen[int(entry)] = (max(cpu, old[0]), cmdline or old[1] or name)

    def by_kind(self) -> dict[str, float]:
        out = dict.fromkeys(CPU_KINDS, 0.0)
        for pid, (cpu, cmdline) in self._seen.items():
            kind = "driver" if pid == self.driver_pid else "other processes"
            if pid != self.driver_pid:
                kind = next((k for sub, k in PROCESS_KINDS if sub in cmdline), kind)
            out[kind] += cpu
        return out


def _env(tree: Path, trace: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("PLANGRAPH_TRACE_STARTUP", None)
    if trace is not None:
        env["PLANGRAPH_TRACE_STARTUP"] = str(trace)
    return env


def run_once(mode: str, tree: Path, plan: str, python: str, cpu: bool = False) -> dict[str, float]:
    """One traced process: ``{phase: seconds since spawn}`` (``exit`` included) and, for
    runs with workers, ``worker_ready_first``/``worker_ready_last``; with ``cpu``, also
    ``cpu:<kind>`` (CPU s of that kind's processes), ``cpu:run`` (their sum) and
    ``cpu:machine``."""
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
        sampler = CpuSampler() if cpu else None
        machine, own = _machine_cpu_s(), time.process_time()
        start = time.time()
        with tempfile.TemporaryFile() as stderr:
            proc = subprocess.Popen(
                cmd, cwd=tree, env=_env(tree, trace), stdout=subprocess.DEVNULL, stderr=stderr
            )
            if sampler is not None:
                sampler.driver_pid = proc.pid
            if sampler is None:
                proc.wait()
            else:
                while proc.poll() is None:
                    sampler.poll()
                    time.sleep(0.02)
            end = time.time()
            if proc.returncode != 0:
                stderr.seek(0)
                text = stderr.read().decode(errors="replace")
                raise RuntimeError(f"{mode} in {tree} exited {proc.returncode}:\n{text}")
        times: dict[str, float] = {"exit": end - start}
        if sampler is not None:
            kinds = sampler.by_kind()
            times.update({f"cpu:{k}": v for k, v in kinds.items()})
            times["cpu:run"] = sum(kinds.values())
            # Less this script's own polling, which the machine's count includes.
            times["cpu:machine"] = _machine_cpu_s() - machine - (time.process_time() - own)
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
            ("head_imported", "Ray imported in the head node's process"),
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
    measured = [c for c in results if any("cpu:machine" in run for run in results[c])]
    if measured:
        head = "| CPU s by process (median) |" + "".join(f" {t} {m} |" for t, m in measured)
        lines += [head, "|---|" + "---:|" * len(measured)]
        labels = {
            "run": "all of the run's processes",
            "machine": "whole machine (other load included)",
        }
        for kind in (*CPU_KINDS, "run", "machine"):
            values = {col: [r[f"cpu:{kind}"] for r in results[col]] for col in measured}
            if kind in CPU_KINDS and not any(v for vs in values.values() for v in vs):
                continue  # a kind no run started (the log monitor, a thread of the head)
            row = f"| {labels.get(kind, kind)} |"
            for col in measured:
                row += f" {_fmt(_median(values[col]))} |"
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
    ap.add_argument(
        "--cpu", action="store_true", help="also count every process's CPU time, by kind"
    )
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
                        times = run_once(mode, tree, args.plan, args.python, args.cpu)
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
