"""``plangraph tune``: a 2x2 grid (two learning rates x two seeds) through Ray Tune."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray.tune", reason="plangraph tune needs the [tune] extra (ray[tune])")

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--set", "num_workers=1", "--set", "num_envs_per_worker=2",
        "--set", "rollout_fragment_length=16", "--set", "train_batch_size=32"]  # fmt: skip


def plangraph(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_tune_runs_a_2x2_grid_with_run_directories_and_checkpoints(tmp_path: Path) -> None:
    # One trial at a time (2 CPUs here), one iteration each: Tune's machinery, not learning.
    done = plangraph(
        "tune", str(ROOT / "plans" / "a2c.json"), "--grid", "lr=0.001,0.0003",
        "--seeds", "0", "1", "--max-iterations", "1", *TINY, "--max-concurrent-trials", "1",
        "--out", str(tmp_path), "--name", "sweep",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 TERMINATED" in done.stdout + done.stderr  # Tune's own trial table
    assert f"4 trials in {tmp_path / 'sweep'} (0 failed)" in done.stdout
    sweep = tmp_path / "sweep"
    assert list(sweep.glob("experiment_state-*.json"))  # Tune's experiment, restorable
    trials = sorted(p for p in sweep.iterdir() if p.is_dir())
    configs = set()
    for trial in trials:
        run = json.loads((trial / "run.json").read_text())
        configs.add((run["overrides"]["lr"], run["seed"]))
        assert run["overrides"]["train_batch_size"] == 32
        (line,) = (trial / "result.jsonl").read_text().splitlines()
        assert json.loads(line)["iteration"] == 1
        assert (trial / "progress.csv").exists() and (trial / "plan.source.json").exists()
        assert list(trial.glob("events.out.tfevents.*"))
        # The checkpoint Tune keeps is an Algorithm.save directory.
        (ckpt,) = trial.glob("checkpoint_*")
        assert (ckpt / "algorithm.json").exists()
    assert configs == {(0.001, 0), (0.001, 1), (0.0003, 0), (0.0003, 1)}

    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep.png"
    # One iteration of 32 env steps ends no episode yet: plot a learner stat.
    plotted = plangraph(
        "plot", *map(str, trials), "--metric", "learner/total_loss", "-o", str(out), cwd=tmp_path
    )
    assert plotted.returncode == 0, plotted.stderr
    # Seeds of one learning rate are one curve.
    assert plotted.stdout.strip() == f"wrote {out} (2 curves from 4 runs)"


def test_tune_refuses_a_typo_before_ray_starts(tmp_path: Path) -> None:
    done = plangraph(
        "tune", str(ROOT / "plans" / "a2c.json"), "--grid", "lrr=0.001,0.0003",
        "--max-iterations", "1", "--out", str(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert "lrr" in done.stderr and "did you mean" in done.stderr
    assert "not tuned: fix the errors above first" in done.stderr
    assert not list(tmp_path.iterdir())


def test_tune_usage_errors(tmp_path: Path) -> None:
    plan = str(ROOT / "plans" / "a2c.json")
    bad = plangraph("tune", plan, "--grid", "lr", "--max-iterations", "1", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--grid 'lr': expected KEY=V1,V2,..." in bad.stderr
    none = plangraph("tune", plan, "--max-iterations", "1", cwd=tmp_path)
    assert none.returncode == 2 and "nothing to sweep" in none.stderr


def test_trainable_is_a_tune_function_trainable(monkeypatch: pytest.MonkeyPatch) -> None:
    from plangraph.tune import grid_space, trainable

    monkeypatch.delenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", raising=False)
    fn = trainable(ROOT / "plans" / "a2c.json", max_iterations=1)
    assert callable(fn) and fn.__name__ == "train_plan"
    # A Tuner of the user's own gets no second writer of the trial's progress.csv.
    assert os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] == "1"
    space = grid_space({"lr": [0.1, 0.2]}, seeds=[0, 1])
    assert space["lr"] == {"grid_search": [0.1, 0.2]}
    assert space["seed"] == {"grid_search": [0, 1]}


def test_tune_sweeps_an_own_env_from_an_imported_module(tmp_path: Path) -> None:
    # The env is registered only by the module: each trial's process imports it again.
    module = ROOT / "tests" / "fixtures" / "own_env" / "corridor.py"
    done = plangraph(
        "tune", str(ROOT / "plans" / "ppo.json"), "--import", str(module),
        "--env", "PlangraphTest/Corridor-v0", "--grid", "lr=0.001,0.0003",
        "--max-iterations", "2", *TINY, "--set", "sgd_minibatch_size=16",
        "--max-concurrent-trials", "1", "--out", str(tmp_path), "--name", "own",
        cwd=tmp_path,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "2 TERMINATED" in out
    # Tune's trial table leads with the episode return (the headline keys come first).
    assert "episode_return_mean" in out.split("Trial status: 2 TERMINATED")[-1]
    for trial in (p for p in (tmp_path / "own").iterdir() if p.is_dir()):
        run = json.loads((trial / "run.json").read_text())
        assert run["env"] == "PlangraphTest/Corridor-v0" and run["imports"] == [str(module)]
        lines = (trial / "result.jsonl").read_text().splitlines()
        assert [json.loads(x)["num_env_steps_sampled"] for x in lines] == [32, 64]


def test_trial_results_lead_with_the_headline_keys() -> None:
    from plangraph.tune import HEADLINE_KEYS, headline_first

    result = {"iteration": 3, "env_steps_per_s": 9.0, "learner": {"kl": 0.1},
              "num_env_steps_sampled": 96, "episode_return_mean": 1.5}  # fmt: skip
    ordered = headline_first(result)
    assert list(ordered)[:3] == list(HEADLINE_KEYS)
    assert ordered == result
    # Before the first episode ends the key is absent, never invented.
    assert "episode_return_mean" not in headline_first({"num_env_steps_sampled": 32})
