"""What a run directory shows: ``progress.csv`` and the TensorBoard tags of a real run."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

import plangraph
from plangraph.runtime.metric_tags import metric_tags
from plangraph.runtime.progress_csv import ProgressCsv
from plangraph.runtime.run_log import RunLog
from plangraph.runtime.run_loop import train_until
from plangraph.runtime.stopping import StopCriteria

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 64}


def rows(run_dir: Path) -> tuple[list[str], list[dict[str, str]]]:
    with (run_dir / "progress.csv").open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def test_progress_csv_widens_its_header_when_a_key_appears(tmp_path: Path) -> None:
    log = ProgressCsv(tmp_path)
    log.write({"iteration": 1, "timers": {"train": 0.5}, "x": float("nan")})
    log.write({"iteration": 2, "timers": {"train": 0.25}, "evaluation": {"ret": 9.0}})
    log.close()
    header, table = rows(tmp_path)
    # First row's keys sorted, then the later key appended: earlier columns never move.
    assert header == ["iteration", "timers/train", "x", "evaluation/ret"]
    assert table == [
        {"iteration": "1", "timers/train": "0.5", "x": "", "evaluation/ret": ""},
        {"iteration": "2", "timers/train": "0.25", "x": "", "evaluation/ret": "9.0"},
    ]
    # Re-opened (--resume): the rows and columns are kept, new rows appended.
    again = ProgressCsv(tmp_path)
    again.write({"iteration": 3, "evaluation": {"ret": 10.0}})
    again.close()
    header, table = rows(tmp_path)
    assert header == ["iteration", "timers/train", "x", "evaluation/ret"]
    assert [r["iteration"] for r in table] == ["1", "2", "3"]
    assert table[2] == {"iteration": "3", "timers/train": "", "x": "", "evaluation/ret": "10.0"}


def test_metric_tags_are_grouped_and_never_duplicated() -> None:
    tags = metric_tags(
        {
            "iteration": 2,
            "timestamp": 1.7e9,
            "num_env_steps_sampled": 128,
            "counters": {"num_env_steps_sampled": 128, "num_updates/train": 2},
            "episode_return_mean": 20.0,
            "learner": {"vf_loss": 3.0},
            "evaluation": {"episode_return_mean": 30.0},
            "timers": {"rollouts": 0.01},
            "episodes_total": 4,
            "done": True,
            "my_metric": 1.5,
        }
    )
    assert tags == {
        "counters/num_env_steps_sampled": 128.0,
        "counters/num_updates/train": 2.0,
        "eval/episode_return_mean": 30.0,
        "learner/vf_loss": 3.0,
        "misc/my_metric": 1.5,
        "rollout/episode_return_mean": 20.0,
        "rollout/episodes_total": 4.0,
        "time/iteration": 2.0,
        "time/node/rollouts": 0.01,
    }


def test_a_real_run_writes_progress_csv_and_grouped_tensorboard_tags(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    algo = plangraph.build(plangraph.compile(ROOT / "plans" / "a2c.json", config=SMALL), seed=1)
    try:
        summary = train_until(
            algo, StopCriteria.parse([]), tmp_path, max_iterations=3, show_progress=False
        )
    finally:
        algo.stop()
    assert summary.result["iteration"] == 3
    jsonl = [json.loads(line) for line in (tmp_path / "result.jsonl").read_text().splitlines()]
    header, table = rows(tmp_path)
    assert len(table) == len(jsonl) == 3
    assert {"iteration", "num_env_steps_sampled", "learner/total_loss", "timers/train"} <= set(
        header
    )
    assert [int(r["num_env_steps_sampled"]) for r in table] == [64, 128, 192]
    assert float(table[-1]["learner/total_loss"]) == pytest.approx(
        jsonl[-1]["learner"]["total_loss"]
    )

    (event_file,) = tmp_path.glob("events.out.tfevents.*")
    acc = EventAccumulator(str(event_file))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert tags == set(metric_tags(jsonl[-1])) | set(metric_tags(jsonl[0]))
    assert {p.split("/")[0] for p in tags} <= {"rollout", "learner", "time", "counters", "eval"}
    assert {
        "rollout/episode_return_mean",
        "learner/total_loss",
        "time/env_steps_per_s",
        "time/node/rollouts",
        "counters/num_env_steps_sampled",
    } <= tags
    assert "num_env_steps_sampled" not in tags and "timestamp" not in tags
    steps = [e.step for e in acc.Scalars("counters/num_env_steps_sampled")]
    assert steps == [64, 128, 192]  # the x axis is env steps sampled


def test_run_log_without_tensorboard_still_writes_csv(tmp_path: Path) -> None:
    with RunLog(tmp_path, tensorboard=False) as log:
        log.write({"iteration": 1})
    assert rows(tmp_path) == (["iteration"], [{"iteration": "1"}])
    assert not list(tmp_path.glob("events.out.tfevents.*"))


def test_tensorboard_events_hold_every_tags_scalar_per_iteration(tmp_path: Path) -> None:
    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from plangraph.runtime.run_log import TensorBoardEvents

    events = TensorBoardEvents(tmp_path)
    events.log({"rollout/episode_return_mean": 21.5, "learner/kl": 0.1}, step=64)
    events.log({"rollout/episode_return_mean": np.float32(40.25)}, step=128)  # numpy too
    (event_file,) = tmp_path.glob("events.out.tfevents.*")
    # Flushed as written: a live TensorBoard sees both iterations before close().
    acc = EventAccumulator(str(event_file))
    acc.Reload()
    returns = acc.Scalars("rollout/episode_return_mean")
    assert [(e.step, e.value) for e in returns] == [(64, 21.5), (128, 40.25)]
    assert [(e.step, e.value) for e in acc.Scalars("learner/kl")] == [
        (64, pytest.approx(0.1, rel=1e-7))  # float32, as TensorBoard stores scalars
    ]
    events.close()


def test_a_resumed_run_log_drops_the_rows_after_its_checkpoint(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def result(iteration: int, ret: float) -> dict[str, float]:
        return {"iteration": iteration, "num_env_steps_sampled": 64 * iteration, "x": ret}

    with RunLog(tmp_path) as log:  # a run that crashed after iteration 3, checkpoint at 2
        for i in (1, 2, 3):
            log.write(result(i, 10.0 * i))
    # Event files sort by their name's second, then a per-process counter compared as
    # text: a resumed run is a later process, so its file comes later; here, wait.
    time.sleep(1.1)
    with RunLog(tmp_path, resume_iteration=2) as log:
        assert log.dropped == 1
        log.write(result(3, 99.0))
    lines = (tmp_path / "result.jsonl").read_text().splitlines()
    assert [(r["iteration"], r["x"]) for r in map(json.loads, lines)] == [
        (1, 10.0),
        (2, 20.0),
        (3, 99.0),
    ]
    assert [(r["iteration"], r["x"]) for r in rows(tmp_path)[1]] == [
        ("1", "10.0"),
        ("2", "20.0"),
        ("3", "99.0"),
    ]
    # TensorBoard reads both event files; the restart marker drops the stale step 192.
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("misc/x")] == [
        (64, 10.0),
        (128, 20.0),
        (192, 99.0),
    ]
    # Nothing after the checkpoint: nothing dropped, no marker.
    with RunLog(tmp_path, resume_iteration=3) as log:
        assert log.dropped == 0
    # A resumed run without a checkpoint starts from scratch: every row goes.
    with RunLog(tmp_path, tensorboard=False, resume_iteration=0) as log:
        assert log.dropped == 3
    assert (tmp_path / "result.jsonl").read_text() == ""
    assert rows(tmp_path)[1] == []
