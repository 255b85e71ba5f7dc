"""Greedy evaluation during training, ``compute_actions``, ``load_policy`` without Ray, and
``plangraph eval`` on a finished run (return statistics and a video file)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import plangraph
from plangraph.rl.evaluation import evaluation_seeds, run_episodes
from plangraph.rl.policies import make_policy
from plangraph.rl.seeding import derive_seeds

ROOT = Path(__file__).resolve().parent.parent
PPO = ROOT / "plans" / "ppo.json"
SMALL = {"num_envs_per_worker": 2, "rollout_fragment_length": 16, "train_batch_size": 64}
SMALL_CLI = [f"--set={k}={v}" for k, v in SMALL.items()]


def plangraph_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


# -- evaluation episodes ------------------------------------------------------------------


def _corridor_envs(n: int) -> list[gym.Env]:
    sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "own_env"))
    try:
        from corridor import CorridorEnv
    finally:
        sys.path.pop(0)
    return [gym.wrappers.TimeLimit(CorridorEnv(length=8), 12) for _ in range(n)]


def test_each_seed_fixes_its_episode_however_many_envs_play() -> None:
    envs = _corridor_envs(4)
    policy = make_policy(envs[0].observation_space, envs[0].action_space, {"algo": "ppo"}, 3)
    seeds = evaluation_seeds(7, 9)
    one = run_episodes(policy, envs[:1], seeds)
    four = run_episodes(policy, envs, seeds)
    assert len(one.returns) == len(one.lengths) == 9  # exactly one episode per seed
    np.testing.assert_array_equal(one.returns, four.returns)
    np.testing.assert_array_equal(one.lengths, four.lengths)
    assert (one.lengths <= 12).all()  # the time limit truncates
    stats = one.stats()
    assert stats["episode_return_min"] <= stats["episode_return_mean"]
    assert stats["episode_return_mean"] <= stats["episode_return_max"]


def test_evaluation_seeds_are_their_own_stream() -> None:
    assert evaluation_seeds(0, 3, 1) == evaluation_seeds(0, 3, 1)
    assert evaluation_seeds(0, 3, 1) != evaluation_seeds(0, 3, 2)
    assert evaluation_seeds(0, 3, 1) != evaluation_seeds(1, 3, 1)
    training = {s for w in range(8) for s in derive_seeds(0, w, 8)[1]}
    assert not training & set(evaluation_seeds(0, 100, 0))


@pytest.mark.usefixtures("ray_session")
def test_training_results_carry_greedy_evaluation_every_interval() -> None:
    compiled = plangraph.compile(PPO, config=SMALL)
    with plangraph.build(compiled, seed=0, evaluation_interval=2, evaluation_episodes=3) as algo:
        results = [algo.train() for _ in range(4)]
        assert ["evaluation" in r for r in results] == [False, True, False, True]
        ev = results[1]["evaluation"]
        assert set(ev) == {
            "episode_return_mean",
            "episode_return_std",
            "episode_return_min",
            "episode_return_max",
            "episode_len_mean",
            "time_s",
        }
        assert all(type(v) is float for v in ev.values())
        # CartPole: +1 per step, so the return is the length.
        assert ev["episode_return_mean"] == pytest.approx(ev["episode_len_mean"])
        # Evaluation steps are not training steps.
        assert results[-1]["num_env_steps_sampled"] == 4 * 64
        # Greedy: the same weights and round play the same episodes.
        again = algo.evaluate(3, round_=4)
        assert again["episode_return_mean"] == results[3]["evaluation"]["episode_return_mean"]
        # compute_actions: float32 [B, 4] -> int64 [B], greedy = argmax of the logits.
        obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
        actions = algo.compute_actions(obs)
        assert actions.shape == (5,) and actions.dtype == np.int64
        _, extra = algo.policy.compute_actions(obs, explore=False)
        np.testing.assert_array_equal(actions, extra["action_dist_inputs"].argmax(axis=1))
        # evaluation/... is a stop key.
        stopped = algo.run({"evaluation/episode_return_mean": 1.0}, max_iterations=20)
        assert stopped["iteration"] == 6 and "evaluation" in stopped


def test_evaluation_settings_are_checked_before_ray_starts() -> None:
    compiled = plangraph.compile(PPO, config=SMALL)
    with pytest.raises(plangraph.BuildError, match="evaluation_episodes=0: must be an integer"):
        plangraph.build(compiled, evaluation_interval=1, evaluation_episodes=0)
    with pytest.raises(plangraph.BuildError, match="evaluation_interval=-1"):
        plangraph.build(compiled, evaluation_interval=-1)


# -- the trained agent ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short CartPole PPO run of ``plangraph run``, with evaluation every 2 iterations."""
    tmp = tmp_path_factory.mktemp("run")
    run_dir = tmp / "run"
    done = plangraph_cli(
        "run", str(PPO), *SMALL_CLI, "--max-iterations", "4", "--evaluation-interval", "2",
        "--evaluation-episodes", "3", "--checkpoint-every", "2", "--out", str(run_dir),
        "--no-progress", cwd=tmp,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "eval return" in done.stderr  # the plain progress line shows it
    assert "evaluation return mean (greedy)" in done.stdout  # and the summary table
    return run_dir


def test_a_run_logs_evaluation_in_result_jsonl_and_tensorboard(finished_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    lines = [json.loads(x) for x in (finished_run / "result.jsonl").read_text().splitlines()]
    assert ["evaluation" in r for r in lines] == [False, True, False, True]
    events = EventAccumulator(str(finished_run))
    events.Reload()
    tags = events.Tags()["scalars"]
    # TensorBoard's group for greedy evaluation is eval/ (docs/guide/loggers.md).
    assert "eval/episode_return_mean" in tags
    steps = [e.step for e in events.Scalars("eval/episode_return_mean")]
    assert steps == [128, 256]  # at env steps sampled, twice


def test_plangraph_eval_prints_the_greedy_return_and_writes_a_video(
    finished_run: Path, tmp_path: Path
) -> None:
    import imageio.v3 as iio

    video = tmp_path / "agent.mp4"
    out = plangraph_cli(
        "eval", str(finished_run), "--episodes", "2", "--video", str(video), "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["checkpoint"].endswith("checkpoints/iter_000004")
    assert report["iteration"] == 4 and report["env"] == "CartPole-v1"
    # The same greedy episodes in this process: the checkpoint's policy, the same seeds.
    agent = plangraph.load_policy(finished_run)
    assert agent.evaluate(2, seed=0)["episode_return_mean"] == report["episode_return_mean"]
    # One frame per reset and per step of each episode (CartPole: return == length).
    frames = iio.improps(video, plugin="pyav").shape
    assert frames[0] == report["video_frames"] == int(2 * report["episode_len_mean"]) + 2
    assert frames[1:] == (400, 600, 3)

    text = plangraph_cli("eval", str(finished_run), "--episodes", "3", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "3 greedy episodes, seed 0" in text.stdout
    assert "episode return: mean " in text.stdout
    assert "note:" not in text.stdout and "note" not in report  # not a meta-policy


def test_load_policy_acts_without_ray(finished_run: Path) -> None:
    script = (
        "import sys, numpy as np, plangraph\n"
        f"agent = plangraph.load_policy({str(finished_run / 'checkpoints' / 'iter_000002')!r})\n"
        "a = agent.compute_actions(np.zeros((5, 4), np.float32))\n"
        "assert a.shape == (5,) and a.dtype == np.int64, a\n"
        "assert agent.compute_action(np.zeros(4, np.float32)) in (0, 1)\n"
        "r = agent.evaluate(2, seed=1)\n"
        "assert 'ray' not in sys.modules, 'load_policy imported ray'\n"
        "print(agent.iteration, r['episode_return_mean'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    iteration, ret = done.stdout.split()
    assert iteration == "2" and float(ret) >= 8.0


def test_eval_usage_errors_are_one_line(finished_run: Path, tmp_path: Path) -> None:
    cases = [
        (["--episodes", "0"], "--episodes 0: must be >= 1"),
        (["--video", str(tmp_path / "a.avi")], "use a .mp4 or .gif file name"),
        (["--render", "rgb_array"], "add --video OUT.mp4"),
        (["--env", "CartPol-v1"], "not a registered gymnasium env"),
    ]
    for extra, message in cases:
        out = plangraph_cli("eval", str(finished_run), *extra, cwd=tmp_path)
        assert out.returncode == 2, (extra, out.stderr)
        assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    nothing = plangraph_cli("eval", str(tmp_path), cwd=tmp_path)
    assert nothing.returncode == 2 and "no checkpoints/iter_*" in nothing.stderr


def test_a_missing_video_extra_is_named_with_its_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from plangraph.runtime.video import VideoExtraMissing, check_video_extra

    monkeypatch.setitem(sys.modules, "av", None)  # as if PyAV were not installed
    with pytest.raises(VideoExtraMissing, match=r"pip install 'plangraph\[video\]'"):
        check_video_extra()


# -- runs that re-run ---------------------------------------------------------------------


def test_a_runs_saved_plan_validates_and_trains_the_same_plan(
    finished_run: Path, tmp_path: Path
) -> None:
    saved = finished_run / "plan.json"
    in_checkpoint = finished_run / "checkpoints" / "iter_000004" / "plan.json"
    assert in_checkpoint.read_text() == saved.read_text()
    ok = plangraph_cli("validate", str(saved), str(in_checkpoint), cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # Every value explicit: the overrides of the first run are in it, no config is left.
    data = json.loads(saved.read_text())
    assert data["config"] == {}
    assert data["nodes"]["concat"]["params"]["min_batch_size"] == 64
    assert data["resources"]["workers"]["params"]["num_envs_per_worker"] == 2
    again = tmp_path / "again"
    rerun = plangraph_cli(
        "run", str(saved), "--max-iterations", "1", "--out", str(again), "--no-progress",
        "--no-tensorboard", cwd=tmp_path,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert (again / "plan.json").read_text() == saved.read_text()
    first = json.loads((again / "result.jsonl").read_text().splitlines()[0])
    assert first["num_env_steps_sampled"] == 64  # the small batch of the first run
