"""Fingerprint the seed plans: exact counters, returns and learner weights after K iterations.

A refactor that claims "behaviour stays as it is" must leave these identical. For each
``plans/<name>.json`` (deterministic ones only: bulk-sync rollouts, seeded round-robin
Concurrently) the plan is built with ``seed=0`` and trained ``--iterations`` iterations;
the fingerprint is every counter of the last result, the episode statistics, the learner
stats and a SHA-256 of the learner policy's weights.

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
ITERATIONS = {"ppo": 6, "a2c": 20, "a2c_microbatch": 10, "dqn": 12}
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


def fingerprint(plan: str, iterations: int) -> dict[str, Any]:
    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / f"{plan}.json")
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
