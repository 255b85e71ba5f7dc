#!/usr/bin/env python3
"""Offline data benchmarks: reading a dataset larger than Ray's object store, and the cost
of recording on sampling.

``read``: writes a synthetic dataset of ``--rows`` rows (``--obs-dim`` float32 observations
per row, so ``rows * (4 * obs_dim + 33)`` bytes of rows) with ``ExperienceWriter``, starts
Ray with an object store of ``--object-store-mb`` MiB, and reads one epoch with
``OfflineDataset`` (shuffled through a ``--shuffle-buffer`` row buffer) with 1 reader (the
driver) and with 2 reader actors. Prints rows/s, the driver's peak RSS growth while
reading and each reader actor's peak RSS (MiB). The dataset must be at least 4x the object
store for the figure issue 32 asks for (the script says whether it is).

``record``: one local ``RolloutWorker`` (CartPole-v1, PPO, ``--envs`` sub-envs x
``--fragment`` steps) samples ``--fragments`` fragments, then as many again each recorded
by an ``ExperienceWriter`` (as ``WriteExperiences`` does); prints env steps/s of both and
the overhead of recording (best of ``--repeats``).

Usage::

    .venv/bin/python tools/bench_offline.py read --rows 120000 --obs-dim 1024 \\
        --object-store-mb 100
    .venv/bin/python tools/bench_offline.py record --fragments 100
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import threading
import time
from pathlib import Path

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


def read_epoch(path: Path, readers: int, batch_size: int, buffer: int) -> dict[str, float]:
    """One epoch of ``path`` with ``readers`` readers: rows/s and peak memory (MiB)."""
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
    start = time.perf_counter()
    try:
        for columns in dataset.batches(batch_size):
            if columns is None:
                break
            rows += len(columns["rewards"])
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
    }


def bench_read(args: argparse.Namespace) -> None:
    import ray

    root = Path(args.dir or tempfile.mkdtemp(prefix="bench_offline_"))
    data = root / "data"
    if not data.exists():
        nbytes = write_dataset(data, args.rows, args.obs_dim)
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
    print(f"{'readers':>8} {'rows/s':>10} {'driver peak +MiB':>17} {'reader peak MiB':>16}")
    for readers in args.readers:
        r = read_epoch(data, readers, args.batch_size, args.shuffle_buffer)
        reader = f"{r['reader_peak_mib']:,.0f}" if readers > 1 else "(driver)"
        print(
            f"{readers:>8} {r['rows_per_s']:>10,.0f} {r['driver_peak_growth_mib']:>17,.0f} "
            f"{reader:>16}"
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
    r.add_argument("--dir", help="keep the dataset here (default: a temporary folder)")
    w = sub.add_parser("record", help="the cost of recording on sampling")
    w.add_argument("--envs", type=int, default=8)
    w.add_argument("--fragment", type=int, default=64)
    w.add_argument("--fragments", type=int, default=100)
    w.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    (bench_read if args.what == "read" else bench_record)(args)


if __name__ == "__main__":
    main()
