"""The compiler reads an env's spaces by creating one env, and caches them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plangraph.compiler.env_spaces import env_spaces

ROOT = Path(__file__).resolve().parent.parent

_PROBE = (
    "import sys\n"
    "from plangraph import cli\n"
    "rc = cli.main(['validate', '--quiet', 'plans/ppo.json'])\n"
    "print(rc, 'gymnasium' in sys.modules, 'torch' in sys.modules, 'ray' in sys.modules)\n"
)


def _probe(cache: Path) -> str:
    env = {**os.environ, "PLANGRAPH_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


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


def test_each_gymnasium_keeps_its_own_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two virtual environments used in turn: neither overwrites the other's cache."""
    from plangraph.compiler import env_spaces as mod

    monkeypatch.setenv("PLANGRAPH_CACHE_DIR", str(tmp_path))
    for key in ("/venv-a/gymnasium/__init__.py:1:1", "/venv-b/gymnasium/__init__.py:2:2"):
        monkeypatch.setattr(mod, "_gymnasium_key", lambda key=key: key)
        mod._env_spaces.cache_clear()
        assert env_spaces("CartPole-v1") is not None
    assert len(list(tmp_path.glob("env_spaces-*.json"))) == 2

    def no_env(*args: object) -> None:
        raise AssertionError("created an env: the cache missed")

    monkeypatch.setattr(mod, "_create", no_env)
    monkeypatch.setattr(mod, "_gymnasium_key", lambda: "/venv-a/gymnasium/__init__.py:1:1")
    mod._env_spaces.cache_clear()
    found = env_spaces("CartPole-v1")
    assert found is not None and found.action.text == "Discrete(2)"
    mod._env_spaces.cache_clear()
