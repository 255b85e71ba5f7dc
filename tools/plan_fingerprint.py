"""Fingerprint the seed plans: exact counters, returns and learner weights after K iterations.

A refactor that claims "behaviour stays as it is" must leave these identical. For each
``plans/<name>.json`` (deterministic ones only: bulk-sync rollouts, seeded round-robin
Concurrently) the plan is built with ``seed=0`` and trained ``--iterations`` iterations;
the fingerprint is every counter of the last result, the episode statistics, the learner
stats and a SHA-256 of the learner policy's weights.

The asynchronous plans (``impala``, ``appo``, ``a3c``, ``apex``) are not reproducible bit
for bit: how many batches a worker samples while the learner trains depends on timing.
Their ``*_sync`` variants keep the plan's config and policy (V-trace, APPO's clipped
surrogate and target network, A3C's annealed A2C, Ape-X's per-worker epsilons with
prioritized n-step replay) and drive them bulk-sync (``ParallelRollouts -> ConcatBatches
-> TrainOneStep``, DQN's replay loop for Ape-X), so a change to their arithmetic shows here.
Not in the default set (pass ``--plans``): ``ppo_pendulum``, ``two_trainer``,
``sac_pendulum`` and the ``*_sync`` variants.

Usage::

    .venv/bin/python tools/plan_fingerprint.py --out /tmp/before.json
    .venv/bin/python tools/plan_fingerprint.py --out /tmp/after.json --compare /tmp/before.json

Prints one table row per plan; with ``--compare`` exits 1 when any fingerprint differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PLANS = ("ppo", "a2c", "a2c_microbatch", "dqn")
ITERATIONS = {
    "ppo": 6,
    "a2c": 20,
    "a2c_microbatch": 10,
    "dqn": 12,
    "ppo_pendulum": 4,
    "two_trainer": 6,
    "sac_pendulum": 3,
    "impala_sync": 10,
    "appo_sync": 10,
    "a3c_sync": 10,
    "apex_sync": 12,
}
STABLE_KEYS = (
    "iteration",
    "num_env_steps_sampled",
    "num_env_steps_trained",
    "num_target_updates",
    "episodes_total",
    "episode_return_mean",
    "episode_len_mean",
    "counters",
    "learner",
)


def _weights_digest(weights: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(weights):
        h.update(name.encode())
        h.update(np.ascontiguousarray(weights[name]).tobytes())
    return h.hexdigest()[:16]


def _local_policies(algo: Any) -> dict[str, Any]:
    """Learner policies by WorkerSet id (through whichever state object the build keeps)."""
    state = getattr(algo, "resources", None) or getattr(algo, "ctx", None)
    return {rid: ws.local_policy for rid, ws in sorted(state.worker_sets.items())}


def _load(name: str) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads((ROOT / "plans" / f"{name}.json").read_text())
    return plan


def _bulk_sync_learner(name: str) -> dict[str, Any]:
    """An async learner-thread plan's config and policy, trained bulk-sync on the driver."""
    plan = _load(name)
    plan["name"] = f"{name}_sync"
    plan["config"].pop("learner_queue_size")
    plan["resources"].pop("learner")
    plan["nodes"] = {
        "rollouts": {"op": "ParallelRollouts", "inputs": [], "params": {"mode": "bulk_sync"}},
        "concat": {
            "op": "ConcatBatches",
            "inputs": ["rollouts"],
            "params": {"min_batch_size": "${train_batch_size}"},
        },
        "train": {
            "op": "TrainOneStep",
            "inputs": ["concat"],
            "params": {"num_sgd_iter": "${num_sgd_iter}"},
        },
        "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"], "params": {}},
    }
    if "target_update_freq" in plan["config"]:
        plan["nodes"]["target"] = {
            "op": "UpdateTarget",
            "inputs": ["train"],
            "params": {"freq": "${target_update_freq}", "unit": "trained"},
        }
        plan["nodes"]["metrics"]["inputs"] = ["target"]
    return plan


def _a3c_sync() -> dict[str, Any]:
    """A3C's config and annealed A2C policy, trained bulk-sync."""
    plan = _load("a3c")
    plan["name"] = "a3c_sync"
    plan["config"].pop("num_async")
    plan["nodes"] = {
        "rollouts": {"op": "ParallelRollouts", "inputs": [], "params": {"mode": "bulk_sync"}},
        "train": {"op": "TrainOneStep", "inputs": ["rollouts"], "params": {}},
        "metrics": {"op": "StandardMetricsReporting", "inputs": ["train"], "params": {}},
    }
    return plan


def _apex_sync() -> dict[str, Any]:
    """The DQN plan with Ape-X's policy (per-worker epsilons) and prioritized replay."""
    plan = _load("dqn")
    apex = _load("apex")
    plan["name"] = "apex_sync"
    plan["config"]["prioritized_replay"] = True
    plan["resources"]["workers"]["params"]["policy"] = apex["resources"]["workers"]["params"][
        "policy"
    ]
    for key in ("exploration_epsilon", "worker_epsilon_alpha"):
        plan["config"][key] = apex["config"][key]
    return plan


VARIANTS = {
    "impala_sync": lambda: _bulk_sync_learner("impala"),
    "appo_sync": lambda: _bulk_sync_learner("appo"),
    "a3c_sync": _a3c_sync,
    "apex_sync": _apex_sync,
}


def fingerprint(plan: str, iterations: int) -> dict[str, Any]:
    import plangraph

    source = VARIANTS[plan]() if plan in VARIANTS else ROOT / "plans" / f"{plan}.json"
    compiled = plangraph.compile(source)
    algo = plangraph.build(compiled, seed=0)
    try:
        result: dict[str, Any] = {}
        for _ in range(iterations):
            result = algo.train()
        out = {k: result.get(k) for k in STABLE_KEYS}
        out["weights"] = {
            rid: _weights_digest(p.get_weights()) for rid, p in _local_policies(algo).items()
        }
        return json.loads(json.dumps(out, sort_keys=True))
    finally:
        algo.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", nargs="*", default=list(PLANS))
    ap.add_argument("--out", type=Path, help="write the fingerprints as JSON")
    ap.add_argument("--compare", type=Path, help="fingerprints to compare against")
    args = ap.parse_args(argv)
    from plangraph.runtime.ray_session import ensure_ray

    ensure_ray()
    prints = {p: fingerprint(p, ITERATIONS[p]) for p in args.plans}
    if args.out:
        args.out.write_text(json.dumps(prints, indent=2, sort_keys=True) + "\n")
    before = json.loads(args.compare.read_text()) if args.compare else {}
    print("| plan | iterations | env steps sampled | trained | return mean | weights | same |")
    print("|---|---|---|---|---|---|---|")
    differ = False
    for plan, fp in prints.items():
        same = "-"
        if plan in before:
            same = "yes" if before[plan] == fp else "NO"
            differ |= same == "NO"
        ret = fp["episode_return_mean"]
        print(
            f"| {plan} | {fp['iteration']} | {fp['num_env_steps_sampled']} | "
            f"{fp['num_env_steps_trained']} | {ret if ret is None else round(ret, 3)} | "
            f"{','.join(fp['weights'].values())} | {same} |"
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
