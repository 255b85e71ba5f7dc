#!/usr/bin/env python3
"""Race: plangraph's PPO and DQN plans against Stable-Baselines3 on CartPole-v1, end to end.

Every trial is a fresh process, timed from spawn to exit (the *whole-process* seconds a
user waits: interpreter, imports, Ray, workers, training, checkpoint, shutdown), with the
same criterion for all: solved once the mean return of the last 100 training episodes is
>= 475 (``--target``). Reported per trial: env steps sampled until then, training seconds
(plangraph: the run's ``time_total_s``, time inside training iterations; SB3: inside
``learn()``) and whole-process seconds; then medians per contender and the ratio of each
plangraph plan to its SB3 counterpart. Seeds are interleaved (seed 0 of every contender,
then seed 1, ...) so that a change in the machine's load hits all of them alike.

Contenders (all on one torch thread):

* ``plangraph ppo``: ``plangraph run plans/ppo.json --seed S --stop episode_return_mean=475
  --stop num_env_steps_sampled=300000`` (the CLI's defaults otherwise: TensorBoard events,
  a checkpoint every 10 iterations and at the end);
* ``plangraph dqn``: the same with ``plans/dqn.json`` and a 200,000 env-step budget;
* ``SB3 PPO`` and ``SB3 DQN``: Stable-Baselines3 with rl-baselines3-zoo's CartPole-v1
  hyperparameters (``hyperparams/ppo.yml``, ``hyperparams/dqn.yml``; ``SB3_ZOO`` below),
  ``learn(total_timesteps=<the zoo's n_timesteps>)`` (its schedules run over that many
  steps), stopped by a callback as soon as the criterion holds.

Stable-Baselines3 is not a plangraph dependency. ``--setup`` installs it into its own
throw-away virtual environment (``--venv``, default ``$XDG_CACHE_HOME/plangraph/race-sb3``)
with pip, pinned by ``constraints.txt`` (torch 2.13.0 CPU, as plangraph's).

Usage::

    .venv/bin/python tools/race.py --setup
    .venv/bin/python tools/race.py --seeds 0 1 2 3 4
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 475.0

PLANGRAPH_BUDGETS = {"ppo": 300_000, "dqn": 200_000}
"""Env-step budgets of the plans (the issues'; ``tools/train_all.py`` uses the same)."""

VENV_TIMEOUT_S = 300.0
"""Seconds ``python -m venv`` may take (seconds normally; it copies pip on a slow disk)."""

PIP_TIMEOUT_S = 1800.0
"""Seconds ``pip install`` of Stable-Baselines3 and its dependencies may take: it downloads
torch (hundreds of MB) unless pip's cache has it; a slow mirror takes minutes."""

CHECK_TIMEOUT_S = 300.0
"""Seconds importing Stable-Baselines3 and torch in the new venv may take (a cold cache on
a loaded 2-core machine: tens of seconds)."""

TRIAL_TIMEOUT_S = 3600.0
"""Seconds one trial process may take, spawn to exit: a trial runs to the target or to its
budget (at most 300,000 env steps: under a minute on the hosts of docs/benchmarks.md, a few
minutes on a loaded 2-core machine); past an hour it is hung, not slow."""

SB3_ZOO: dict[str, dict[str, Any]] = {
    # rl-baselines3-zoo, hyperparams/ppo.yml, CartPole-v1 (lin_X: X * progress_remaining).
    "ppo": {
        "n_envs": 8,
        "n_timesteps": 100_000,
        "kwargs": {
            "n_steps": 32,
            "batch_size": 256,
            "gae_lambda": 0.8,
            "gamma": 0.98,
            "n_epochs": 20,
            "ent_coef": 0.0,
        },
        "lin": {"learning_rate": 1e-3, "clip_range": 0.2},
    },
    # rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1.
    "dqn": {
        "n_envs": 1,
        "n_timesteps": 50_000,
        "kwargs": {
            "learning_rate": 2.3e-3,
            "batch_size": 64,
            "buffer_size": 100_000,
            "learning_starts": 1000,
            "gamma": 0.99,
            "target_update_interval": 10,
            "train_freq": 256,
            "gradient_steps": 128,
            "exploration_fraction": 0.16,
            "exploration_final_eps": 0.04,
            "policy_kwargs": {"net_arch": [256, 256]},
        },
        "lin": {},
    },
}

SB3_TRIAL = r"""
import json, sys, time
from collections import deque

import torch

torch.set_num_threads(1)
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

algo, seed, target = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
zoo = json.loads(sys.argv[4])


class SolvedAt(BaseCallback):
    def __init__(self):
        super().__init__()
        self.returns = deque(maxlen=100)
        self.solved_at = None

    def _on_step(self):
        for info in self.locals["infos"]:
            if "episode" in info:
                self.returns.append(float(info["episode"]["r"]))
        if len(self.returns) == 100 and sum(self.returns) / 100 >= target:
            self.solved_at = self.num_timesteps
            return False
        return True


def linear(start):
    return lambda progress_remaining: start * progress_remaining


env = make_vec_env("CartPole-v1", n_envs=zoo["n_envs"], seed=seed)
kwargs = dict(zoo["kwargs"])
kwargs.update({k: linear(v) for k, v in zoo["lin"].items()})
cls = PPO if algo == "ppo" else DQN
model = cls("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
callback = SolvedAt()
start = time.perf_counter()
model.learn(total_timesteps=zoo["n_timesteps"], callback=callback)
train_s = time.perf_counter() - start
steps = callback.solved_at if callback.solved_at is not None else model.num_timesteps
print(json.dumps({"solved": callback.solved_at is not None, "env_steps": steps,
                  "train_s": train_s}))
"""


@dataclass(frozen=True)
class Trial:
    contender: str
    seed: int
    solved: bool
    env_steps: int
    train_s: float
    process_s: float


def default_venv() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "plangraph" / "race-sb3"


def setup(venv: Path) -> int:
    """Create ``venv`` and install Stable-Baselines3 into it, torch pinned by constraints."""
    base = getattr(sys, "_base_executable", sys.executable)
    if not (venv / "bin" / "python").exists():
        print(f"race: creating {venv} ...", file=sys.stderr)
        subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=VENV_TIMEOUT_S)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    pip += ["-c", str(ROOT / "constraints.txt"), "stable-baselines3", "gymnasium"]
    print(f"race: {' '.join(pip)}", file=sys.stderr)
    subprocess.run(pip, check=True, timeout=PIP_TIMEOUT_S)
    check = (
        "import stable_baselines3, torch; print(stable_baselines3.__version__, torch.__version__)"
    )
    subprocess.run([str(venv / "bin" / "python"), "-c", check], check=True, timeout=CHECK_TIMEOUT_S)
    return 0


