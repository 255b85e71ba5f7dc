"""``plangraph run`` end to end in subprocesses: logs, checkpoints, resume in a new process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.waiting import run_has_results, wait_until

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
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").glob("iter_*"))
    assert ckpts == ["iter_000002", "iter_000004", "iter_000005"]  # 3 kept by default

    # Whoever shared the run directory points run.json at a Python file: --resume builds
    # from the JSON snapshot of the plan and never runs it.
    (tmp_path / "evil.py").write_text(EVIL)
    saved = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**saved, "plan": str(tmp_path / "evil.py")}))
    second = plangraph(
        "run", "--resume", str(run_dir), "--stop", "num_env_steps_sampled=448", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert not (tmp_path / "pwned").exists()
    assert "plan.source.json" in second.stderr
    assert "resumed from" in second.stderr
    lines = results(run_dir)
    # Counters, iteration and episode totals continue from the checkpoint, not from zero.
    assert [r["iteration"] for r in lines] == [1, 2, 3, 4, 5, 6, 7]
    assert [r["num_env_steps_sampled"] for r in lines[-2:]] == [384, 448]
    assert lines[5]["episodes_total"] >= lines[4]["episodes_total"]
    assert lines[5]["time_total_s"] > lines[4]["time_total_s"]

    # A new run cannot be written into this one: logs and checkpoints would mix.
    clash = plangraph(
        "run", str(PLAN), *SMALL, "--stop", "iteration=1", "--out", str(run_dir), cwd=tmp_path
    )  # fmt: skip
    assert clash.returncode == 2
    assert clash.stderr.strip().splitlines() == [
        f"plangraph run: error: --out {run_dir} already holds a run; continue it with "
        f"--resume {run_dir}, or pass a new --out"
    ]
    # --max-iterations counts the whole run: a run at 7 iterations trains no 8th.
    done = plangraph(
        "run", "--resume", str(run_dir), "--max-iterations", "7",
        "--stop", "num_env_steps_sampled=100000", "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "has already run 7 iterations" in done.stdout
    assert [r["iteration"] for r in results(run_dir)] == [1, 2, 3, 4, 5, 6, 7]


def test_a_crashed_run_resumes_with_its_settings_and_logs_each_iteration_once(
    tmp_path: Path,
) -> None:
    import csv
    import shutil

    run_dir = tmp_path / "run"
    first = plangraph(
        "run", str(PLAN), *SMALL, "--max-iterations", "3", "--out", str(run_dir),
        "--checkpoint-every", "2", "--no-tensorboard", "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    saved = json.loads((run_dir / "run.json").read_text())
    assert (saved["checkpoint_every"], saved["tensorboard"]) == (2, False)
    # A crash after iteration 3 was logged, before its checkpoint: the newest is iter 2.
    shutil.rmtree(run_dir / "checkpoints" / "iter_000003")
    second = plangraph(
        "run", "--resume", str(run_dir), "--max-iterations", "5", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert "dropped 1 logged iteration(s) after iteration 2" in second.stderr
    assert [r["iteration"] for r in results(run_dir)] == [1, 2, 3, 4, 5]
    with (run_dir / "progress.csv").open(newline="") as f:
        assert [row["iteration"] for row in csv.DictReader(f)] == ["1", "2", "3", "4", "5"]
    # run.json's settings held: a checkpoint every 2 iterations, no TensorBoard.
    ckpts = sorted(p.name for p in (run_dir / "checkpoints").glob("iter_*"))
    assert ckpts == ["iter_000002", "iter_000004", "iter_000005"]
    assert not list(run_dir.glob("events.out.tfevents.*"))


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
    # refused before the run starts: the error in one line, no run directory
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("plangraph run: error: replay buffer 'replay' of capacity")
    assert "needs about 726.4 GiB" in lines[0] and "--set buffer_size=N" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_resume_needs_a_run_directory(tmp_path: Path) -> None:
    proc = plangraph("run", "--resume", str(tmp_path), "--stop", "iteration=1", cwd=tmp_path)
    assert proc.returncode == 2
    assert "is it a run directory?" in proc.stderr


def test_ctrl_c_stops_cleanly_with_a_checkpoint(tmp_path: Path) -> None:
    import signal

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "plangraph", "run", str(PLAN), *SMALL,
         "--stop", "num_env_steps_sampled=1000000000", "--out", str(run_dir), "--no-progress",
         "--checkpoint-every", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        log = run_dir / "result.jsonl"
        wait_until(
            lambda: run_has_results(proc, log, 3),
            f"3 results in {log}",
            timeout_s=240,
            interval_s=0.2,
        )
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


EVIL = "import pathlib\npathlib.Path(__file__).with_name('pwned').touch()\n"


def crafted_run(tmp_path: Path, **run_json: object) -> Path:
    """A run directory made by hand (no Ray): run.json, the plan snapshot, a checkpoint."""
    from plangraph.runtime.checkpoint import write_state

    run_dir = tmp_path / "shared_run"
    ckpt = run_dir / "checkpoints" / "iter_000001"
    ckpt.mkdir(parents=True)
    args = {"plan": str(PLAN), "env": None, "num_workers": None, "seed": 0,
            "overrides": {}, "stop": {"iteration": 5.0}}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps({**args, **run_json}))
    (run_dir / "plan.source.json").write_text(PLAN.read_text())
    write_state(ckpt, {"iteration": 1, "weights": np.zeros((64, 64), np.float32)})
    meta = {"version": 2, "plan": "a2c", "iteration": 1, "num_env_steps_sampled": 64,
            "time_total_s": 1.0, "saved_at": 0.0}  # fmt: skip
    (ckpt / "algorithm.json").write_text(json.dumps(meta))
    (tmp_path / "evil.py").write_text(EVIL)
    return run_dir


def _truncate(run_dir: Path) -> None:
    npz = run_dir / "checkpoints" / "iter_000001" / "arrays.npz"
    npz.write_bytes(npz.read_bytes()[:200])


def _pickle_state(run_dir: Path) -> None:
    ckpt = run_dir / "checkpoints" / "iter_000001"
    for name in ("state.json", "arrays.npz"):
        (ckpt / name).unlink()
    evil = f"cos\nsystem\n(S'touch {run_dir.parent / 'pwned'}'\ntR."  # os.system on load
    (ckpt / "state.pkl").write_text(evil)


def _py_plan_without_snapshot(run_dir: Path) -> None:
    (run_dir / "plan.source.json").unlink()
    saved = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(
        json.dumps({**saved, "plan": str(run_dir.parent / "evil.py")})
    )


# (id, arguments ({run} is the crafted run directory, {tmp} the test's), how to damage the
# run directory, exit code, the message's telling part). Every row is refused before Ray
# starts or any run directory is written.
BAD_INPUTS = [
    ("corrupt run.json", ["--resume", "{run}"], lambda d: (d / "run.json").write_text('{"pl'),
     2, "run.json: not readable JSON"),
    ("list run.json", ["--resume", "{run}"], lambda d: (d / "run.json").write_text("[1, 2]"),
     2, "(top level): Input should be a valid dictionary"),
    ("overrides as a list", ["--resume", "{run}"], {"overrides": ["train_batch_size=64"]},
     2, "overrides: Input should be a valid dictionary"),
    ("string seed in run.json", ["--resume", "{run}"], {"seed": "7"},
     2, "seed: Input should be a valid integer"),
    ("run.json names a .py", ["--resume", "{run}"], _py_plan_without_snapshot,
     2, "no plan.source.json"),
    ("truncated checkpoint", ["--resume", "{run}"], _truncate, 2, "SHA-256 differs"),
    ("pickled checkpoint", ["--resume", "{run}"], _pickle_state,
     2, "not loaded because unpickling a file can run arbitrary code"),
    ("--out under a file", [str(PLAN), "--stop", "iteration=1", "--out", "/dev/null/x"], None,
     2, "/dev/null is not a directory"),
    ("--seed -1", [str(PLAN), "--stop", "iteration=1", "--seed", "-1"], None,
     2, "the seed must be an integer"),
    ("--seed a string", [str(PLAN), "--stop", "iteration=1", "--seed", "abc"], None,
     2, "invalid int value: 'abc'"),
    ("--stop NaN", [str(PLAN), "--stop", "iteration=NaN"], None, 2, "must be a finite number"),
    ("--stop Infinity", [str(PLAN), "--stop", "iteration=Infinity"], None,
     2, "must be a finite number"),
    ("--max-iterations -1", [str(PLAN), "--max-iterations", "-1"], None, 2, "must be >= 1"),
    ("--checkpoint-every -3", [str(PLAN), "--stop", "iteration=1", "--checkpoint-every", "-3"],
     None, 2, "must be >= 0"),
    ("--env ''", [str(PLAN), "--stop", "iteration=1", "--env", ""], None,
     2, "give a gymnasium env id"),
    ("--num-workers 5000", [str(PLAN), "--stop", "iteration=1", "--num-workers", "5000"],
     None, 2, "num_workers=5000 is more than this machine can run: at most"),
    ("--num-workers 100000", [str(PLAN), "--stop", "iteration=1", "--num-workers", "100000"],
     None, 2, "(num_workers: Input should be less than or equal to 10000)"),
    ("--address bogus:1", [str(PLAN), "--stop", "iteration=1", "--address", "bogus:1"], None,
     2, "--address 'bogus:1': unknown host 'bogus'"),
    ("--address nothing listening",
     [str(PLAN), "--stop", "iteration=1", "--address", "127.0.0.1:1"], None,
     2, "no Ray cluster reachable there"),
    ("--keep-checkpoints -1", [str(PLAN), "--stop", "iteration=1", "--keep-checkpoints", "-1"],
     None, 2, "must be >= 0 (0: keep all)"),
    ("--checkpoint-score typo",
     [str(PLAN), "--stop", "iteration=1", "--checkpoint-score", "episode_retrun_mean"], None,
     2, "did you mean episode_return_mean"),
    ("--checkpoint-score evaluation/... without evaluation",
     [str(PLAN), "--stop", "iteration=1", "--checkpoint-score", "evaluation/episode_len_mean"],
     None, 2, "the run does not evaluate; add --evaluation-interval K"),
    ("--stop evaluation/... without evaluation",
     [str(PLAN), "--stop", "evaluation/episode_return_mean=400"], None,
     2, "the run does not evaluate; add --evaluation-interval K"),
    ("--evaluation-episodes 0",
     [str(PLAN), "--stop", "iteration=1", "--evaluation-interval", "1",
      "--evaluation-episodes", "0"], None, 2, "--evaluation-episodes 0: must be >= 1"),
    ("--import a missing module",
     [str(PLAN), "--stop", "iteration=1", "--import", "no_such_module_q"], None,
     2, "no module named 'no_such_module_q' here"),
    ("--env not registered", [str(PLAN), "--stop", "iteration=1", "--env", "PlangraphX/No-v0"],
     None, 2, "is not a registered gymnasium env"),
]  # fmt: skip


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("args", "damage", "code", "message"),
    [pytest.param(*row[1:], id=row[0]) for row in BAD_INPUTS],
)
def test_bad_input_is_one_line_and_leaves_nothing(
    tmp_path: Path, args: list[str], damage: object, code: int, message: str
) -> None:
    import time

    run_dir = crafted_run(tmp_path, **(damage if isinstance(damage, dict) else {}))
    if callable(damage):
        damage(run_dir)
    before = _files(tmp_path)
    argv = [a.format(run=run_dir, tmp=tmp_path) for a in args]
    if "--out" not in argv and "--resume" not in argv:
        argv += ["--out", str(tmp_path / "new_run")]
    started = time.monotonic()
    proc = plangraph("run", *argv, cwd=tmp_path)
    elapsed = time.monotonic() - started
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    if not args[-1] == "abc":  # argparse prints its usage above its own error line
        assert proc.stderr.strip() == errors[0], proc.stderr
    # Refused before anything was written: no new run directory, the shared one untouched,
    # and no code from the run directory ran.
    assert _files(tmp_path) == before
    assert not (tmp_path / "new_run").exists() and not (tmp_path / "runs").exists()
    assert not (tmp_path / "pwned").exists()
    assert elapsed < 30, f"took {elapsed:.0f} s"  # generous: "within a few seconds"


def _descendants(root: int) -> list[tuple[int, str]]:
    """(pid, start time) of every process below ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            out.append(child)
    return [(pid, _start_time(pid)) for pid in out]


