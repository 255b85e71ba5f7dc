"""Throughput of the runtime's gathers next to hand-written Ray loops doing the same work.

Two actors return a fresh ``float32 [200, 4]`` array per ``sample()`` call. Each row pulls
``--items`` arrays into the driver; the runtime rows go through ``ParallelIterator``
(``gather_sync`` / ``gather_async``), the baseline rows are the plain ``ray.get([...])`` and
``ray.wait`` loops a user would write. ``ratio`` = runtime items/s over baseline items/s
(1.0 = no overhead). Best of ``--repeats`` runs, after a warm-up, to damp noise on a shared
machine. Not a test: it asserts nothing.

    .venv/bin/python tools/bench_runtime.py [--items 4000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import ray

from plangraph.flow.iterators import ParallelIterator


@ray.remote(num_cpus=0)
class ArrayActor:
    """A stand-in rollout worker: ``sample()`` -> ``float32 [200, 4]``."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        return self._rng.standard_normal((200, 4), dtype=np.float32)


def hand_sync(actors: list[Any]) -> Iterator[np.ndarray]:
    while True:
        yield from ray.get([a.sample.remote() for a in actors])


def hand_async(actors: list[Any], num_async: int) -> Iterator[np.ndarray]:
    pending = {a.sample.remote(): a for a in actors for _ in range(num_async)}
    while True:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            actor = pending.pop(ref)
            value = ray.get(ref)
            pending[actor.sample.remote()] = actor
            yield value


def one_run(make: Callable[[], Iterator[Any]], items: int) -> float:
    """Items/s pulling ``items`` from a fresh stream, after a short warm-up."""
    stream = make()
    for _ in range(min(200, items)):  # warm-up: first requests, caches
        next(stream)
    start = time.perf_counter()
    for _ in range(items):
        next(stream)
    return items / (time.perf_counter() - start)


def best_pair(
    runtime: Callable[[], Iterator[Any]],
    baseline: Callable[[], Iterator[Any]],
    items: int,
    repeats: int,
) -> tuple[float, float]:
    """Best items/s of each, runs interleaved so drifting machine load hits both alike."""
    ours, theirs = 0.0, 0.0
    for _ in range(repeats):
        ours = max(ours, one_run(runtime, items))
        theirs = max(theirs, one_run(baseline, items))
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000, help="arrays pulled per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs per row (best is kept)")
    args = parser.parse_args()

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    actors = [ArrayActor.remote(seed) for seed in range(2)]
    ray.get([a.sample.remote() for a in actors])
    par = ParallelIterator.from_actors(actors, method="sample")

    rows = [
        (
            "gather_sync",
            lambda: iter(par.gather_sync()),
            lambda: hand_sync(actors),
            "ray.get([a.sample.remote() for a])",
        ),
        (
            "gather_async(num_async=1)",
            lambda: iter(par.gather_async(num_async=1)),
            lambda: hand_async(actors, 1),
            "ray.wait loop, 1 in flight/actor",
        ),
        (
            "gather_async(num_async=2)",
            lambda: iter(par.gather_async(num_async=2)),
            lambda: hand_async(actors, 2),
            "ray.wait loop, 2 in flight/actor",
        ),
        (
            "gather_sync + remote for_each",
            lambda: iter(par.for_each(lambda x: x, name="identity").gather_sync()),
            lambda: hand_sync(actors),
            "ray.get([a.sample.remote() for a])",
        ),
    ]
    header = (
        f"{'runtime':<31} {'items/s':>9}   {'hand-written baseline':<36} {'items/s':>9} "
        f"{'ratio':>6}"
    )
    print(f"2 actors, float32 [200, 4] per item, {args.items} items, best of {args.repeats}")
    print(header)
    print("-" * len(header))
    for label, runtime, baseline, base_label in rows:
        ours, theirs = best_pair(runtime, baseline, args.items, args.repeats)
        print(f"{label:<31} {ours:>9.0f}   {base_label:<36} {theirs:>9.0f} {ours / theirs:>6.2f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