def run_plangraph(algo: str, seed: int, target: float) -> Trial:
    with tempfile.TemporaryDirectory(prefix="race_") as tmp:
        out = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "plangraph", "run", f"plans/{algo}.json"]
        cmd += ["--seed", str(seed), "--out", str(out), "--no-progress"]
        cmd += ["--stop", f"episode_return_mean={target}"]
        cmd += ["--stop", f"num_env_steps_sampled={PLANGRAPH_BUDGETS[algo]}"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TRIAL_TIMEOUT_S
        )
        process_s = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(
                f"plangraph {algo} seed {seed} exited {proc.returncode}:\n{proc.stderr}"
            )
        last = json.loads((out / "result.jsonl").read_text().splitlines()[-1])
    ret = last.get("episode_return_mean")
    return Trial(
        contender=f"plangraph {algo}",
        seed=seed,
        solved=isinstance(ret, (int, float)) and ret >= target,
        env_steps=int(last["num_env_steps_sampled"]),
        train_s=float(last["time_total_s"]),
        process_s=process_s,
    )


def run_sb3(algo: str, seed: int, target: float, python: Path) -> Trial:
    cmd = [str(python), "-c", SB3_TRIAL, algo, str(seed), str(target), json.dumps(SB3_ZOO[algo])]
    # SB3's logger makes a folder per run (SB3_LOGDIR, else $TMPDIR/SB3-<time>): here, in a
    # directory removed after the trial, as plangraph's run directory is.
    with tempfile.TemporaryDirectory(prefix="race_sb3_") as tmp:
        env = {**os.environ, "SB3_LOGDIR": tmp}
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TRIAL_TIMEOUT_S)
        process_s = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"SB3 {algo} seed {seed} exited {proc.returncode}:\n{proc.stderr}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return Trial(
        contender=f"SB3 {algo.upper()}",
        seed=seed,
        solved=bool(res["solved"]),
        env_steps=int(res["env_steps"]),
        train_s=float(res["train_s"]),
        process_s=process_s,
    )


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _f(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def report(trials: list[Trial], algos: list[str]) -> str:
    lines = ["| contender | seed | solved | env steps | training s | whole-process s |"]
    lines.append("|---|---:|---|---:|---:|---:|")
    for t in trials:
        lines.append(
            f"| {t.contender} | {t.seed} | {'yes' if t.solved else 'no'} | {t.env_steps:,} | "
            f"{t.train_s:.1f} | {t.process_s:.1f} |"
        )
    lines += [
        "",
        "Medians over the solved trials (whole-process s of every trial in brackets):",
        "",
        "| contender | solved | env steps | training s | whole-process s | ratio to SB3: "
        "training | whole-process |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for algo in algos:
        meds = {}
        for name in (f"plangraph {algo}", f"SB3 {algo.upper()}"):
            mine = [t for t in trials if t.contender == name]
            solved = [t for t in mine if t.solved]
            meds[name] = (
                len(solved),
                len(mine),
                _median([t.env_steps for t in solved]),
                _median([t.train_s for t in solved]),
                _median([t.process_s for t in solved]),
                _median([t.process_s for t in mine]),
            )
        pg, sb = meds[f"plangraph {algo}"], meds[f"SB3 {algo.upper()}"]
        for name, m in meds.items():
            ratio = ("-", "-")
            if name.startswith("plangraph") and pg[3] and sb[3]:
                ratio = (f"{pg[3] / sb[3]:.2f}", f"{pg[4] / sb[4]:.2f}")
            lines.append(
                f"| {name} | {m[0]}/{m[1]} | {_f(m[2], ',.0f')} | {_f(m[3])} | {_f(m[4])} "
                f"[{_f(m[5])}] | {ratio[0]} | {ratio[1]} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="install SB3 into --venv and exit")
    ap.add_argument("--venv", type=Path, default=default_venv(), help="SB3's virtual env")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--algos", nargs="+", default=["ppo", "dqn"], choices=["ppo", "dqn"])
    ap.add_argument("--target", type=float, default=TARGET, help="mean return to solve")
    ap.add_argument("--only", choices=["plangraph", "sb3"], help="run one side only")
    args = ap.parse_args(argv)
    if args.setup:
        return setup(args.venv)
    python = args.venv / "bin" / "python"
    if args.only != "plangraph" and not python.exists():
        ap.error(f"no Stable-Baselines3 environment at {args.venv}; run with --setup first")

    trials: list[Trial] = []
    for seed in args.seeds:
        for algo in args.algos:
            if args.only != "sb3":
                trials.append(run_plangraph(algo, seed, args.target))
                print(trials[-1], file=sys.stderr)
            if args.only != "plangraph":
                trials.append(run_sb3(algo, seed, args.target, python))
                print(trials[-1], file=sys.stderr)
    print(report(trials, args.algos))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
