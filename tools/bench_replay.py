"""Replay buffer speed: env steps added per second, train batches sampled per second and
priority updates per second, and the bytes one stored env step takes, per plan.

Plans and their buffers (each the plan's own ``ReplayBuffer`` resource, built with
``plangraph.rl.make_replay_buffer``, filled with rows its own rollout worker sampled):

* ``dqn``: single transitions (``item: transition``), uniform; train batches of 128
  transitions;
* ``dqn_prioritized``: the same rows in a ``PrioritizedReplayBuffer`` (``dqn`` with
  ``prioritized_replay=true``; alpha 0.6, beta 0.4), which Ape-X's replay shards hold;
* ``r2d2``: R2D2's ``SequenceReplayBuffer`` (``item: sequence``): sequences of 40 env
  steps overlapping by 20, each with the LSTM state its worker had at its start; train
  batches of 16 sequences (up to 640 rows: a sequence ends with its episode).

The rollout worker runs in this process (no Ray, one torch thread): the buffer is filled
to ``--fill`` env steps first (not timed), then each operation is repeated for
``--seconds``: ``add`` re-adds the fragments sampled during the fill (the ring evicts the
oldest rows as it would in a run), ``sample`` draws one train batch, ``update`` gives the
learner's TD errors (random, one per row) back for a sampled batch. The table gives
operations/s and rows/s by wall clock, and operations per CPU second of this process (a
loaded machine disturbs that figure less), the median over ``--rounds``; bytes per env
step are ``ReplayBuffer.row_nbytes`` (the stored columns and the insertion id; a prioritized
buffer's sum and min trees add ``32 * P / capacity`` bytes, ``P`` the next power of two).

Usage (from the repository root)::

    PYTHONPATH=. .venv/bin/python tools/bench_replay.py
    PYTHONPATH=. .venv/bin/python tools/bench_replay.py --plans r2d2 --seconds 2 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLANS = ("dqn", "dqn_prioritized", "r2d2")
SOURCE = {"dqn": "dqn", "dqn_prioritized": "dqn", "r2d2": "r2d2"}
OVERRIDES: dict[str, dict[str, Any]] = {"dqn_prioritized": {"prioritized_replay": True}}


def _setup(plan: str, fill: int) -> tuple[Any, list[Any], int]:
    """The plan's replay buffer filled to ``fill`` env steps, the fragments that filled it,
    and the plan's replay batch size (transitions or sequences)."""
    import plangraph
    from plangraph.rl import make_replay_buffer
    from plangraph.rl.rollout_worker import RolloutWorker

    compiled = plangraph.compile(ROOT / "plans" / f"{SOURCE[plan]}.json", OVERRIDES.get(plan))
    ws = next(r.params for r in compiled.resources.values() if r.kind == "WorkerSet")
    replay = next(r.params for r in compiled.resources.values() if r.kind == "ReplayBuffer")
    batch_size = next(n.params.batch_size for n in compiled.nodes.values() if n.op == "LocalReplay")
    worker = RolloutWorker(
        ws.env, ws.num_envs_per_worker, ws.rollout_fragment_length, ws.policy, seed=0
    )
    buffer = make_replay_buffer(replay, seed=0)
    fragments = []
    while len(buffer) < fill:
        worker.set_global_vars({"timestep": worker.num_env_steps_sampled})
        fragment = worker.sample()
        fragments.append(fragment)
        buffer.add(fragment)
    return buffer, fragments, batch_size


def _timed(op: Callable[[int], int], seconds: float) -> tuple[float, float, float]:
    """``(operations/s, rows/s, operations per CPU s)`` of ``op(i) -> rows`` repeated for
    ``seconds`` of wall clock."""
    calls = rows = 0
    cpu, start = time.process_time(), time.perf_counter()
    while time.perf_counter() - start < seconds or calls < 3:
        rows += op(calls)
        calls += 1
    took, cpu_took = time.perf_counter() - start, time.process_time() - cpu
    return calls / took, rows / took, calls / max(cpu_took, 1e-9)


def measure(plan: str, fill: int, seconds: float) -> dict[str, Any]:
    """One round for ``plan``: per operation ``(ops/s, rows/s, ops per CPU s)``, plus
    ``bytes_per_step`` and the batch's rows."""
    from plangraph.rl.replay_buffer import PrioritizedReplayBuffer

    buffer, fragments, batch_size = _setup(plan, fill)
    rng = np.random.default_rng(0)
    sampled = buffer.sample(batch_size)
    out: dict[str, Any] = {
        "bytes_per_step": buffer.row_nbytes,
        "batch_rows": sampled.count,
        "batch_size": batch_size,
    }

    def add(i: int) -> int:
        fragment = fragments[i % len(fragments)]
        buffer.add(fragment)
        return int(fragment.count)

    def sample(i: int) -> int:
        return int(buffer.sample(batch_size).count)

    def update(i: int) -> int:
        batch = buffer.sample(batch_size)
        td = rng.standard_normal(batch.count).astype(np.float32)
        buffer.update_priorities(np.asarray(batch["batch_indexes"]), td)
        return int(batch.count)

    out["add"] = _timed(add, seconds)
    out["sample"] = _timed(sample, seconds)
    # A uniform buffer has no priorities: its update is a no-op, not a figure.
    out["update"] = _timed(update, seconds) if isinstance(buffer, PrioritizedReplayBuffer) else None
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plans", nargs="*", default=list(PLANS), choices=PLANS)
    ap.add_argument("--fill", type=int, default=50_000, help="env steps stored before timing")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per operation")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (the table shows medians)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    rounds: dict[str, list[dict[str, Any]]] = {p: [] for p in args.plans}
    for r in range(args.rounds):
        for plan in args.plans:
            rounds[plan].append(measure(plan, args.fill, args.seconds))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    def med(plan: str, op: str, k: int) -> float:
        return statistics.median(m[op][k] for m in rounds[plan])

    print(
        "| plan | buffer holds | bytes per env step | train batch (rows) | operation | "
        "ops/s | rows/s | ops per CPU s |"
    )
    print("|---|---:|---:|---|---|---:|---:|---:|")
    for plan in args.plans:
        first = rounds[plan][0]
        batch = f"{first['batch_size']} ({first['batch_rows']})"
        for op in ("add", "sample", "update"):
            if first[op] is None:
                continue
            print(
                f"| {plan} | {args.fill:,} | {first['bytes_per_step']:,.0f} | {batch} | {op} | "
                f"{med(plan, op, 0):,.0f} | {med(plan, op, 1):,.0f} | {med(plan, op, 2):,.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
