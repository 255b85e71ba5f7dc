"""Scaling benchmark: env steps/s of a bulk-sync (PPO) and three async (IMPALA, A3C,
Ape-X) plans
versus the number of rollout workers, on an env whose step costs fixed wall time.

The env is ``tools/bench_envs.py``'s ``SleepyCartPole-v1`` (CartPole-v1 whose ``step``
sleeps ``--step-ms``, a stand-in for an expensive simulator), so the rate is bound by the
env, not by this machine's cores. For each plan and worker count the plan is built, warmed
up for one iteration, then trained for ``--seconds`` of wall time. Printed per row:

* ``env steps/s``: env steps sampled per second of training (after the warm-up);
* ``efficiency``: that rate over ``n x`` the one-worker rate of the same plan (1.0 =
  perfect scaling);
* ``learner busy``: the learner thread's busy fraction (IMPALA, Ape-X; ``-`` for PPO,
  whose learner runs on the driver between sampling rounds, and A3C, whose workers compute
  the gradients and whose driver applies each as it arrives).

``--cluster``: the same benchmark across 1, 2 and 3 Ray nodes started on this machine
(``ray.cluster_utils.Cluster``: a head node offering no CPUs plus N worker nodes, each with
its own raylet and object store), ``--workers-per-node`` rollout workers per node, each
reserving one (logical) CPU, placed ``SPREAD`` through a placement group and joined with
``--address`` as on a real cluster (the env module is shipped as a runtime_env);
``efficiency`` is then the rate over ``N x`` the one-node rate.

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python tools/bench_scaling.py
    PYTHONPATH=. .venv/bin/python tools/bench_scaling.py --workers 1 2 4 --seconds 10
    PYTHONPATH=. .venv/bin/python tools/bench_scaling.py --cluster --nodes 1 2 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Rollout workers must import tools.bench_envs to make the env: they inherit PYTHONPATH.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
)

import tools.bench_envs  # noqa: E402  (registers SleepyCartPole-v1 here too)

ENV = f"tools.bench_envs:{tools.bench_envs.ENV_ID}"


def measure(
    plan: str,
    workers: int,
    seconds: float,
    step_ms: float,
    address: str | None = None,
    placement: dict[str, Any] | None = None,
) -> dict[str, Any]:
    import plangraph

    # Iterations of about a second at 8 workers, so a run of `seconds` has several.
    config = {"min_env_steps_per_iter": 1000} if plan in ("impala", "a3c", "apex") else {}
    config.update(placement or {})
    compiled = plangraph.compile(ROOT / "plans" / f"{plan}.json", config=config)
    algo = plangraph.build(compiled, env=ENV, num_workers=workers, seed=0, address=address)
    try:
        first = algo.train()  # warm-up: actors started, first weights synced
        if address:
            _LOCATIONS[:] = [
                loc for ws in algo.ctx.worker_sets.values() for loc in ws.worker_locations()
            ]
        start_steps, started = first["num_env_steps_sampled"], time.perf_counter()
        result = first
        while time.perf_counter() - started < seconds:
            result = algo.train()
        elapsed = time.perf_counter() - started
        rate = (result["num_env_steps_sampled"] - start_steps) / elapsed
        busy = result["learner"].get("learner_busy_fraction")
        return {"plan": plan, "workers": workers, "rate": rate, "busy": busy}
    finally:
        algo.stop()


def cluster_rows(args: argparse.Namespace) -> int:
    """``--cluster``: one local Ray cluster per node count (see the module docstring)."""
    from ray.cluster_utils import Cluster

    from plangraph.runtime.ray_session import shutdown_ray

    per = args.workers_per_node
    placement = {
        "workers.worker_resources.num_cpus": 1,
        "workers.placement_strategy": "SPREAD",
    }
    print(
        f"env: SleepyCartPole-v1 ({args.step_ms:g} ms per step), {args.seconds:g} s per row, "
        f"{per} rollout workers per node (1 CPU each, SPREAD), head node with no CPUs"
    )
    print("| plan | nodes | workers | env steps/s | efficiency | workers per node |")
    print("|---|---|---|---|---|---|")
    for plan in args.plans:
        one = None
        for n in args.nodes:
            cluster = Cluster(
                initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False}
            )
            try:
                for _ in range(n):
                    cluster.add_node(num_cpus=per)
                cluster.wait_for_nodes()
                row = measure(plan, n * per, args.seconds, args.step_ms, cluster.address, placement)
                spread = _workers_per_node()
            finally:
                shutdown_ray()
                cluster.shutdown()
            one = row["rate"] if n == 1 else one
            eff = f"{row['rate'] / (n * one):.2f}" if one else "-"
            print(
                f"| {plan} | {n} | {n * per} | {row['rate']:,.0f} | {eff} | {spread} |", flush=True
            )
    return 0


_LOCATIONS: list[Any] = []


def _workers_per_node() -> str:
    """``"2, 2, 2"``: rollout workers per node, as the last build placed them."""
    counts: dict[str, int] = {}
    for loc in _LOCATIONS:
        if loc is not None:
            counts[loc["node_id"]] = counts.get(loc["node_id"], 0) + 1
    return ", ".join(str(c) for c in sorted(counts.values(), reverse=True)) or "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", nargs="*", help="default: ppo impala a3c apex (--cluster: ppo)")
    ap.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--seconds", type=float, default=15.0, help="timed training per row")
    ap.add_argument("--step-ms", type=float, default=2.0, help="wall time of one env step")
    ap.add_argument("--cluster", action="store_true", help="scale over local Ray nodes")
    ap.add_argument("--nodes", nargs="*", type=int, default=[1, 2, 3], help="--cluster sizes")
    ap.add_argument("--workers-per-node", type=int, default=2, help="--cluster: per node")
    args = ap.parse_args(argv)
    # Read by tools.bench_envs in every rollout worker (they inherit the environment).
    os.environ["PLANGRAPH_BENCH_STEP_S"] = str(args.step_ms / 1000.0)
    if args.cluster:
        args.plans = args.plans or ["ppo"]
        return cluster_rows(args)
    args.plans = args.plans or ["ppo", "impala", "a3c", "apex"]
    from plangraph.runtime.ray_session import ensure_ray

    ensure_ray()
    print(f"env: SleepyCartPole-v1 ({args.step_ms:g} ms per step), {args.seconds:g} s per row")
    print("| plan | workers | env steps/s | efficiency | learner busy |")
    print("|---|---|---|---|---|")
    for plan in args.plans:
        one = None
        for n in args.workers:
            row = measure(plan, n, args.seconds, args.step_ms)
            one = row["rate"] if n == 1 else one
            eff = f"{row['rate'] / (n * one):.2f}" if one else "-"
            busy = f"{row['busy']:.2f}" if row["busy"] is not None else "-"
            print(f"| {plan} | {n} | {row['rate']:,.0f} | {eff} | {busy} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
