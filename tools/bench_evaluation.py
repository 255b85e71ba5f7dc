"""What greedy evaluation during training costs: PPO on CartPole with and without it.

Each row trains ``plans/ppo.json`` (its defaults: 2 rollout workers, 1,024 env steps per
iteration) for ``--iterations`` iterations at seed 0, evaluating every ``interval``
iterations (``evaluation_episodes`` episodes, in the driver, ``plangraph.runtime.evaluation``).
Columns: training seconds per iteration (``time_this_iter_s``, the dataflow), evaluation
seconds per evaluation (``evaluation/time_s``) and per training iteration (amortised), the
mean greedy episode length (evaluation env steps grow with it: CartPole episodes end at 500),
evaluation env steps per second, and the overhead: evaluation seconds over training seconds.
Not a test: it asserts nothing.

    .venv/bin/python tools/bench_evaluation.py [--iterations 30] [--episodes 10]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import plangraph

PLAN = Path(__file__).resolve().parent.parent / "plans" / "ppo.json"


def run(iterations: int, interval: int, episodes: int) -> dict[str, float]:
    compiled = plangraph.compile(PLAN)
    with plangraph.build(
        compiled, seed=0, evaluation_interval=interval, evaluation_episodes=episodes
    ) as algo:
        results = [algo.train() for _ in range(iterations)]
    train_s = statistics.mean(r["time_this_iter_s"] for r in results)
    evals = [r["evaluation"] for r in results if "evaluation" in r]
    eval_s = statistics.mean(e["time_s"] for e in evals) if evals else 0.0
    length = statistics.mean(e["episode_len_mean"] for e in evals) if evals else 0.0
    per_iter = sum(e["time_s"] for e in evals) / iterations
    return {
        "train_s": train_s,
        "eval_s": eval_s,
        "per_iter": per_iter,
        "length": length,
        "steps_per_s": episodes * length / eval_s if eval_s else 0.0,
        "overhead": per_iter / train_s,
        "final": results[-1].get("episode_return_mean", float("nan")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    print(f"PPO CartPole-v1, {args.iterations} iterations, {args.episodes} evaluation episodes\n")
    print(
        "| evaluation_interval | train s/iter | eval s/eval | eval s/iter | greedy ep. len "
        "| eval env steps/s | overhead |"
    )
    print("|---|---|---|---|---|---|---|")
    for interval in (0, 5, 1):
        r = run(args.iterations, interval, args.episodes)
        if interval == 0:
            print(f"| off | {r['train_s']:.3f} | - | - | - | - | - |")
            continue
        print(
            f"| {interval} | {r['train_s']:.3f} | {r['eval_s']:.3f} | {r['per_iter']:.3f} "
            f"| {r['length']:.0f} | {r['steps_per_s']:,.0f} | {100 * r['overhead']:.1f}% |"
        )


if __name__ == "__main__":
    main()
