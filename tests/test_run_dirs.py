"""Run directories: ``--keep-checkpoints`` keeps the newest K plus the best by a metric,
and a run that fails before its first result leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import plangraph
from plangraph.runtime.retention import INDEX_FILE, Retention, best_checkpoint
from plangraph.runtime.run_loop import train_until
from plangraph.runtime.stopping import StopCriteria, lookup

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "plans" / "ppo.json"


def _checkpoints(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").glob("iter_*"))


def _fake(run_dir: Path, iteration: int) -> Path:
    path = run_dir / "checkpoints" / f"iter_{iteration:06d}"
    path.mkdir(parents=True)
    (path / "algorithm.json").write_text("{}")
    return path


def test_retention_keeps_the_newest_and_the_best(tmp_path: Path) -> None:
    rule = Retention(keep=2, metric="episode_return_mean")
    for it, score in [(1, 5.0), (2, 50.0), (3, 7.0), (4, None), (5, 9.0)]:
        rule.record(_fake(tmp_path, it), score)
        rule.prune(tmp_path)
    assert _checkpoints(tmp_path) == ["iter_000002", "iter_000004", "iter_000005"]
    assert best_checkpoint(tmp_path) == tmp_path / "checkpoints" / "iter_000002"
    index = json.loads((tmp_path / "checkpoints" / INDEX_FILE).read_text())
    assert index == {
        "best": "iter_000002",
        "metric": "episode_return_mean",
        "scores": {"iter_000002": 50.0, "iter_000004": None, "iter_000005": 9.0},
    }
    # A resumed run goes on from the index; another metric starts its scores afresh.
    again = Retention.load(tmp_path, keep=2, metric="episode_return_mean")
    assert again.scores == index["scores"] and again.best == "iter_000002"
    assert Retention.load(tmp_path, keep=2, metric="episode_len_mean").scores == {}
    # keep=0 keeps every checkpoint.
    everything = Retention(keep=0, metric="episode_return_mean")
    everything.record(_fake(tmp_path, 6), 1.0)
    assert everything.prune(tmp_path) == [] and len(_checkpoints(tmp_path)) == 4


def test_a_hand_edited_index_cannot_name_paths_outside_the_run(tmp_path: Path) -> None:
    outside = tmp_path / "precious"
    outside.mkdir()
    run_dir = tmp_path / "run"
    _fake(run_dir, 1)
    (run_dir / "checkpoints" / INDEX_FILE).write_text(
        json.dumps({"metric": "m", "scores": {"../../precious": 1.0}, "best": "../../precious"})
    )
    rule = Retention.load(run_dir, keep=1, metric="m")
    assert rule.scores == {}
    rule.record(_fake(run_dir, 2), 0.0)
    rule.prune(run_dir)
    assert outside.is_dir() and _checkpoints(run_dir) == ["iter_000002"]
    assert best_checkpoint(run_dir) == run_dir / "checkpoints" / "iter_000002"


@pytest.mark.usefixtures("ray_session")
def test_a_run_keeps_k_checkpoints_plus_the_best_by_its_score(tmp_path: Path) -> None:
    config = {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 64}
    compiled = plangraph.compile(PPO, config=config)
    metric = "episode_return_mean"
    with plangraph.build(compiled, seed=0) as algo:
        summary = train_until(
            algo,
            StopCriteria.parse({}),
            tmp_path,
            checkpoint_every=1,
            show_progress=False,
            tensorboard=False,
            max_iterations=8,
            retention=Retention(keep=2, metric=metric),
        )
    lines = [json.loads(x) for x in (tmp_path / "result.jsonl").read_text().splitlines()]
    scores, last = {}, None
    for r in lines:  # a checkpoint's score: the metric's last value up to its iteration
        value = lookup(r, metric)
        last = value if value is not None else last
        if last is not None:
            scores[f"iter_{r['iteration']:06d}"] = last
    best = max((v, k) for k, v in scores.items())[1]
    assert _checkpoints(tmp_path) == sorted({"iter_000007", "iter_000008", best})
    assert summary.best == tmp_path / "checkpoints" / best
    # load_policy(best=True) picks it.
    assert plangraph.load_policy(tmp_path, best=True).checkpoint == tmp_path / "checkpoints" / best


def test_a_run_that_fails_before_its_first_result_leaves_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "plangraph", "run", str(PPO), "--max-iterations", "2",
            "--env", "tests.crash_envs:PlangraphTest/RaiseOnStep-v0", "--num-workers", "1",
            "--out", str(run_dir), "--no-progress",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "RuntimeError" in proc.stderr or "OperatorError" in proc.stderr, proc.stderr
    assert "no iteration finished; removed what the run wrote" in proc.stderr
    assert not run_dir.exists()
