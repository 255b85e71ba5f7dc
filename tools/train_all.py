"""Learning benchmark: train the plans on their tasks until solved; print a table.

The CartPole plans on CartPole-v1 (target 475); ``ppo_pendulum``, ``sac_pendulum``,
``td3`` and ``ddpg`` on Pendulum-v1 (target -200); the multi-agent ``two_trainer`` and
``ppo_multiagent`` on MultiAgentCartPole with 2 agents (every policy's return of its last
100 episodes >= 450);
``ppo_halfcheetah`` on HalfCheetah-v5 (target 1500) and ``impala_pong`` on ALE/Pong-v5
(target 18), which run only when named in ``--plans`` (``NOT_BY_DEFAULT``); see ``TASKS``.

For every (plan, seed) the plan JSON (``plans/<plan>.json``) is compiled, built with
``--num-workers`` rollout workers and trained one iteration at a time until
``episode_return_mean`` (training episodes, last 100) reaches ``--target`` or
``num_env_steps_sampled`` reaches the plan's budget (env steps). Each row reports:

* ``solved``: reached the target within the budget;
* ``env steps``: ``num_env_steps_sampled`` at the first iteration with the target met
  (else at the end, shown with ``>``);
* ``wall s``: seconds from ``build()`` (rollout-worker actors start-up included) to that
  iteration; Ray's own start-up is excluded and printed once, separately;
* ``train s``: the same, without the build (``time_total_s`` of the run);
* ``env steps/s``: ``num_env_steps_sampled / train s``.

Each run's line on stderr (and ``--json``) also gives ``num_env_steps_trained`` at that
iteration (``env_steps_trained``): twice the sampled steps for a plan that replays one
batch per sampled one (``impala_mixin``).

A second table gives each plan's spread over the seeds: how many solved within the budget,
and the median, min and max of env steps and wall s to solve (over the solved seeds; the
unsolved ones are counted, never averaged in).

Usage::

    .venv/bin/python tools/train_all.py                      # the default plans, seeds 0..9
    .venv/bin/python tools/train_all.py --plans dqn --num-seeds 20   # seeds 0..19
    .venv/bin/python tools/train_all.py --plans ppo dqn --seeds 0 1 --budget dqn=150000
    .venv/bin/python tools/train_all.py --plans ppo --set ppo.lr=1e-3 --verbose

Prints a markdown table (``--json PATH`` also writes the rows). Exit status 1 when a run
did not solve within its budget.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLANS_DIR = ROOT / "plans"

BUDGETS: dict[str, int] = {
    "ppo": 300_000,
    "ddppo": 300_000,
    "ppo_kl": 300_000,
    "dqn": 200_000,
    "a2c": 500_000,
    "a2c_microbatch": 500_000,
    "pg": 500_000,
    "impala": 1_000_000,
    "impala_mixin": 1_000_000,
    "impala_agg": 1_000_000,
    "appo": 1_000_000,
    "a3c": 1_000_000,
    "apex": 300_000,
    "ppo_pendulum": 1_000_000,
    "sac_pendulum": 30_000,
    "td3": 30_000,
    "ddpg": 50_000,
    "two_trainer": 400_000,
    "ppo_multiagent": 400_000,
    "ppo_halfcheetah": 1_000_000,
    "impala_pong": 10_000_000,
    "ppo_lstm": 1_000_000,
    "ppo_lstm_mlp": 1_000_000,
    "r2d2": 500_000,
    "r2d2_mlp": 500_000,
    "r2d2_apex": 500_000,
}
"""Env steps (sampled) within which each plan must solve its task (the issues)."""

TASKS: dict[str, tuple[str, float]] = {
    "ppo_pendulum": ("Pendulum-v1", -200.0),
    "sac_pendulum": ("Pendulum-v1", -200.0),
    "td3": ("Pendulum-v1", -200.0),
    "ddpg": ("Pendulum-v1", -200.0),
    "two_trainer": ("MultiAgentCartPole", 450.0),
    "ppo_multiagent": ("MultiAgentCartPole", 450.0),
    "ppo_halfcheetah": ("HalfCheetah-v5", 1500.0),
    "impala_pong": ("ALE/Pong-v5", 18.0),
    "ppo_lstm": ("StatelessCartPole", 400.0),
    "ppo_lstm_mlp": ("StatelessCartPole", 400.0),
    "r2d2": ("StatelessCartPole", 300.0),
    "r2d2_mlp": ("StatelessCartPole", 300.0),
    "r2d2_apex": ("StatelessCartPole", 300.0),
}
"""``(env, target episode_return_mean)`` of the plans not judged on CartPole-v1 (475); a
multi-agent plan is judged on its worst policy (``judged_return``)."""
DEFAULT_TASK = ("CartPole-v1", 475.0)

NOT_BY_DEFAULT = (
    "ppo_halfcheetah",
    "impala_pong",
    "ppo_lstm",
    "ppo_lstm_mlp",
    "r2d2",
    "r2d2_mlp",
    "r2d2_apex",
)
"""Plans run only when named in ``--plans``: hours (HalfCheetah) to days (Pong) of
training on a 2-core machine (their throughput: ``tools/bench_throughput.py``); they need
the ``mujoco`` and ``atari`` extras. The StatelessCartPole pair (issue 31) trains up to
1M env steps each, the MLP row always to the end (it cannot see the velocities); R2D2's
pair (``r2d2``, ``r2d2_mlp``) and ``r2d2_apex`` up to 500,000 env steps each, target 300."""

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "ppo_lstm_mlp": ("ppo_lstm", {"model": {"type": "mlp", "hiddens": [64, 64]}}),
    "r2d2_mlp": ("r2d2", {"model": {"type": "mlp", "hiddens": [64, 64], "activation": "relu"}}),
}
"""Rows that are another plan with config overrides: name -> (plan file, overrides).
``ppo_lstm_mlp`` is ``plans/ppo_lstm`` with an MLP instead of the LSTM, measured alongside
it to show what memory buys on a partially observed task; ``r2d2_mlp`` likewise for
``plans/r2d2``."""

DEFAULT_NUM_SEEDS = 10
"""Seeds ``0 .. DEFAULT_NUM_SEEDS - 1`` by default: a plan is judged on its spread over
seeds (the hardening issue asks >= 9 of 10 to solve), never on its best ones."""


@dataclass(frozen=True)
class RunRow:
    """One (plan, seed) learning run; steps in env steps sampled, times in seconds."""

    plan: str
    env: str
    target: float
    seed: int
    solved: bool
    env_steps: int
    wall_s: float
    train_s: float
    env_steps_per_s: float
    budget: int
    final_return: float | None
    best_return: float | None
    env_steps_trained: int = 0


def judged_return(result: dict[str, Any]) -> float | None:
    """The return a run is judged on: ``episode_return_mean``, or for a multi-agent plan
    the lowest ``policies/<id>/episode_return_mean`` (every policy must reach the target;
    None until each has one)."""
    policies = result.get("policies")
    if not policies:
        return result.get("episode_return_mean")
    values = [p.get("episode_return_mean") for _, p in sorted(policies.items())]
    return None if any(v is None for v in values) else min(values)


def train_one(
    plan: str,
    seed: int,
    *,
    budget: int,
    target: float,
    env: str,
    num_workers: int,
    config: dict[str, Any] | None = None,
    verbose: bool = False,
) -> RunRow:
    """Train ``plans/<plan>.json`` until ``episode_return_mean >= target`` or ``budget``
    env steps; Ray must already be running (``ensure_ray``)."""
    import plangraph

    base, preset = VARIANTS.get(plan, (plan, {}))
    merged = {**preset, **(config or {})}
    compiled = plangraph.compile(PLANS_DIR / f"{base}.json", config=merged or None)
    started = time.perf_counter()
    algo = plangraph.build(compiled, env=env, num_workers=num_workers, seed=seed)
    try:
        best: float | None = None
        result: dict[str, Any] = {}
        while True:
            result = algo.train()
            ret = judged_return(result)
            if ret is not None:
                best = ret if best is None else max(best, ret)
            steps = int(result["num_env_steps_sampled"])
            if verbose:
                print(
                    f"  {plan} seed={seed} it={result['iteration']:4d} steps={steps:7d} "
                    f"return={ret if ret is None else round(ret, 1)} "
                    f"t={result['time_total_s']:.1f}s",
                    file=sys.stderr,
                    flush=True,
                )
            solved = ret is not None and ret >= target and steps <= budget
            if solved or steps >= budget:
                break
        wall = time.perf_counter() - started
        train_s = float(result["time_total_s"])
        return RunRow(
            plan=plan,
            env=env,
            target=target,
            seed=seed,
            solved=solved,
            env_steps=steps,
            wall_s=wall,
            train_s=train_s,
            env_steps_per_s=steps / train_s if train_s > 0 else 0.0,
            budget=budget,
            final_return=judged_return(result),
            best_return=best,
            env_steps_trained=int(result.get("num_env_steps_trained", 0)),
        )
    finally:
        algo.stop()


def markdown_table(rows: list[RunRow]) -> str:
    """The rows as a GitHub markdown table."""
    lines = [
        "| plan | env | seed | solved? | env steps to solve | wall s to solve | train s "
        "| env steps/s | budget | final return |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        steps = f"{r.env_steps:,}" if r.solved else f"> {r.env_steps:,}"
        wall = f"{r.wall_s:.1f}" if r.solved else f"({r.wall_s:.1f})"
        ret = "-" if r.final_return is None else f"{r.final_return:.1f}"
        lines.append(
            f"| {r.plan} | {r.env} | {r.seed} | {'yes' if r.solved else 'NO'} | {steps} | {wall} "
            f"| {r.train_s:.1f} | {r.env_steps_per_s:,.0f} | {r.budget:,} | {ret} |"
        )
    return "\n".join(lines)


def spread_table(rows: list[RunRow]) -> str:
    """Per plan: seeds solved within budget, and median [min - max] of env steps and wall s
    to solve over the solved seeds, as a GitHub markdown table."""
    lines = [
        "| plan | solved | env steps to solve: median [min - max] "
        "| wall s to solve: median [min - max] | budget |",
        "|---|---:|---:|---:|---:|",
    ]
    for plan in dict.fromkeys(r.plan for r in rows):
        runs = [r for r in rows if r.plan == plan]
        solved = [r for r in runs if r.solved]
        if solved:
            steps = [r.env_steps for r in solved]
            walls = [r.wall_s for r in solved]
            steps_s = f"{statistics.median(steps):,.0f} [{min(steps):,} - {max(steps):,}]"
            wall_s = f"{statistics.median(walls):.1f} [{min(walls):.1f} - {max(walls):.1f}]"
        else:
            steps_s = wall_s = "-"
        lines.append(
            f"| {plan} | {len(solved)}/{len(runs)} | {steps_s} | {wall_s} | {runs[0].budget:,} |"
        )
    return "\n".join(lines)


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_overrides(items: list[str], plans: list[str]) -> dict[str, dict[str, Any]]:
    """``plan.key=value`` (or ``key=value`` for every plan) -> per-plan config overrides.

    Raises:
        SystemExit: an item is not of that form.
    """
    out: dict[str, dict[str, Any]] = {p: {} for p in plans}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--set {item!r}: expected plan.key=value or key=value")
        plan, dot, name = key.partition(".")
        targets = [plan] if dot else plans
        name = name if dot else key
        for p in targets:
            if p not in out:
                raise SystemExit(f"--set {item!r}: plan {p!r} is not among --plans {plans}")
            out[p][name] = _parse_value(value)
    return out


def parse_budgets(items: list[str]) -> dict[str, int]:
    budgets = dict(BUDGETS)
    for item in items:
        plan, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--budget {item!r}: expected plan=env_steps")
        budgets[plan] = int(value)
    return budgets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--plans",
        nargs="+",
        default=[p for p in BUDGETS if p not in NOT_BY_DEFAULT],
        metavar="PLAN",
    )
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", nargs="+", type=int, metavar="SEED", help="explicit seeds")
    seeds.add_argument(
        "--num-seeds",
        type=int,
        default=DEFAULT_NUM_SEEDS,
        metavar="N",
        help=f"seeds 0 .. N-1 (default {DEFAULT_NUM_SEEDS})",
    )
    parser.add_argument(
        "--budget",
        action="append",
        default=[],
        metavar="PLAN=STEPS",
        help="env-step budget of a plan (default: the issue's budgets)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[PLAN.]KEY=VALUE",
        help="plan config override (JSON value), e.g. ppo.lr=0.001",
    )
    parser.add_argument(
        "--target",
        type=float,
        help="episode_return_mean to reach (default: the plan's task, CartPole-v1: 475)",
    )
    parser.add_argument("--env", help="env id (default: the plan's task, e.g. Pendulum-v1)")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="one line per iteration")
    args = parser.parse_args(argv)
    if args.seeds is None:
        if args.num_seeds < 1:
            raise SystemExit(f"--num-seeds {args.num_seeds}: expected at least 1")
        args.seeds = list(range(args.num_seeds))

    unknown = [
        p for p in args.plans if not (PLANS_DIR / f"{VARIANTS.get(p, (p, {}))[0]}.json").exists()
    ]
    if unknown:
        raise SystemExit(f"no plan file plans/<name>.json for {unknown}")
    budgets = parse_budgets(args.budget)
    overrides = parse_overrides(args.set, args.plans)

    from plangraph.runtime.ray_session import ensure_ray

    t0 = time.perf_counter()
    ensure_ray()
    ray_start_s = time.perf_counter() - t0

    rows: list[RunRow] = []
    for plan in args.plans:
        for seed in args.seeds:
            env, target = TASKS.get(plan, DEFAULT_TASK)
            row = train_one(
                plan,
                seed,
                budget=budgets.get(plan, 500_000),
                target=target if args.target is None else args.target,
                env=env if args.env is None else args.env,
                num_workers=args.num_workers,
                config=overrides[plan],
                verbose=args.verbose,
            )
            rows.append(row)
            print(
                f"{plan} seed={seed}: {'solved' if row.solved else 'NOT solved'} at "
                f"{row.env_steps:,} env steps ({row.env_steps_trained:,} trained), "
                f"{row.wall_s:.1f} s",
                file=sys.stderr,
                flush=True,
            )

    tasks = ", ".join(sorted({f"{r.env} >= {r.target:g}" for r in rows}))
    print(
        f"\n{args.num_workers} rollout workers; target episode_return_mean (last 100 "
        f"training episodes): {tasks}. Ray start-up (excluded): {ray_start_s:.1f} s.\n"
    )
    for plan, cfg in overrides.items():
        if cfg:
            print(f"overrides {plan}: {json.dumps(cfg, sort_keys=True)}")
    print(markdown_table(rows))
    print()
    print(spread_table(rows))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0 if all(r.solved for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
