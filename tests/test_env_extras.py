"""The optional extras' envs: Atari frames through the atari_preprocessing wrapper, MuJoCo's
Box actions checked by the compiler, and the message when an extra is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray
import torch

import plangraph
from plangraph import cli
from plangraph.algorithms.impala import IMPALAConfig
from plangraph.ops.wrappers import WrapperSpec
from plangraph.rl.rollout_worker import RolloutWorker
from plangraph.rl.sample_batch import SampleBatch
from plangraph.rl.wrappers import WrappedEnvCreator

ROOT = Path(__file__).resolve().parent.parent


def _missing(*modules: str) -> str | None:
    gone = [m for m in modules if importlib.util.find_spec(m) is None]
    return ", ".join(gone) or None


needs_atari = pytest.mark.skipif(
    _missing("ale_py", "cv2") is not None,
    reason=f"the atari extra is not installed (missing {_missing('ale_py', 'cv2')}): "
    "pip install 'plangraph[atari]'",
)
needs_mujoco = pytest.mark.skipif(
    _missing("mujoco") is not None,
    reason="the mujoco extra is not installed: pip install 'plangraph[mujoco]'",
)

PONG_WRAPPERS = (WrapperSpec(name="atari_preprocessing"),)


@needs_atari
def test_atari_preprocessing_gives_uint8_84x84x4_frame_stacks_on_pong() -> None:
    env = WrappedEnvCreator("ALE/Pong-v5", PONG_WRAPPERS)()
    try:
        assert env.observation_space.shape == (84, 84, 4)
        assert env.observation_space.dtype == np.uint8
        assert env.unwrapped._frameskip == 1  # the wrapper skips frames, not the ALE
        obs, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(40):
            prev = obs
            obs, _, terminated, truncated, _ = env.step(int(rng.integers(6)))
            assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
            assert not (terminated or truncated)
            # a stack on the channel axis, newest last: each step shifts it by one frame
            np.testing.assert_array_equal(obs[..., :3], prev[..., 1:])
        assert len(np.unique(obs)) > 1  # a grey-scale picture, not a blank frame
    finally:
        env.close()


@needs_atari
def test_pong_frames_stay_uint8_in_the_rollout_fragment() -> None:
    worker = RolloutWorker(WrappedEnvCreator("ALE/Pong-v5", PONG_WRAPPERS), 1, 8, IMPALAConfig())
    batch = worker.sample()
    assert batch[SampleBatch.OBS].dtype == np.uint8
    assert batch[SampleBatch.OBS].shape == (8, 84, 84, 4)


@needs_atari
def test_the_pong_plan_reads_its_frames_with_the_nature_cnn() -> None:
    compiled = plangraph.analyze(ROOT / "plans" / "impala_pong.json")
    assert compiled.ok, compiled.diagnostics
    text = compiled.explain()
    assert "observation Box(shape=[84, 84, 4], uint8), action Discrete(6)" in text
    assert 'type="cnn"' in text and "conv_filters=[[32, 8, 4], [64, 4, 2], [64, 3, 1]]" in text


@needs_mujoco
def test_halfcheetah_box_actions_are_accepted_for_ppo_and_refused_for_dqn() -> None:
    ppo = plangraph.analyze(ROOT / "plans" / "ppo_halfcheetah.json")
    assert ppo.ok and not ppo.diagnostics, ppo.diagnostics
    assert "action Box(shape=[6], float32)" in ppo.explain()
    dqn = plangraph.analyze(ROOT / "plans" / "dqn.json", config={"env": "HalfCheetah-v5"})
    assert [d.code for d in dqn.diagnostics] == ["PG183"]
    (problem,) = dqn.diagnostics
    assert problem.pointer == "/resources/workers/params/policy/algo"
    assert (
        "the dqn policy acts in Discrete action spaces only, but env 'HalfCheetah-v5' has "
        "action space Box(-1.0, 1.0, (6,), float32)" in problem.message
    )
    for algo in ("a2c", "appo", "ddpg", "impala", "pg", "ppo", "sac", "td3"):  # and users'
        assert algo in problem.hint


@needs_mujoco
def test_plangraph_validate_refuses_dqn_on_halfcheetah(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli.main(["validate", str(ROOT / "plans" / "dqn.json"), "--set", "env=HalfCheetah-v5"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "error PG183 [unsupported-action-space]" in out
    assert "has action space Box(-1.0, 1.0, (6,), float32)" in out


# A child process in which a package is really missing: ``sys.modules[name] = None`` makes
# every ``import name`` fail with ModuleNotFoundError, as an uninstalled package does.
_BUILD = """
import sys
for name in sys.argv[3:]:
    sys.modules[name] = None
