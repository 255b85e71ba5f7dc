"""Throughput of the pixel and MuJoCo plans: env steps/s sampling only and end to end, and
the bytes one transition takes in replay.

Plans: ``plans/impala_pong.json`` (ALE/Pong-v5 through ``atari_preprocessing``: uint8
``[84, 84, 4]`` frames, the Nature CNN, 2 rollout workers x 5 envs) and
``plans/ppo_halfcheetah.json`` (HalfCheetah-v5, ``normalize_observation``, 64x64 MLP,
2 rollout workers x 4 envs). Needs the ``atari`` and ``mujoco`` extras. On real Ray
(started in-process with every CPU of the machine):

* ``sampling only``: the plan's worker set (its env, wrappers, policy and fragment
  length) built alone; ``ray.get`` of one ``sample()`` from every rollout worker at once,
  repeated for ``--seconds`` after one warm-up round; no learner;
* ``end to end``: the plan built and trained (``Algorithm.train()``) for
  ``--iterations`` iterations after one warm-up iteration; env steps sampled (and
  trained) per second of those iterations. ``impala_pong`` runs with
  ``min_env_steps_per_iter=2000`` (the plan's 10,000 would make each iteration long).

Bytes per transition in replay are measured from the arrays a ``ReplayBuffer`` allocates
when it holds exactly the rows added (``buffer.nbytes / len(buffer)``, the int64
insertion id of each slot included), for rows sampled by a rollout worker on the plan's
env and wrappers: the plan's own fragments (on-policy columns; no ``next_obs``) and the
rows of the replay learner for that action space (DQN for Pong's ``Discrete(6)``, SAC for
HalfCheetah's ``Box(6)``), which store ``obs`` and ``next_obs``. The observation columns'
share is measured from a replayed batch (``nbytes / rows`` of each column).

``--aggregation`` measures instead the runtime path of ``AggregateBatches`` against plain
IMPALA: ``plans/impala`` (fragments gathered by the driver, ``UpdateWorkerWeights`` and
``ConcatBatches`` there) and ``plans/impala_agg`` (2 aggregation actors that gather,
sync and concatenate; the driver gets train batches), both 2 rollout workers x 8 envs x
32 steps and 512-step train batches, built and trained in turn (``--rounds`` times each,
alternating, so that a change in the machine's load hits both alike). Per run, over
``--iterations`` iterations after a warm-up one: env steps sampled and trained per second,
and the driver's CPU time per 1,000 env steps sampled: its main thread (the dataflow:
gathering, weight syncs, concatenation, metrics) and the whole driver process (with the
learner thread and Ray's threads). The load average is printed with the table.

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python tools/bench_throughput.py
    PYTHONPATH=. .venv/bin/python tools/bench_throughput.py --plans ppo_halfcheetah --seconds 5
    PYTHONPATH=. .venv/bin/python tools/bench_throughput.py --aggregation --rounds 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLANS = ("impala_pong", "ppo_halfcheetah")
E2E_CONFIG: dict[str, dict[str, Any]] = {"impala_pong": {"min_env_steps_per_iter": 2000}}
REPLAY_ALGO = {"impala_pong": "dqn", "ppo_halfcheetah": "sac"}


def _worker_params(compiled: Any) -> Any:
    (params,) = [
        r.params for r in compiled.resources.values() if r.kind == "WorkerSet"
    ]  # both plans have one worker set
    return params


def sampling_only(compiled: Any, seconds: float) -> float:
    """Env steps/s of the plan's rollout workers sampling in parallel, no learner."""
    import ray

    from plangraph.rl.worker_set import WorkerSet

    ws = WorkerSet.from_params(_worker_params(compiled), seed=0)
    try:
        ray.get([w.sample.remote() for w in ws.remote_workers])  # warm-up
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            batches = ray.get([w.sample.remote() for w in ws.remote_workers])
            steps += sum(b.count for b in batches)
        return steps / (time.perf_counter() - started)
    finally:
        ws.stop()


def end_to_end(name: str, iterations: int) -> tuple[float, float]:
    """(env steps sampled/s, env steps trained/s) of ``iterations`` training iterations."""
    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / f"{name}.json", config=E2E_CONFIG.get(name))
    algo = plangraph.build(compiled, seed=0)
    try:
        first = algo.train()  # warm-up: actors started, first weights synced
        started = time.perf_counter()
        result = first
        for _ in range(iterations):
            result = algo.train()
        elapsed = time.perf_counter() - started
        sampled = result["num_env_steps_sampled"] - first["num_env_steps_sampled"]
        trained = result["num_env_steps_trained"] - first["num_env_steps_trained"]
        return sampled / elapsed, trained / elapsed
    finally:
        algo.stop()


AGGREGATION_PLANS = ("impala", "impala_agg")


def aggregation_run(name: str, iterations: int, seed: int) -> dict[str, float]:
    """One build of plan ``name``: env steps sampled/trained per second of ``iterations``
    iterations after a warm-up one, and the driver's CPU seconds (main thread; whole
    process) per 1,000 env steps sampled over them."""
    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / f"{name}.json")
    algo = plangraph.build(compiled, seed=seed)
    try:
        first = algo.train()  # warm-up: actors started, first weights synced
        started = time.perf_counter()
        main0, proc0 = time.thread_time(), time.process_time()
        result = first
        for _ in range(iterations):
            result = algo.train()
        main_cpu, proc_cpu = time.thread_time() - main0, time.process_time() - proc0
        elapsed = time.perf_counter() - started
        sampled = result["num_env_steps_sampled"] - first["num_env_steps_sampled"]
        trained = result["num_env_steps_trained"] - first["num_env_steps_trained"]
        return {
            "sampled_s": sampled / elapsed,
            "trained_s": trained / elapsed,
            "main_ms": 1e6 * main_cpu / sampled,
            "proc_ms": 1e6 * proc_cpu / sampled,
        }
    finally:
        algo.stop()


