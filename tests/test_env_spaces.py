"""The compiler reads an env's spaces by creating one env, and caches those of installed envs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plangraph.compiler.env_spaces import env_spaces
from tests.fresh_python import run_python

ROOT = Path(__file__).resolve().parent.parent

_PROBE = (
    "import sys\n"
    "from plangraph import cli\n"
    "rc = cli.main(['validate', '--quiet', 'plans/ppo.json', *sys.argv[1:]])\n"
    "print(rc, 'gymnasium' in sys.modules, 'torch' in sys.modules, 'ray' in sys.modules)\n"
)


def _probe(cache: Path, *args: str) -> str:
    """``plangraph validate plans/ppo.json ARGS`` in a new process: its exit status and
    whether it imported gymnasium, torch and ray."""
    return run_python(_PROBE, *args, env={"PLANGRAPH_CACHE_DIR": str(cache)}).strip()


def test_spaces_of_registered_envs() -> None:
    cartpole = env_spaces("CartPole-v1")
    assert cartpole is not None
    assert (cartpole.observation.kind, cartpole.observation.shape) == ("Box", (4,))
    assert (cartpole.action.kind, cartpole.action.text) == ("Discrete", "Discrete(2)")
    pendulum = env_spaces("Pendulum-v1")
    assert pendulum is not None
    assert pendulum.action.kind == "Box" and pendulum.action.bounded
    assert pendulum.action.shape == (1,) and pendulum.action.dtype == "float32"


@pytest.mark.parametrize("env_id", ["NoSuchEnv-v0", "some_module:CartPole-v1"])
def test_unknown_spaces_are_none(env_id: str) -> None:
    assert env_spaces(env_id) is None


def test_validate_creates_the_env_once_then_reads_the_cache(tmp_path: Path) -> None:
    # never torch or ray; gymnasium only while the cache is cold
    assert _probe(tmp_path) == "0 True False False"
    (cache,) = tmp_path.glob("env_spaces-*.json")
    data = json.loads(cache.read_text())
    assert data["envs"]["CartPole-v1"]["action"]["kind"] == "Discrete"
    assert _probe(tmp_path) == "0 False False False"


def test_a_broken_cache_is_ignored_and_rewritten(tmp_path: Path) -> None:
    assert _probe(tmp_path) == "0 True False False"
    (cache,) = tmp_path.glob("env_spaces-*.json")
    cache.write_text("{not json")
    assert _probe(tmp_path) == "0 True False False"
    assert _probe(tmp_path) == "0 False False False"


_AS_GYMNASIUM = (
    "import sys\n"
    "from plangraph.compiler import env_spaces as mod\n"
    "mod._gymnasium_key = lambda: sys.argv[1]  # as if that gymnasium were installed\n"
    "if sys.argv[2] == 'cached-only':\n"
    "    def no_env(*args):\n"
    "        raise AssertionError('created an env: the cache missed')\n"
    "    mod._create = no_env\n"
    "print(mod.env_spaces('CartPole-v1').action.text)\n"
)


def test_each_gymnasium_keeps_its_own_cache(tmp_path: Path) -> None:
    """Two virtual environments used in turn: neither overwrites the other's cache."""

    def run(key: str, mode: str) -> str:
        stdout = run_python(_AS_GYMNASIUM, key, mode, env={"PLANGRAPH_CACHE_DIR": str(tmp_path)})
        return stdout.strip()

    for key in ("/venv-a/gymnasium/__init__.py:1:1", "/venv-b/gymnasium/__init__.py:2:2"):
        assert run(key, "create") == "Discrete(2)"
    assert len(list(tmp_path.glob("env_spaces-*.json"))) == 2
    assert run("/venv-a/gymnasium/__init__.py:1:1", "cached-only") == "Discrete(2)"


def test_an_installed_env_in_plangraphs_wrappers_is_cached_with_its_stamps(
    tmp_path: Path,
) -> None:
    flat = 'workers.wrappers=[{"name": "flatten_observation"}]'
    args = ["--set", "env=FrozenLake-v1", "--set", flat]
    assert _probe(tmp_path, *args) == "0 True False False"
    (cache,) = tmp_path.glob("env_spaces-*.json")
    data = json.loads(cache.read_text())
    (name,) = [n for n in data["envs"] if n.startswith("FrozenLake-v1 ")]
    entry = data["envs"][name]
    assert entry["observation"]["shape"] == [16]  # one-hot of 16 states
    assert list(entry["depends"]) == ["plangraph.rl.wrappers"]
    assert _probe(tmp_path, *args) == "0 False False False"
    # A changed wrapper module (another stamp) is not answered from the cache.
    entry["depends"]["plangraph.rl.wrappers"] += "-changed"
    cache.write_text(json.dumps(data))
    assert _probe(tmp_path, *args) == "0 True False False"


