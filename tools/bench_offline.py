#!/usr/bin/env python3
"""Offline data benchmarks: reading a dataset larger than Ray's object store, and the cost
of recording on sampling.

``read``: writes a synthetic dataset of ``--rows`` rows (``--obs-dim`` float32 observations
per row, so ``rows * (4 * obs_dim + 33)`` bytes of rows; random, so zstd does not shrink
them) with ``ExperienceWriter``, starts Ray with an object store of ``--object-store-mb``
MiB, and reads one epoch with ``OfflineDataset`` (shuffled through a ``--shuffle-buffer``
row buffer) with 1 reader (the driver) and with 2 reader actors. Prints rows/s and, at a
quarter, half, three quarters and all of the epoch, the driver's peak RSS growth since the
read began and the reader actors' peak RSS so far (MiB): bounded memory shows as figures
that stop growing while the rows read keep growing. The dataset must be at least 4x the
object store for the figure issue 32 asks for (the script says whether it is). The
dataset is deleted at the end unless ``--dir`` names where to keep it.

``record``: one local ``RolloutWorker`` (CartPole-v1, PPO, ``--envs`` sub-envs x
``--fragment`` steps) samples ``--fragments`` fragments, then as many again each recorded
by an ``ExperienceWriter`` (as ``WriteExperiences`` does); prints env steps/s of both and
the overhead of recording (best of ``--repeats``).

Usage::

    .venv/bin/python tools/bench_offline.py read --rows 80000 --obs-dim 4096 \\
        --object-store-mb 256 --shuffle-buffer 2000 --batch-size 256
    .venv/bin/python tools/bench_offline.py record --fragments 100
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from plangraph.rl.offline import ExperienceWriter, OfflineDataset, inspect_dataset


def _rss_bytes() -> int:
    """This process's current resident memory (bytes; Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def write_dataset(path: Path, rows: int, obs_dim: int, chunk: int = 4096) -> int:
    """Synthetic CartPole-like rows with ``obs_dim`` float32 observations; bytes of rows."""
    writer = ExperienceWriter(str(path), metadata={"env": "synthetic"}, prefix="bench")
    rng = np.random.default_rng(0)
    done = 0
    while done < rows:
        n = min(chunk, rows - done)
        ids = np.arange(done, done + n, dtype=np.int64)
        writer.write(
            {
                "obs": rng.random((n, obs_dim), dtype=np.float32),
                "actions": (ids % 2).astype(np.int64),
                "rewards": np.ones(n, dtype=np.float32),
                "terminateds": ids % 500 == 499,
                "truncateds": np.zeros(n, dtype=bool),
                "eps_id": ids // 500,
                "t": ids % 500,
                "action_logp": np.full(n, -0.69, dtype=np.float32),
            }
        )
        done += n
    writer.close()
    return rows * (4 * obs_dim + 8 + 4 + 1 + 1 + 8 + 8 + 4 - 1)


QUARTERS = (0.25, 0.5, 0.75, 1.0)


def read_epoch(path: Path, readers: int, batch_size: int, buffer: int) -> dict[str, Any]:
    """One epoch of ``path`` with ``readers`` readers: rows/s, and the driver's peak RSS
    growth and the readers' largest peak RSS (MiB) when each of ``QUARTERS`` of the epoch
    was read."""
    info = inspect_dataset(str(path))
    dataset = OfflineDataset(info, shuffle_buffer_size=buffer, num_readers=readers, seed=0)
    base = _rss_bytes()
    peak = [base]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], _rss_bytes())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    rows = 0
    marks = [int(q * info.num_rows) for q in QUARTERS]
    driver_at: list[float] = []
    readers_at: list[float] = []
    start = time.perf_counter()
    try:
        for columns in dataset.batches(batch_size):
            if columns is None:
                break
            rows += len(columns["rewards"])
            while len(driver_at) < len(marks) and rows >= marks[len(driver_at)]:
                peak[0] = max(peak[0], _rss_bytes())
                driver_at.append((peak[0] - base) / 2**20)
                got = dataset.reader_peak_rss_bytes() if readers > 1 else []
                readers_at.append(max(got, default=0) / 2**20)
        elapsed = time.perf_counter() - start
        reader_peaks = dataset.reader_peak_rss_bytes() if readers > 1 else []
    finally:
        stop.set()
        watcher.join()
        dataset.stop()
    if rows != info.num_rows:
        raise RuntimeError(f"read {rows} rows of {info.num_rows}")
    return {
        "rows_per_s": rows / elapsed,
        "driver_peak_growth_mib": (peak[0] - base) / 2**20,
        "reader_peak_mib": max(reader_peaks, default=0) / 2**20,
        "seconds": elapsed,
        "driver_at": driver_at,
        "readers_at": readers_at,
    }


