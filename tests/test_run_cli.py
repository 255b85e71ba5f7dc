"""``plangraph run`` end to end in subprocesses: logs, checkpoints, resume in a new process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "plans" / "a2c.json"
SMALL = ["--set", "num_envs_per_worker=2", "--set", "rollout_fragment_length=16",
         "--set", "train_batch_size=64"]  # fmt: skip


def plangraph(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]


def test_run_writes_logs_checkpoints_and_resumes_in_a_new_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = plangraph(
        "run", str(PLAN), *SMALL, "--stop", "num_env_steps_sampled=320", "--seed", "5",
        "--out", str(run_dir), "--checkpoint-every", "2", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert "stop criterion met: num_env_steps_sampled = 320 >= 320" in first.stdout
    lines = results(run_dir)
    assert [r["iteration"] for r in lines] == [1, 2, 3, 4, 5]
    assert lines[-1]["num_env_steps_sampled"] == 320
    assert (run_dir / "plan.json").exists() and (run_dir / "plan.dot").exists()
    assert list(run_dir.glob("events.out.tfevents.*"))
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert ckpts == ["iter_000002", "iter_000004", "iter_000005"]

    second = plangraph(
        "run", "--resume", str(run_dir), "--stop", "num_env_steps_sampled=448", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "resumed from" in second.stderr
    lines = results(run_dir)
    # Counters, iteration and episode totals continue from the checkpoint, not from zero.
    assert [r["iteration"] for r in lines] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["num_env_steps_sampled"] for r in lines[-2:]] == [384, 448]
    assert lines[5]["episodes_total"] >= lines[4]["episodes_total"]
    assert lines[5]["time_total_s"] > lines[4]["time_total_s"]


def test_run_refuses_a_broken_plan_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    plan = json.loads(PLAN.read_text())
    plan["nodes"]["concat"]["params"]["min_batch_size"] = -5
    bad.write_text(json.dumps(plan))
    proc = plangraph("run", str(bad), "--stop", "iteration=1", cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "/nodes/concat/params/min_batch_size" in proc.stderr
    assert "not run" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stop", "episode_return_mean"], "expected KEY=VALUE"),
        (["--stop", "episode_return_mean=high"], "must be a number"),
        (["--stop", "episode_reward_mean=100"], "did you mean episode_return_mean"),
        ([], "give a stop criterion"),
        (["--env", "CartPol-v1", "--stop", "iteration=1"], "Did you mean: `CartPole`?"),
        (["--num-workers", "-1", "--stop", "iteration=1"], "num_workers: Input should be"),
    ],
)
def test_run_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    proc = plangraph("run", str(PLAN), *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_run_refuses_a_replay_buffer_that_cannot_fit_in_one_line(tmp_path: Path) -> None:
    proc = plangraph(
        "run", str(ROOT / "plans" / "dqn.json"), "--set", "buffer_size=10000000000",
        "--stop", "iteration=1", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    # the run header ("plangraph run <plan> -> <dir>"), then the error in one line
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("plangraph run "), proc.stderr
    assert lines[1].startswith("plangraph run: error: replay buffer 'replay' of capacity")
    assert "needs about 726.4 GiB" in lines[1] and "--set buffer_size=N" in lines[1]


def test_resume_needs_a_run_directory(tmp_path: Path) -> None:
    proc = plangraph("run", "--resume", str(tmp_path), "--stop", "iteration=1", cwd=tmp_path)
    assert proc.returncode == 2
    assert "is it a run directory?" in proc.stderr


def test_ctrl_c_stops_cleanly_with_a_checkpoint(tmp_path: Path) -> None:
    import signal
    import time

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "plangraph", "run", str(PLAN), *SMALL,
         "--stop", "num_env_steps_sampled=1000000000", "--out", str(run_dir), "--no-progress",
         "--checkpoint-every", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        log = run_dir / "result.jsonl"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and (
            not log.exists() or len(log.read_text().splitlines()) < 3
        ):
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted (Ctrl-C)" in out
    assert "stopping after this iteration" in err
    assert "Traceback" not in err
    before = results(run_dir)
    last = before[-1]
    assert (run_dir / "checkpoints" / f"iter_{last['iteration']:06d}" / "algorithm.json").exists()
    # The interrupted iteration was finished, so the checkpoint and the log agree and a
    # resumed run continues exactly where the log ends.
    meta = json.loads(
        (run_dir / "checkpoints" / f"iter_{last['iteration']:06d}" / "algorithm.json").read_text()
    )
    assert meta["num_env_steps_sampled"] == last["num_env_steps_sampled"]
    target = last["num_env_steps_sampled"] + 64
    resumed = plangraph(
        "run", "--resume", str(run_dir), "--stop", f"num_env_steps_sampled={target}",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    first_new = results(run_dir)[len(before)]
    assert first_new["iteration"] == last["iteration"] + 1
    assert first_new["num_env_steps_sampled"] == target
    assert first_new["num_env_steps_trained"] == target  # a2c trains everything it samples
    assert first_new["episodes_total"] == last["episodes_total"] + first_new["episodes_this_iter"]
    # Resuming a run that already meets its criterion trains nothing.
    again = plangraph(
        "run", "--resume", str(run_dir), "--stop", f"num_env_steps_sampled={target}",
        cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0
    assert "already meets the stop criterion" in again.stdout
    assert len(results(run_dir)) == len(before) + 1
