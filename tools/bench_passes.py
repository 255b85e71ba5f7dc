#!/usr/bin/env python3
"""Benchmark the optimisation passes: env steps/s of plans with each pass on and off.

For each (plan, pass) where the pass changes the executed plan, the plan is built twice
with ``seed=0``, once with every pass and once with that pass off (``--no-pass``), warmed
up for one iteration and then timed over ``--iterations`` iterations; env steps/s is env
steps sampled over the wall time of those iterations (best of ``--repeats``, on and off
alternating). Rows:

* the seed plans where a pass applies: ``a2c_microbatch`` and ``dqn`` (map-fusion), ``dqn``
  (broadcast-coalescing). ``ppo`` and ``a2c`` have nothing for any pass to change (their
  executed plan is the declared one), so they have no rows;
* ``ppo`` with ``train_batch_size=1100`` and ``rollout_fragment_length: "auto"``
  (rollout-sizing: with the pass off, "auto" is 64 and a train batch takes two rounds);
* ``ppo`` with a deliberately costly pure, row-wise per-batch map after the rollouts
  (``RandomFeatures``: 8 tanh layers of 256 units on the observations): worker-side-maps
  runs it on the rollout workers, in parallel, on each 512-row fragment; the "driver
  ms/iter" note is the time the driver spent in the map (its timer), the "on each worker"
  one what each worker spent in it instead.

Usage::

    .venv/bin/python tools/bench_passes.py [--iterations 6] [--repeats 3]

Prints one Markdown table (plan, pass, env steps/s on and off, their ratio, the driver
process's CPU time per iteration on and off, what changed). The CPU time is the sturdier
figure on a shared machine: it does not count the time the driver waits for a core.
Timings depend on the machine and its load; the counters do not
(``tests/test_passes_run.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import plangraph  # noqa: E402
from plangraph.ops import register_op  # noqa: E402
from plangraph.ops.registry import OpParams  # noqa: E402
from plangraph.runtime.implementations import register_impl  # noqa: E402

PLANS = ROOT / "plans"


@register_op(
    category="combine", inputs=["SampleBatch"], output="SampleBatch", pure=True, rowwise=True
)
class RandomFeatures(OpParams):
    """Random tanh features of the observations, as column ``features`` (a costly pure,
    row-wise per-batch map, for this benchmark)."""

    width: int = Field(256, ge=1, description="Units per layer.")
    rounds: int = Field(8, ge=1, description="Layers.")


@register_impl("RandomFeatures")
def _random_features(params: Any) -> Any:
    width, rounds = params.width, params.rounds

    def features(batch: Any) -> Any:
        from plangraph.rl import SampleBatch

        obs = batch["obs"].reshape(batch.count, -1).astype(np.float32)
        rng = np.random.default_rng(0)  # the same fixed layers everywhere: pure
        x = obs
        for _ in range(rounds):
            w = rng.standard_normal((x.shape[1], width), dtype=np.float32) / np.sqrt(x.shape[1])
            x = np.tanh(x @ w)
        out = SampleBatch(dict(batch.items()))
        out["features"] = x.mean(axis=1)
        return out

    return features


def _plan(name: str) -> dict[str, Any]:
    return json.loads((PLANS / f"{name}.json").read_text())


def _ppo_with_features() -> dict[str, Any]:
    plan = _plan("ppo")
    plan["name"] = "ppo_features"
    plan["nodes"]["features"] = {"op": "RandomFeatures", "inputs": ["rollouts"], "params": {}}
    plan["nodes"]["concat"]["inputs"] = ["features"]
    return plan


def _worker_map_ms(algo: Any, node: str) -> float:
    """Seconds the rollout workers spent in ``node`` so far, summed over workers."""
    import ray

    ws = algo.ctx.worker_sets["workers"]
    times = ray.get(
        [w.__ray_call__.remote(lambda self: dict(self.transform_time_s)) for w in ws.remote_workers]
    )
    return sum(t.get(node, 0.0) for t in times)


def measure(plan: Any, config: dict[str, Any], off: tuple[str, ...], iterations: int) -> dict:
    compiled = plangraph.compile(plan, config=config, disable_passes=off)
    with plangraph.build(compiled, seed=0) as algo:
        algo.train()  # warm-up: actors started, first weights sent
        state = algo.run_state
        ws = algo.ctx.worker_sets["workers"]
        steps0 = state.counters["num_env_steps_sampled"]
        broadcasts0 = ws.num_weight_broadcasts
        driver0 = {k: t.total_time for k, t in state.timers.items()}
        workers0 = _worker_map_ms(algo, "features") if "features" in compiled.nodes else 0.0
        start, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(iterations):
            algo.train()
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        steps = state.counters["num_env_steps_sampled"] - steps0
        driver = {k: t.total_time - driver0.get(k, 0.0) for k, t in state.timers.items()}
        workers = (
            _worker_map_ms(algo, "features") - workers0 if "features" in compiled.nodes else 0.0
        )
        return {
            "steps_per_s": steps / wall,
            "driver_cpu_ms": 1e3 * cpu / iterations,
            "batch": state.counters["num_env_steps_trained"] / max(1, state.iteration),
            "broadcasts": (ws.num_weight_broadcasts - broadcasts0) / iterations,
            "stages": len({v for v in algo.ctx.stages.values()}),
            "driver_map_ms": 1e3 * driver.get("features", 0.0) / iterations,
            "worker_map_ms": 1e3 * workers / iterations / max(1, len(ws.remote_workers)),
        }


def _note(pass_name: str, on: dict[str, Any], off: dict[str, Any]) -> str:
    if pass_name == "map-fusion":
        return f"driver flow stages {on['stages']} vs {off['stages']}"
    if pass_name == "broadcast-coalescing":
        return f"weight broadcasts/iter {on['broadcasts']:.0f} vs {off['broadcasts']:.0f}"
    if pass_name == "rollout-sizing":
        return f"env steps per train batch {on['batch']:.0f} vs {off['batch']:.0f}"
    return (
        f"driver ms/iter in the map {on['driver_map_ms']:.1f} vs {off['driver_map_ms']:.1f} "
        f"(on: {on['worker_map_ms']:.1f} ms/iter on each worker)"
    )


CASES: list[tuple[str, Any, dict[str, Any], str]] = [
    ("a2c_microbatch", _plan("a2c_microbatch"), {}, "map-fusion"),
    ("dqn", _plan("dqn"), {}, "map-fusion"),
    ("dqn", _plan("dqn"), {}, "broadcast-coalescing"),
    (
        'ppo (train_batch_size 1100, fragment "auto")',
        _plan("ppo"),
        {"train_batch_size": 1100, "rollout_fragment_length": "auto"},
        "rollout-sizing",
    ),
    ("ppo + RandomFeatures after the rollouts", _ppo_with_features(), {}, "worker-side-maps"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=6, help="timed iterations per build")
    ap.add_argument("--repeats", type=int, default=3, help="builds per setting (best kept)")
    ap.add_argument("--cases", nargs="*", type=int, help="indexes into the case list")
    args = ap.parse_args(argv)
    from plangraph.runtime.ray_session import ensure_ray

    ensure_ray()
    chosen = [CASES[i] for i in args.cases] if args.cases else CASES
    print(
        "| plan | pass | on (env steps/s) | off (env steps/s) | ratio "
        "| driver CPU ms/iter, on / off | what changed (on vs off) |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, plan, config, pass_name in chosen:
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.repeats):
            for key, off in (("on", ()), ("off", (pass_name,))):
                got = measure(plan, config, off, args.iterations)
                if key not in best or got["steps_per_s"] > best[key]["steps_per_s"]:
                    cpu = min(got["driver_cpu_ms"], best.get(key, got)["driver_cpu_ms"])
                    best[key] = {**got, "driver_cpu_ms": cpu}
                else:
                    best[key]["driver_cpu_ms"] = min(
                        best[key]["driver_cpu_ms"], got["driver_cpu_ms"]
                    )
        on, off = best["on"], best["off"]
        print(
            f"| {label} | {pass_name} | {on['steps_per_s']:.0f} | {off['steps_per_s']:.0f} | "
            f"{on['steps_per_s'] / off['steps_per_s']:.2f} | "
            f"{on['driver_cpu_ms']:.0f} / {off['driver_cpu_ms']:.0f} | "
            f"{_note(pass_name, on, off)} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