def bench_read(args: argparse.Namespace) -> None:
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench_offline_"))
    try:
        _bench_read(args, root / "data")
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


def _bench_read(args: argparse.Namespace, data: Path) -> None:
    import ray

    if not data.exists():
        start = time.perf_counter()
        nbytes = write_dataset(data, args.rows, args.obs_dim)
        print(f"wrote the dataset in {time.perf_counter() - start:,.0f} s")
    else:
        nbytes = args.rows * (4 * args.obs_dim + 33)
    on_disk = sum(p.stat().st_size for p in data.glob("*.parquet"))
    store = args.object_store_mb * 2**20
    ray.init(
        num_cpus=2, object_store_memory=store, include_dashboard=False, configure_logging=False
    )
    print(
        f"dataset: {args.rows:,} rows, {nbytes / 2**20:,.0f} MiB of rows "
        f"({on_disk / 2**20:,.0f} MiB of Parquet), object store {args.object_store_mb} MiB: "
        f"{nbytes / store:.1f}x the store ({'>=' if nbytes >= 4 * store else 'BELOW'} 4x)"
    )
    print(
        f"one epoch, batches of {args.batch_size}, shuffle buffer {args.shuffle_buffer:,} rows; "
        "memory when 1/4, 1/2, 3/4 and all of the epoch was read:"
    )
    print(
        f"{'readers':>8} {'rows/s':>8} {'s':>6}  {'driver peak RSS growth, MiB':<27}  "
        "reader actors' peak RSS, MiB"
    )
    for readers in args.readers:
        r = read_epoch(data, readers, args.batch_size, args.shuffle_buffer)
        driver = " / ".join(f"{v:,.0f}" for v in r["driver_at"])
        reader = " / ".join(f"{v:,.0f}" for v in r["readers_at"]) if readers > 1 else "(driver)"
        print(
            f"{readers:>8} {r['rows_per_s']:>8,.0f} {r['seconds']:>6,.0f}  {driver:<27}  {reader}"
        )
    ray.shutdown()


def bench_record(args: argparse.Namespace) -> None:
    from plangraph.algorithms.ppo import PPOConfig
    from plangraph.rl.offline import record_columns
    from plangraph.rl.rollout_worker import RolloutWorker

    worker = RolloutWorker("CartPole-v1", args.envs, args.fragment, PPOConfig(), seed=0)
    worker.sample()  # warm-up
    best_plain, best_recorded = 0.0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            start = time.perf_counter()
            steps = sum(worker.sample().env_steps() for _ in range(args.fragments))
            best_plain = max(best_plain, steps / (time.perf_counter() - start))
            writer = ExperienceWriter(f"{tmp}/r{rep}", metadata={"env": "CartPole-v1"})
            start = time.perf_counter()
            steps = 0
            for _ in range(args.fragments):
                batch = worker.sample()
                for columns in record_columns(batch):
                    writer.write(columns)
                steps += batch.env_steps()
            best_recorded = max(best_recorded, steps / (time.perf_counter() - start))
            writer.close()  # the last file, after the timing (the run's end)
    worker.stop()
    overhead = 100.0 * (best_plain / best_recorded - 1.0)
    print(f"sampling:           {best_plain:>10,.0f} env steps/s")
    print(f"sampling+recording: {best_recorded:>10,.0f} env steps/s")
    print(f"recording overhead: {overhead:.1f} % (issue 32 asks < 10 %)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("read", help="read a dataset larger than the object store")
    r.add_argument("--rows", type=int, default=120_000)
    r.add_argument("--obs-dim", type=int, default=1024)
    r.add_argument("--object-store-mb", type=int, default=100)
    r.add_argument("--batch-size", type=int, default=512)
    r.add_argument("--shuffle-buffer", type=int, default=10_000)
    r.add_argument("--readers", type=int, nargs="+", default=[1, 2])
    r.add_argument(
        "--dir",
        help="write (or reuse) and keep the dataset here (default: a temporary folder, "
        "deleted at the end)",
    )
    w = sub.add_parser("record", help="the cost of recording on sampling")
    w.add_argument("--envs", type=int, default=8)
    w.add_argument("--fragment", type=int, default=64)
    w.add_argument("--fragments", type=int, default=100)
    w.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    (bench_read if args.what == "read" else bench_record)(args)


if __name__ == "__main__":
    main()
