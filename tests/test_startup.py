"""Start-up and shutdown: the phase trace a run writes, and a shutdown that leaves nothing.

Each test runs a fresh interpreter: the session's shared Ray instance (conftest) must not
be shut down, and the trace's environment variable must be set before Ray starts so that
the rollout workers inherit it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from tests.fresh_python import run_python

ROOT = Path(__file__).resolve().parent.parent


def test_a_cli_run_traces_every_phase_in_order(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PLANGRAPH_TRACE_STARTUP": str(trace)}
    cmd = [sys.executable, "-m", "plangraph", "run", "plans/ppo.json", "--max-iterations", "1"]
    cmd += ["--out", str(tmp_path / "run"), "--no-progress", "--no-tensorboard"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    driver = [r for r in records if r["pid"] == records[0]["pid"]]
    phases = [r["phase"] for r in driver]
    expected = [
        "cli_imported",
        "compiled",
        "ray_ready",
        "actors_started",
        "first_sample",
        "first_train",
        "first_result",
        "checkpoint_saved",
        "actors_stopped",
        "ray_shutdown",
    ]
    assert [p for p in phases if p in expected] == expected
    times = [r["t"] for r in driver]
    assert times == sorted(times)
    # Both remote rollout workers (plans/ppo.json has 2) report from their own processes.
    workers = {r["pid"] for r in records if r["phase"] == "worker_ready"}
    assert len(workers) == 2 and records[0]["pid"] not in workers


def test_no_trace_is_written_without_the_variable(tmp_path: Path) -> None:
    code = (
        "import os, sys; os.chdir(sys.argv[1]); from plangraph.startup_trace import mark; "
        "mark('compiled'); print(sorted(os.listdir('.')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PLANGRAPH_TRACE_STARTUP"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == "[]"


class _BrokenEnv(CartPoleEnv):
    """An env that cannot be created (its constructor raises), as a misconfigured one."""

    def __init__(self, **kwargs: object) -> None:
        raise OSError("the simulator's licence file is missing")


@pytest.mark.usefixtures("ray_session")
def test_an_env_that_cannot_be_created_is_a_build_error_naming_it() -> None:
    import plangraph
    from plangraph.errors import BuildError

    gym.register("PlangraphTest/Broken-v0", entry_point=_BrokenEnv)
    compiled = plangraph.compile(
        ROOT / "plans" / "ppo.json", config={"env": "PlangraphTest/Broken-v0", "num_workers": 1}
    )
    with pytest.raises(BuildError, match="cannot be created") as err:
        compiled.build(seed=0)
    assert "'PlangraphTest/Broken-v0'" in str(err.value)
    assert "licence file is missing" in str(err.value)


@pytest.mark.usefixtures("ray_session")
def test_the_learner_starts_from_spaces_read_in_the_driver() -> None:
    """Remote workers get the learner's weights before their first fragment although the
    learner was built without waiting for them (spaces read while Ray started)."""
    import ray

    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / "ppo.json", config={"num_workers": 2})
    algo = compiled.build(seed=0)
    try:
        ws = algo.ctx.worker_sets["workers"]
        learner = ws.local_policy.get_weights()
        for remote in ray.get([w.get_weights.remote() for w in ws.remote_workers]):
            assert sorted(remote) == sorted(learner)
            for name, array in learner.items():
                np.testing.assert_array_equal(remote[name], array)
        kinds = ray.get(
            [w.__ray_call__.remote(lambda w: type(w.policy).__name__) for w in ws.remote_workers]
        )
        assert kinds == ["PPOPolicy"] * 2
        assert algo.train()["num_env_steps_sampled"] == 1024
    finally:
        algo.stop()


def test_spawning_the_head_process_imports_neither_the_compiler_nor_ray() -> None:
    # `plangraph run` spawns the head process before it compiles the plan, so that the head
    # imports Ray meanwhile; an import of the compiler (pydantic, networkx) on the way to
    # the spawn delayed it by about 0.5 s.
    code = (
        "import sys; import plangraph.runtime.ray_session, plangraph.runtime.local_head; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pydantic', 'networkx', 'ray', 'torch', 'numpy') or m.startswith('plangraph.compiler')))"
    )
    assert run_python(code).strip() == "[]"