def _start_time(pid: int) -> str:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return ""
    return "" if fields[0] in ("Z", "X") else fields[19]  # a zombie has exited


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_repeated_ctrl_c_exits_without_traceback_or_leftover_ray_processes(
    tmp_path: Path,
) -> None:
    """Ctrl-C as a terminal sends it: to the whole process group, again and again."""
    import os
    import signal
    import time

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "plangraph", "run", str(PLAN), *SMALL,
         "--stop", "num_env_steps_sampled=1000000000", "--out", str(run_dir), "--no-progress",
         "--checkpoint-every", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        log = run_dir / "result.jsonl"
        wait_until(
            lambda: run_has_results(proc, log, 2),
            f"2 results in {log}",
            timeout_s=240,
            interval_s=0.2,
        )
        ray_processes = _descendants(proc.pid)
        assert ray_processes  # Ray's daemons and workers run below the driver
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)

        def exited_or_pressed_again() -> bool:
            if proc.poll() is not None:
                return True
            os.killpg(proc.pid, signal.SIGINT)  # the second press, and every one after it
            return False

        wait_until(
            exited_or_pressed_again, "the run to exit, Ctrl-C pressed again and again", 120, 0.3
        )
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "interrupted" in out
    left = ray_processes
    for _ in range(20):  # Ray's shutdown ran before exit; allow the kernel a moment
        left = [(pid, t) for pid, t in left if t and _start_time(pid) == t]
        if not left:
            break
        time.sleep(0.25)
    assert not left, f"Ray processes still running after exit: {left}"
    ckpts = sorted((run_dir / "checkpoints").iterdir())
    assert ckpts and (ckpts[-1] / "algorithm.json").exists()
    assert not list((run_dir / "checkpoints").glob("*.tmp"))


def test_run_refuses_an_env_override_the_policy_cannot_act_in(tmp_path: Path) -> None:
    proc = plangraph(
        "run", str(ROOT / "plans" / "dqn.json"), "--env", "Pendulum-v1",
        "--stop", "iteration=1", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "PG183" in lines[0] and "Box(-2.0, 2.0, (1,), float32)" in lines[0]
    assert not (tmp_path / "runs").exists()
