"""Own environments: registered in a plan file, an ``--import`` module or passed as a
creator, they reach every Ray rollout worker (whose gymnasium registry never saw them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import plangraph
from plangraph.commands.user_modules import import_user_modules
from plangraph.rl.envs import GymEnvCreator, resolve_env, ship_by_value

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "tests" / "fixtures" / "own_env"
PPO = ROOT / "plans" / "ppo.json"
# 2 workers x 2 sub-envs x 16 steps = 64 env steps per round = one train batch.
SMALL = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 16,
    "train_batch_size": 64,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
}


def plangraph_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_plan_file_that_registers_its_env_trains_on_two_ray_workers(tmp_path: Path) -> None:
    # The env class exists only in the plan file: the workers never run it.
    plan = OWN / "corridor_plan.py"
    ok = plangraph_cli("validate", str(plan), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    run_dir = tmp_path / "run"
    done = plangraph_cli(
        "run", str(plan), "--max-iterations", "3", "--out", str(run_dir), "--no-progress",
        "--no-tensorboard", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The resume hint names what --resume needs to register the env again.
    hint = f"continue with: plangraph run --resume {run_dir} --import {plan} --stop KEY=VALUE"
    assert hint in done.stdout
    lines = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [1, 2, 3]
    # 2 workers x 2 sub-envs x 32 steps = 128 env steps per iteration: both workers sampled.
    assert [r["num_env_steps_sampled"] for r in lines] == [128, 256, 384]
    assert lines[-1]["episodes_total"] > 0
    assert -2.0 <= lines[-1]["episode_return_mean"] <= 1.0  # the corridor's return range
    # The run directory never imports code: eval says what to pass, and then plays.
    refused = plangraph_cli("eval", str(run_dir), cwd=tmp_path)
    assert refused.returncode == 2
    assert f"pass --import {plan}" in refused.stderr
    played = plangraph_cli("eval", str(run_dir), "--import", str(plan), cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "env PlangraphTest/PlanCorridor-v0" in played.stdout


@pytest.mark.usefixtures("ray_session")
def test_an_imported_module_env_trains_on_two_workers_that_cannot_import_it() -> None:
    # Imported from a path as module "corridor": the workers' sys.path has no such module,
    # so only by-value code shipping gets the env to them.
    assert import_user_modules([str(OWN / "corridor.py")]) is None
    corridor = sys.modules["corridor"]
    compiled = plangraph.compile(PPO, config=SMALL)
    with plangraph.build(compiled, env=corridor.ENV_ID, seed=0) as algo:
        results = [algo.train() for _ in range(3)]
        assert [r["num_env_steps_sampled"] for r in results] == [64, 128, 192]
        assert results[-1]["episodes_total"] > 0
        ws = algo.ctx.worker_sets["workers"]
        assert len(ws.remote_workers) == 2
        # The workers sample the corridor's spaces, not CartPole's.
        assert ws.local_policy.observation_space == gym.spaces.Box(0, 1, (2,), np.float32)


class _Chain(gym.Env[np.ndarray, np.int64]):
    """Two states; action 1 in state 1 ends the episode with reward 1."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.state = 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self.state = 0
        return np.array([1, 0, 0], dtype=np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        if self.state == 1 and int(action) == 1:
            return np.array([0, 0, 1], dtype=np.float32), 1.0, True, False, {}
        self.state = int(action)
        obs = np.eye(3, dtype=np.float32)[self.state]
        return obs, 0.0, False, False, {}


def make_chain() -> gym.Env:
    return gym.wrappers.TimeLimit(_Chain(), max_episode_steps=10)


@pytest.mark.usefixtures("ray_session")
def test_build_accepts_an_env_creator_callable() -> None:
    compiled = plangraph.compile(PPO, config=SMALL)
    with plangraph.build(compiled, env=make_chain, seed=1) as algo:
        results = [algo.train() for _ in range(3)]
    assert results[-1]["num_env_steps_sampled"] == 192
    assert results[-1]["episodes_total"] > 0
    assert results[-1]["episode_len_mean"] <= 10


def test_a_bad_env_is_refused_before_any_actor_starts() -> None:
    compiled = plangraph.compile(PPO, config=SMALL)
    with pytest.raises(plangraph.BuildError, match=r"not a registered gymnasium env.*--import"):
        plangraph.build(compiled, env="PlangraphTest/NoSuchEnv-v0")
    with pytest.raises(plangraph.BuildError, match="pass a gymnasium env id or a callable"):
        plangraph.build(compiled, env=42)


def test_resolved_envs_carry_their_entry_point_and_only_local_code_ships_by_value() -> None:
    creator = resolve_env("CartPole-v1")
    assert isinstance(creator, GymEnvCreator) and creator.id == "CartPole-v1"
    assert callable(creator.spec.entry_point)
    env = creator()
    assert env.spec is not None and env.spec.max_episode_steps == 500
    env.close()
    assert ship_by_value(creator) is None  # gymnasium's own: installed on every node
    assert ship_by_value(make_chain) in ("test_own_envs", "tests.test_own_envs", "tests")


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("no_such_module_xyz", "no module named 'no_such_module_xyz' here"),
        ("not a module", "not a module name"),
        ("missing/file.py", "--import missing/file.py: no such file"),
    ],
)
def test_import_errors_are_one_line(module: str, message: str, tmp_path: Path) -> None:
    problem = import_user_modules([module])
    assert problem is not None and message in problem and "\n" not in problem


