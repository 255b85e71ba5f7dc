"""Start-up and shutdown: bad input is refused before any Ray process exists, the learner
is built from spaces read in the driver.

Tests that start or stop Ray run a fresh interpreter: the session's shared Ray instance
(conftest) must not be shut down.
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from tests.fresh_python import run_python

ROOT = Path(__file__).resolve().parent.parent


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
        plangraph.build(compiled, seed=0)
    assert "'PlangraphTest/Broken-v0'" in str(err.value)
    assert "licence file is missing" in str(err.value)


@pytest.mark.usefixtures("ray_session")
def test_the_learner_starts_from_spaces_read_in_the_driver() -> None:
    """Remote workers get the learner's weights before their first fragment although the
    learner was built without waiting for them (spaces read while Ray started)."""
    import ray

    import plangraph

    compiled = plangraph.compile(ROOT / "plans" / "ppo.json", config={"num_workers": 2})
    algo = plangraph.build(compiled, seed=0)
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


REFUSED = """
import json, os, sys, threading, time
from plangraph.cli import main

seen, done = set(), threading.Event()

def watch():  # every process started below this one while the command runs
    me = str(os.getpid())
    while not done.is_set():
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as f:
                    name, rest = f.read().rsplit(")", 1)
                if rest.split()[1] == me:
                    seen.add(name.split("(", 1)[1])
            except (OSError, IndexError):
                pass
        time.sleep(0.005)

watcher = threading.Thread(target=watch, daemon=True)
watcher.start()
rc = main(sys.argv[1:])
done.set()
watcher.join(timeout=10)
assert not watcher.is_alive(), "the /proc watcher thread did not stop within 10 s"
ray = sys.modules.get("ray")
print(json.dumps({"rc": rc, "children": sorted(seen),
                  "ray_initialized": bool(ray and ray.is_initialized())}), flush=True)
"""


@pytest.mark.parametrize(
    ("plan", "args"),
    [
        pytest.param("ppo", ["--env", "CartPol-v1"], id="unknown-env"),
        pytest.param("ppo", ["--set", "nodes.concat.op=NoSuchOperator"], id="bad-override"),
        pytest.param("ppo", ["--num-workers", "1000"], id="too-many-workers"),
        pytest.param("ppo", ["--stop", "no_such_key=1"], id="bad-stop-key"),
        pytest.param("dqn", ["--set", "buffer_size=10000000000"], id="replay-memory"),
        pytest.param("apex", ["--set", "buffer_size=10000000000"], id="replay-actor-memory"),
        pytest.param("dqn", ["--env", "Pendulum-v1"], id="action-space"),
        pytest.param("ppo", ["--import", "no_such_module_here"], id="bad-import"),
        pytest.param("ppo", ["--seed", "-1"], id="bad-seed"),
        pytest.param("ppo", ["--resume", "no_such_run_dir"], id="bad-resume"),
    ],
)
def test_a_refused_run_starts_no_ray_process(plan: str, args: list[str], tmp_path: Path) -> None:
    """Bad input is refused before Ray starts: no process (Ray's GCS, raylet, workers) is
    ever started below the command's while it runs."""
    cmd = ["run", f"plans/{plan}.json", "--max-iterations", "1", "--out", str(tmp_path / "run")]
    stdout = run_python(REFUSED, *cmd, "--no-progress", *args)
    out = json.loads(stdout.splitlines()[-1])
    assert out["rc"] in (1, 2), stdout
    assert out["children"] == [], stdout
    assert out["ray_initialized"] is False
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("plan", "args"),
    [
        pytest.param("ppo", ["--env", "CartPol-v1"], id="unknown-env"),
        pytest.param("ppo", ["--num-workers", "1000"], id="too-many-workers"),
        pytest.param("ppo", ["--grid", "num_workers=1,1000"], id="a-grid-point-refused"),
        pytest.param("dqn", ["--set", "buffer_size=10000000000"], id="replay-memory"),
        pytest.param("dqn", ["--env", "Pendulum-v1"], id="action-space"),
        pytest.param("ppo", ["--seeds", "0", "-1"], id="bad-seed"),
    ],
)
def test_a_refused_sweep_starts_no_ray_process(plan: str, args: list[str], tmp_path: Path) -> None:
    """``plangraph tune`` checks every trial's plan as ``run`` does, before Ray Tune starts."""
    seeds = [] if "--seeds" in args else ["--seeds", "0", "1"]
    cmd = ["tune", f"plans/{plan}.json", "--max-iterations", "1", "--out", str(tmp_path / "t")]
    stdout = run_python(REFUSED, *cmd, *seeds, *args)
    out = json.loads(stdout.splitlines()[-1])
    assert out["rc"] in (1, 2), stdout
    assert out["children"] == [], stdout
    assert out["ray_initialized"] is False
    assert not (tmp_path / "t").exists()


def test_a_refused_eval_starts_no_ray_process(tmp_path: Path) -> None:
    stdout = run_python(REFUSED, "eval", str(tmp_path / "no_such_run"))
    out = json.loads(stdout.splitlines()[-1])
    assert out["rc"] in (1, 2), stdout
    assert out["children"] == [] and out["ray_initialized"] is False