def aggregation_main(iterations: int, rounds: int) -> int:
    """``--aggregation``: plans/impala against plans/impala_agg (module doc)."""
    import os
    import statistics

    from plangraph.runtime.ray_session import ensure_ray

    ensure_ray()
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in AGGREGATION_PLANS}
    for r in range(rounds):
        for name in AGGREGATION_PLANS:
            runs[name].append(aggregation_run(name, iterations, seed=r))
            print(f"{name} round {r}: {runs[name][-1]}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print(
        f"{rounds} run(s) per plan, alternating; {iterations} iterations (5,000 env steps "
        "each) per run after a warm-up one; medians over the runs; load average (1, 5, "
        f"15 min) {', '.join(f'{x:.1f}' for x in load_before)} before and "
        f"{', '.join(f'{x:.1f}' for x in load_after)} after, on {os.cpu_count()} CPUs"
    )
    print()
    print(
        "| plan | env steps sampled/s | env steps trained/s | driver main thread: CPU ms "
        "per 1,000 env steps | driver process: CPU ms per 1,000 env steps |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, rs in runs.items():
        med = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
        print(
            f"| {name} | {med['sampled_s']:,.0f} | {med['trained_s']:,.0f} "
            f"| {med['main_ms']:.1f} | {med['proc_ms']:.1f} |"
        )
    return 0


def replay_bytes(compiled: Any, algo: str | None, rows: int = 256) -> dict[str, Any]:
    """Bytes per transition of ``rows`` rows in a ``ReplayBuffer`` holding exactly them,
    sampled on the plan's env and wrappers by the plan's policy (``algo=None``) or by the
    replay learner ``algo`` with its default settings."""
    from plangraph.algorithms.dqn import DQNConfig
    from plangraph.algorithms.sac import SACConfig
    from plangraph.rl.replay_buffer import ReplayBuffer
    from plangraph.rl.rollout_worker import RolloutWorker
    from plangraph.rl.sample_batch import SampleBatch
    from plangraph.rl.wrappers import WrappedEnvCreator

    params = _worker_params(compiled)
    policy = {"dqn": DQNConfig(), "sac": SACConfig(), None: params.policy}[algo]
    worker = RolloutWorker(WrappedEnvCreator(params.env, params.wrappers), 1, rows, policy)
    batch = worker.sample()
    buffer = ReplayBuffer(capacity=batch.count, seed=0)
    buffer.add(batch)
    replayed = buffer.sample(batch.count)
    obs_cols = [c for c in (SampleBatch.OBS, SampleBatch.NEXT_OBS) if c in replayed]
    obs = replayed[SampleBatch.OBS]
    return {
        "rows": f"{compiled.plan.name} ({policy.algo})" if algo else compiled.plan.name,
        "obs": f"{obs.dtype} {list(obs.shape[1:])}",
        "cols": " + ".join(obs_cols),
        "per_row": buffer.nbytes / len(buffer),
        "obs_bytes": sum(replayed[c].nbytes for c in obs_cols) / replayed.count,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", nargs="*", default=list(PLANS), choices=PLANS)
    ap.add_argument("--seconds", type=float, default=10.0, help="timed sampling per plan")
    ap.add_argument("--iterations", type=int, default=5, help="timed iterations per plan")
    ap.add_argument(
        "--aggregation",
        action="store_true",
        help="compare plans/impala and plans/impala_agg instead (module doc)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="--aggregation: runs per plan")
    args = ap.parse_args(argv)
    if args.aggregation:
        return aggregation_main(args.iterations, args.rounds)

    import plangraph
    from plangraph.runtime.ray_session import ensure_ray

    ensure_ray()
    rows, replay = [], []
    for name in args.plans:
        compiled = plangraph.compile(ROOT / "plans" / f"{name}.json")
        sample_rate = sampling_only(compiled, args.seconds)
        sampled, trained = end_to_end(name, args.iterations)
        rows.append((name, sample_rate, sampled, trained))
        replay.append(replay_bytes(compiled, None))
        replay.append(replay_bytes(compiled, REPLAY_ALGO[name]))
        print(f"{name}: done", file=sys.stderr, flush=True)

    print(
        f"sampling: {args.seconds:g} s per plan; end to end: {args.iterations} iterations "
        "after a warm-up one; 2 rollout workers"
    )
    print()
    print(
        "| plan | sampling only: env steps/s | end to end: env steps sampled/s "
        "| end to end: env steps trained/s |"
    )
    print("|---|---:|---:|---:|")
    for name, sample_rate, sampled, trained in rows:
        print(f"| {name} | {sample_rate:,.0f} | {sampled:,.0f} | {trained:,.0f} |")
    print()
    print("| rows in replay | obs | bytes per transition | of which observation columns |")
    print("|---|---|---:|---:|")
    for r in replay:
        print(
            f"| {r['rows']} | {r['obs']} | {r['per_row']:,.0f} "
            f"| {r['obs_bytes']:,.0f} ({r['cols']}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