def test_an_import_that_raises_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken_envs_mod.py"
    bad.write_text("import gymnasium\n\nraise ValueError('no envs today')\n")
    problem = import_user_modules([str(bad)])
    assert problem == (f"--import {bad}: importing it raised ValueError: no envs today ({bad}:3)")
    assert "broken_envs_mod" not in sys.modules


USER_OP = '''
from pydantic import Field

from plangraph.ops import OpParams, register_op


@register_op(category="combine", apply="filter", inputs=["SampleBatch"], output="SampleBatch")
class MinRows(OpParams):
    """Keep batches of at least ``rows`` rows."""

    rows: int = Field(1, ge=1, description="Rows (env steps).")
'''


def test_a_json_plan_uses_an_operator_from_an_imported_module(tmp_path: Path) -> None:
    module = tmp_path / "my_ops.py"
    module.write_text(USER_OP)
    plan = json.loads(PPO.read_text())
    plan.pop("$schema")
    plan["nodes"]["keep"] = {"op": "MinRows", "inputs": ["concat"], "params": {"rows": 8}}
    plan["nodes"]["train"]["inputs"] = ["keep"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    without = plangraph_cli("validate", str(path), cwd=tmp_path)
    assert without.returncode == 1 and "PG110" in without.stdout
    with_it = plangraph_cli("validate", str(path), "--import", str(module), cwd=tmp_path)
    assert with_it.returncode == 0, with_it.stdout + with_it.stderr
    # A module name works from the directory that holds it, as with `python -m`.
    described = plangraph_cli("ops", "MinRows", "--import", "my_ops", cwd=tmp_path)
    assert described.returncode == 0, described.stderr
    assert described.stdout.startswith("MinRows  [combine]")


def test_a_run_directory_records_an_imported_file_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--resume`` (and its "continue with" line) may be used from another directory: a
    ``.py`` given relative to this one is recorded absolute; a module name as given."""
    from plangraph.commands.user_modules import recorded_import

    monkeypatch.chdir(tmp_path)
    assert recorded_import("./my_envs.py") == str(tmp_path / "my_envs.py")
    assert recorded_import("sub/my_envs.py") == str(tmp_path / "sub" / "my_envs.py")
    assert recorded_import(str(OWN / "corridor.py")) == str(OWN / "corridor.py")
    assert recorded_import("my_package.envs") == "my_package.envs"