import gymnasium
gymnasium.register("PlangraphTest/NeedsModule-v0", entry_point="plangraph_no_such_module:Env")
import plangraph
from plangraph.errors import BuildError
plan, env = sys.argv[1], sys.argv[2]
try:
    plangraph.build(plangraph.compile(plan), **({"env": env} if env else {}))
except BuildError as exc:
    print(exc)
    print("ray started:", "ray" in sys.modules and __import__("ray").is_initialized())
else:
    print("built")
"""


def _build_without(tmp_path: Path, plan: str, env: str, *modules: str) -> str:
    environ = {**os.environ, "PLANGRAPH_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _BUILD, plan, env, *modules],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_a_mujoco_env_without_the_mujoco_extra_names_the_pip_install(tmp_path: Path) -> None:
    out = _build_without(tmp_path, "plans/ppo_halfcheetah.json", "", "mujoco")
    assert out == (
        "resource 'workers' (/resources/workers/params/env): env 'HalfCheetah-v5' needs the "
        "Python module 'mujoco', which is not installed: it comes with plangraph's 'mujoco' "
        "extra (gymnasium's MuJoCo envs (HalfCheetah-v5, ...)); run pip install "
        "'plangraph[mujoco]' (tools/bootstrap installs it)\nray started: False\n"
    )


def test_an_atari_env_without_the_atari_extra_names_the_pip_install(tmp_path: Path) -> None:
    out = _build_without(tmp_path, "plans/impala_pong.json", "", "ale_py")
    assert out == (
        "resource 'workers' (/resources/workers/params/env): env 'ALE/Pong-v5' needs the "
        "Python module 'ale_py', which is not installed: it comes with plangraph's 'atari' "
        "extra (the Atari envs (ALE/Pong-v5, ...)); run pip install 'plangraph[atari]' "
        "(tools/bootstrap installs it)\nray started: False\n"
    )


def test_an_env_whose_module_import_fails_is_refused_at_build(tmp_path: Path) -> None:
    out = _build_without(tmp_path, "plans/ppo.json", "PlangraphTest/NeedsModule-v0")
    assert out == (
        "resource 'workers' (/resources/workers/params/env): env "
        "'PlangraphTest/NeedsModule-v0' needs the Python module 'plangraph_no_such_module', "
        "which is not installed; install the package that provides it, here and wherever "
        "the rollout workers run\nray started: False\n"
    )


def test_the_pong_plan_runs_on_real_ray_without_ale(ray_session: None) -> None:
    """plans/impala_pong's dataflow (async rollouts, IMPALA learner thread, the default
    Nature CNN) on an ALE-free env of uint8 [84, 84, 4] frames: the frames reach the
    learner as uint8 and it trains."""
    from tests.image_envs import ATARI_FRAMES

    plan = json.loads((ROOT / "plans" / "impala_pong.json").read_text(encoding="utf-8"))
    params = plan["resources"]["workers"]["params"]
    params["wrappers"] = [w for w in params["wrappers"] if w["name"] != "atari_preprocessing"]
    plan["config"].update(
        env=f"tests.image_envs:{ATARI_FRAMES}", num_envs_per_worker=2,
        rollout_fragment_length=10, train_batch_size=40, min_env_steps_per_iter=80,
    )  # fmt: skip
    algo = plangraph.build(plangraph.compile(plan), seed=0)
    try:
        result = algo.train()
        workers = algo.ctx.worker_sets["workers"]
        fragment = ray.get(workers.remote_workers[0].sample.remote())
        convs = [m for m in workers.local_policy.model.modules() if isinstance(m, torch.nn.Conv2d)]
    finally:
        algo.stop()
    assert fragment[SampleBatch.OBS].dtype == np.uint8
    assert fragment[SampleBatch.OBS].shape == (20, 84, 84, 4)
    assert [(c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [
        (32, 8, 4),
        (64, 4, 2),
        (64, 3, 1),
    ]  # the Nature CNN, the default for [84, 84, 4] frames
    # the iteration ends on the learner's output: at least one train batch (how many more
    # the thread trains meanwhile depends on timing)
    assert result["num_env_steps_trained"] >= 40
    assert np.isfinite(result["learner"]["total_loss"])
