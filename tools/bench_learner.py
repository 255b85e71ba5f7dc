#!/usr/bin/env python3
"""Learner speed: SGD minibatch updates/s and env steps trained/s of each plan's learner.

For each plan (``ppo``, ``a2c``, ``dqn``) the learner policy is built from the plan's own
``WorkerSet`` policy config and trained the way its ``TrainOneStep`` node trains it
(``num_sgd_iter``, ``sgd_minibatch_size``), on fixed batches from a real rollout:

* ``ppo``, ``a2c``: train batches of ``train_batch_size`` env steps sampled by a
  ``RolloutWorker`` with the plan's sub-envs and fragment length (postprocessed, GAE);
* ``dqn``: batches of ``train_batch_size`` transitions drawn from a replay buffer holding
  the first ``--dqn-fill`` env steps of a rollout (n-step transitions as the plan makes).

The policy keeps learning across calls (as in a run); one torch thread, as the learner in
``plangraph run``. ``--devices`` (default: ``cpu``, and ``cuda`` when torch sees a GPU)
trains on each device in turn (``WorkerSet`` ``learner.device``: batches copied to the
GPU from pinned memory, weights read back as CPU arrays once per call, as a broadcast
does). Each round times every plan for ``--seconds``; the table shows medians
over ``--rounds``. ``--tree LABEL=DIR`` (repeatable) runs each round once per checkout, in
a child process with ``PYTHONPATH=DIR``, interleaved, to compare a change with its base.

Usage::

    PYTHONPATH=. .venv/bin/python tools/bench_learner.py
    PYTHONPATH=. .venv/bin/python tools/bench_learner.py --tree before=/tmp/base --tree after=.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLANS = ("ppo", "a2c", "dqn")
DEFAULT_PLANS = ("ppo", "dqn")
CHILD_SETUP_S = 600.0
"""Seconds a ``--tree`` child may take per plan and device beyond its timed ``--seconds``:
importing torch, sampling the train batches (DQN's 20,000-step replay fill) and warming
up, on a loaded 2-core machine; a child past that is hung, not slow."""


def _plan_learner(plan: str) -> tuple[Any, Any, dict[str, Any]]:
    """``(WorkerSetParams, TrainOneStep params, plan config)`` of ``plans/<plan>.json``."""
    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / f"{plan}.json")
    ws = next(r.params for r in compiled.resources.values() if r.kind == "WorkerSet")
    train = next(n.params for n in compiled.nodes.values() if n.op == "TrainOneStep")
    return ws, train, dict(compiled.config)


def _batches(plan: str, ws: Any, config: dict[str, Any], dqn_fill: int) -> list[Any]:
    """Fixed train batches from a real rollout (seeded: the same on every run)."""
    from plangraph.rl import SampleBatch, make_replay_buffer
    from plangraph.rl.rollout_worker import RolloutWorker

    worker = RolloutWorker(
        ws.env, ws.num_envs_per_worker, ws.rollout_fragment_length, ws.policy, seed=0
    )
    size = int(config["train_batch_size"])
    if plan != "dqn":
        out = []
        for _ in range(4):
            parts = [worker.sample()]
            while sum(p.count for p in parts) < size:
                parts.append(worker.sample())
            out.append(SampleBatch.concat_samples(parts))
        return out
    from plangraph.ops.resources import ReplayBufferParams

    buffer = make_replay_buffer(ReplayBufferParams(capacity=dqn_fill, learning_starts=0), seed=0)
    while len(buffer) < dqn_fill:
        worker.set_global_vars({"timestep": worker.num_env_steps_sampled})
        buffer.add(worker.sample())
    return [buffer.sample(size) for _ in range(64)]


def measure(
    plans: list[str], seconds: float, dqn_fill: int, device: str = "cpu"
) -> dict[str, dict[str, float]]:
    """Per plan, on ``device``: ``updates_per_s``, ``env_steps_trained_per_s``,
    ``ms_per_call`` (wall clock) and ``cpu_updates_per_s`` (updates per second of this
    process's CPU time, which a loaded machine disturbs less than the wall clock)."""
    import torch

    from plangraph.rl import make_policy

    torch.set_num_threads(1)
    out = {}
    for plan in plans:
        ws, train, config = _plan_learner(plan)
        batches = _batches(plan, ws, config, dqn_fill)
        first = batches[0]
        from plangraph.rl.rollout_worker import make_vector_env

        env = make_vector_env(ws.env, 1)
        policy = make_policy(
            env.single_observation_space, env.single_action_space, ws.policy, 0, device
        )
        env.close()
        args = (train.num_sgd_iter, train.sgd_minibatch_size)
        for b in batches[:2]:  # warm-up: first calls allocate
            policy.train(b, *args)
        calls = steps = trained = 0
        cpu_start = time.process_time()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or calls < 3:
            stats = policy.train(batches[calls % len(batches)], *args)
            policy.get_weights()  # what a weight broadcast reads (a copy to the host)
            calls += 1
            steps += int(stats["num_grad_steps"])
            trained += int(stats["num_env_steps_trained"])
        took = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        out[plan] = {
            "updates_per_s": steps / took,
            "env_steps_trained_per_s": trained / took,
            "ms_per_call": 1000.0 * took / calls,
            "cpu_updates_per_s": steps / cpu,
            "rows": first.count,
            "updates_per_call": steps / calls,
        }
    return out


def _child(args: argparse.Namespace) -> int:
    print(
        json.dumps({d: measure(args.plans, args.seconds, args.dqn_fill, d) for d in args.devices})
    )
    return 0


def _default_devices() -> list[str]:
    import torch

    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", nargs="+", default=list(DEFAULT_PLANS), choices=PLANS)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per plan/round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (the table shows medians)")
    ap.add_argument("--dqn-fill", type=int, default=20_000, help="env steps in DQN's replay")
    ap.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument(
        "--devices",
        nargs="+",
        choices=("cpu", "cuda"),
        help="learner devices (default: cpu, and cuda when torch sees a GPU)",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.devices = args.devices or _default_devices()
    if args.child:
        return _child(args)

    trees = [t.partition("=")[::2] for t in args.tree] or [("this", "")]
    runs: dict[str, list[dict[str, dict[str, dict[str, float]]]]] = {
        label: [] for label, _ in trees
    }
    for r in range(args.rounds):
        for label, tree in trees:
            if not tree:
                runs[label].append(
                    {d: measure(args.plans, args.seconds, args.dqn_fill, d) for d in args.devices}
                )
                continue
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--plans"]
            cmd += [*args.plans, "--seconds", str(args.seconds), "--dqn-fill", str(args.dqn_fill)]
            cmd += ["--devices", *args.devices]
            env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
            limit = len(args.plans) * len(args.devices) * (args.seconds + CHILD_SETUP_S)
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, check=True, timeout=limit
            )
            runs[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(
        "| plan | device | tree | rows x updates/call | SGD updates/s | env steps trained/s | "
        "ms/call | updates per CPU s |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|")
    for plan in args.plans:
        for device in args.devices:
            for label, _ in trees:
                _row(plan, device, label, [run[device][plan] for run in runs[label]])
    return 0


def _row(plan: str, device: str, label: str, rs: list[dict[str, float]]) -> None:
    med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
    print(
        f"| {plan} | {device} | {label} | {int(med['rows'])} x {med['updates_per_call']:.0f} | "
        f"{med['updates_per_s']:,.0f} | {med['env_steps_trained_per_s']:,.0f} | "
        f"{med['ms_per_call']:.1f} | {med['cpu_updates_per_s']:,.0f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
