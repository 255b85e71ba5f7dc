"""MAML's held-out measurement: does one inner step help on tasks never trained on?

For each seed: meta-train ``plans/maml.json`` (``--iterations`` meta-updates, with the
plan's 2 rollout workers adapting in their own processes), then, in this process, take the
learner's meta-policy to ``--tasks`` held-out tasks of the plan's env (drawn with
``plangraph.algorithms.maml.evaluation.HELD_OUT_SEED``, the same for every seed) and
measure the mean episode return of the plan's ``num_envs_per_worker`` episodes per task
before and after one inner adaptation step (``inner_adaptation``, the function the
workers run). The same is measured for the meta-policy before meta-training (the seed's
initial weights), which shows how much of the gain meta-training brings.

For ``Navigation2D`` it also gives the best return a policy that ignores the task can
expect: over the goal distribution (``DISTRIBUTION_BOUND``, -38.3), and in hindsight on
the held-out tasks themselves (their goals' geometric median, ``task_agnostic_bound``).
An unadapted meta-policy cannot beat them; an adapted one that does has used what its
inner step learnt about the task.

Prints a markdown table (one row per seed: mean over the tasks) and the mean over seeds;
``--json PATH`` also writes every task's figures. Exit status 1 when the mean gain over
seeds after meta-training is not positive.

Usage::

    .venv/bin/python tools/eval_maml.py --seeds 0 1 2            # the benchmark figure
    .venv/bin/python tools/eval_maml.py --seeds 0 --iterations 20 --tasks 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ITERATIONS = 50


#: Navigation2D: the best expected return of a policy that ignores the task, over the goal
#: distribution (uniform in [-0.5, 0.5]^2; by symmetry, standing at the origin): 100 steps
#: x the mean distance of a uniform point of the unit square from its centre,
#: (sqrt(2) + asinh(1)) / 6
DISTRIBUTION_BOUND = -100.0 * (np.sqrt(2.0) + np.arcsinh(1.0)) / 6.0


def task_agnostic_bound(goals: np.ndarray, horizon: int = 100) -> float:
    """Navigation2D: the best mean return over tasks with goals ``goals`` (float ``[n, 2]``)
    of any policy that ignores the task. Its position at each step is then the same
    random variable for every task, so each step costs at least ``min_p mean_i ||p -
    g_i||``, the geometric median's mean distance (Weiszfeld's iteration), and an episode
    ``horizon`` times that."""
    p = goals.mean(axis=0)
    for _ in range(1000):
        d = np.maximum(np.linalg.norm(goals - p, axis=1), 1e-12)
        p = (goals / d[:, None]).sum(axis=0) / (1.0 / d).sum()
    return -horizon * float(np.linalg.norm(goals - p, axis=1).mean())


def measure(seed: int, iterations: int, num_tasks: int, plan_path: Path) -> dict[str, Any]:
    """Meta-train one seed and measure pre/post returns on the held-out tasks."""
    import plangraph
    from plangraph.algorithms.maml.evaluation import evaluate_adaptation, held_out_tasks

    compiled = plangraph.compile(plan_path)
    ws: Any = compiled.resources["workers"].params
    tasks = held_out_tasks(ws.env, num_tasks)

    def evaluate(weights: Any) -> list[Any]:
        return evaluate_adaptation(
            ws.env,
            ws.policy,
            weights,
            tasks,
            num_envs=ws.num_envs_per_worker,
            rollout_fragment_length=ws.rollout_fragment_length,
            seed=seed,
        )

    start = time.perf_counter()
    with plangraph.build(compiled, seed=seed) as algo:
        before = evaluate(algo.policy.get_weights())
        result = algo.run(max_iterations=iterations)
        after = evaluate(algo.policy.get_weights())
    wall = time.perf_counter() - start

    def mean(values: list[float]) -> float:
        return float(statistics.fmean(values))

    goals = [t.get("goal") if isinstance(t, dict) else None for t in tasks]
    bound = (
        task_agnostic_bound(np.array(goals, dtype=np.float64), ws.rollout_fragment_length)
        if all(g is not None for g in goals)
        else float("nan")
    )
    return {
        "seed": seed,
        "task_agnostic_bound": bound,
        "iterations": int(result["iteration"]),
        "env_steps": int(result["num_env_steps_sampled"]),
        "wall_s": wall,
        "init_pre": mean([r.pre for r in before]),
        "init_post": mean([r.post for r in before]),
        "pre": mean([r.pre for r in after]),
        "post": mean([r.post for r in after]),
        "gain": mean([r.gain for r in after]),
        "init_gain": mean([r.gain for r in before]),
        "tasks": [
            {"task": r.task, "pre": r.pre, "post": r.post, "init_pre": b.pre, "init_post": b.post}
            for r, b in zip(after, before, strict=True)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--iterations", type=int, default=DEFAULT_ITERATIONS, help="meta-updates per seed"
    )
    parser.add_argument("--tasks", type=int, default=10, help="held-out tasks")
    parser.add_argument("--plan", type=Path, default=ROOT / "plans" / "maml.json")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)

    import ray

    for attempt in range(3):
        try:
            ray.init(include_dashboard=False, log_to_driver=False)
            break
        except Exception as exc:  # Ray's 30 s raylet wait can expire on a loaded machine
            if attempt == 2:
                raise
            print(f"ray.init failed ({exc}); retrying", file=sys.stderr)
            ray.shutdown()
    rows = []
    try:
        for seed in args.seeds:
            row = measure(seed, args.iterations, args.tasks, args.plan)
            rows.append(row)
            print(
                f"seed {seed}: held-out return {row['pre']:.1f} -> {row['post']:.1f} after one "
                f"step (gain {row['gain']:+.1f}; before meta-training {row['init_pre']:.1f} -> "
                f"{row['init_post']:.1f}), {row['env_steps']:,} env steps, "
                f"{row['wall_s']:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    finally:
        ray.shutdown()

    print(
        "| seed | meta-updates | env steps | unadapted | after 1 step | gain | "
        "gain before meta-training |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seed']} | {r['iterations']} | {r['env_steps']:,} | {r['pre']:.1f} | "
            f"{r['post']:.1f} | {r['gain']:+.1f} | {r['init_gain']:+.1f} |"
        )
    gains = [r["gain"] for r in rows]
    bound = rows[0]["task_agnostic_bound"] if rows else float("nan")
    spread = f" (min {min(gains):+.1f}, max {max(gains):+.1f})" if len(gains) > 1 else ""
    print(
        f"\nmean over {len(rows)} seed(s) x {args.tasks} held-out tasks: unadapted "
        f"{statistics.fmean(r['pre'] for r in rows):.1f}, after one inner step "
        f"{statistics.fmean(r['post'] for r in rows):.1f}, gain "
        f"{statistics.fmean(gains):+.1f}{spread}; the best a policy that ignores the task can "
        f"expect: {DISTRIBUTION_BOUND:.1f} over the goal distribution, {bound:.1f} on these "
        "tasks in hindsight"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if statistics.fmean(gains) > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