# -- user envs and wrappers: never validated against another version's spaces ---------------

_USER_ENV = """
import gymnasium as gym
import numpy as np

DIM = {dim}


class Sized(gym.Env):
    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (DIM,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(DIM, np.float32), {{}}

    def step(self, action):
        return np.zeros(DIM, np.float32), 0.0, True, False, {{}}


gym.register("PlangraphTest/Sized-v0", entry_point=Sized)
"""

# The wrapper's module imports gymnasium only when the wrapper is applied, so that
# validating a plan with it starts with gymnasium not yet imported.
_USER_WRAPPER = """
from pydantic import BaseModel

from plangraph.ops.wrappers import WrapperKind, register_wrapper

DIM = {dim}


def pad(env):
    import gymnasium as gym
    import numpy as np

    space = gym.spaces.Box(-10.0, 10.0, (DIM,), np.float32)
    return gym.wrappers.TransformObservation(
        env, lambda obs: np.resize(obs, DIM).astype(np.float32), space
    )


class PadParams(BaseModel):
    pass


register_wrapper(WrapperKind("plangraph_test_pad", PadParams, "sized_wrapper:pad"))
"""


def _explain(cache: Path, module: Path, *sets: str) -> str:
    """``plangraph explain plans/ppo.json`` in a new process, importing ``module``."""
    env = {
        **os.environ,
        "PLANGRAPH_CACHE_DIR": str(cache),
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",  # a rewritten module of the same size is re-read
    }
    args = ["explain", "plans/ppo.json", "--import", str(module)]
    for s in sets:
        args += ["--set", s]
    proc = subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [x for x in proc.stdout.splitlines() if "env spaces:" in x]
    return line.strip()


def test_a_user_env_changed_between_runs_shows_its_new_spaces(tmp_path: Path) -> None:
    module = tmp_path / "sized_env.py"
    for dim in (3, 7):
        module.write_text(_USER_ENV.format(dim=dim), encoding="utf-8")
        line = _explain(tmp_path / "cache", module, "env=PlangraphTest/Sized-v0")
        assert f"observation Box(shape=[{dim}], float32)" in line, line


def test_a_user_wrapper_changed_between_runs_shows_its_new_spaces(tmp_path: Path) -> None:
    module = tmp_path / "sized_wrapper.py"
    for dim in (3, 7):
        module.write_text(_USER_WRAPPER.format(dim=dim), encoding="utf-8")
        line = _explain(
            tmp_path / "cache", module, 'workers.wrappers=[{"name": "plangraph_test_pad"}]'
        )
        assert f"observation Box(shape=[{dim}], float32)" in line, line


def test_a_user_env_is_never_written_to_the_cache(tmp_path: Path) -> None:
    module = tmp_path / "sized_env.py"
    module.write_text(_USER_ENV.format(dim=3), encoding="utf-8")
    _explain(tmp_path / "cache", module, "env=PlangraphTest/Sized-v0")
    for cache in (tmp_path / "cache").glob("env_spaces-*.json"):
        assert "Sized" not in cache.read_text()


def test_registering_an_id_again_in_one_process_is_seen() -> None:
    import gymnasium as gym
    import numpy as np

    def sized(dim: int) -> type[gym.Env]:
        class Sized(gym.Env):  # type: ignore[type-arg]
            observation_space = gym.spaces.Box(-1.0, 1.0, (dim,), np.float32)
            action_space = gym.spaces.Discrete(2)

        return Sized

    env_id = "PlangraphTest/Reregistered-v0"
    try:
        gym.register(env_id, entry_point=sized(3), disable_env_checker=True)
        found = env_spaces(env_id)
        assert found is not None and found.observation.shape == (3,)
        assert env_spaces(env_id) is found  # the same spec: made once
        with pytest.warns(UserWarning, match="Overriding environment"):
            gym.register(env_id, entry_point=sized(7), disable_env_checker=True)
        found = env_spaces(env_id)
        assert found is not None and found.observation.shape == (7,)
    finally:
        gym.registry.pop(env_id, None)
