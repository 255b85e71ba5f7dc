"""``plangraph render``: formats, --check, --rankdir, --set, and the no-Graphviz paths."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_render import PLANS, seed

from plangraph import cli
from plangraph.compiler import load_plan
from plangraph.diagram import to_dot

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz `dot` binary not on PATH (Debian/Ubuntu: apt-get install graphviz)",
)


def write_broken(tmp_path: Path) -> Path:
    data = load_plan(PLANS / "a2c.json").to_dict()
    data["nodes"]["concat"]["params"]["min_batch_size"] = 0
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_dot_to_stdout_without_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["render", str(PLANS / "a2c.json")]) == 0
    assert capsys.readouterr().out == to_dot(seed("a2c"))


def test_rankdir_and_config_overrides(tmp_path: Path) -> None:
    out = tmp_path / "a2c.dot"
    argv = ["render", str(PLANS / "a2c.json"), "-o", str(out), "--rankdir", "LR"]
    assert cli.main([*argv, "--config", "train_batch_size=1000"]) == 0
    text = out.read_text(encoding="utf-8")
    assert 'rankdir="LR"' in text and "min_batch_size = 1000" in text
    # --set is the spelling `plangraph run` uses; -c/--config keep working
    for flag in ("--set", "-c"):
        assert cli.main([*argv, flag, "train_batch_size=777"]) == 0
        assert "min_batch_size = 777" in out.read_text(encoding="utf-8")


@needs_dot
@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_images(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"dqn{suffix}"
    assert cli.main(["render", str(PLANS / "dqn.json"), "-o", str(out)]) == 0
    assert out.stat().st_size > 1000
    assert f"wrote {out}" in capsys.readouterr().err


def test_check_exits_1_after_drawing_a_broken_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = write_broken(tmp_path)
    out = tmp_path / "broken.dot"
    assert cli.main(["render", str(plan), "-o", str(out)]) == 0  # drawn; errors are marked
    assert cli.main(["render", str(plan), "-o", str(out), "--check"]) == 1
    assert "<B>PG140</B>" in out.read_text(encoding="utf-8")
    err = capsys.readouterr().err
    assert "1 error, marked in the diagram" in err and "plangraph validate" in err
    assert cli.main(["render", str(PLANS / "a2c.json"), "-o", str(out), "--check"]) == 0


def test_without_dot_binary_writes_the_dot_and_says_why(tmp_path: Path) -> None:
    """A fresh process with no `dot` on PATH: message, .dot fallback, no traceback."""
    out = tmp_path / "a2c.svg"
    empty = tmp_path / "empty-path"
    empty.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "plangraph", "render", str(PLANS / "a2c.json"), "-o", str(out)],
        capture_output=True,
        text=True,
        env={"PATH": str(empty), "PYTHONPATH": str(PLANS.parent)},
        check=False,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the `dot` binary is not on PATH" in proc.stderr
    assert "sudo apt-get install graphviz" in proc.stderr
    assert not out.exists()
    assert (tmp_path / "a2c.dot").read_text(encoding="utf-8") == to_dot(seed("a2c"))


def test_without_python_package_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)
    out = tmp_path / "a2c.png"
    assert cli.main(["render", str(PLANS / "a2c.json"), "-o", str(out)]) == 3
    err = capsys.readouterr().err
    assert "Python package `graphviz` is not installed" in err and "binary" not in err
    assert (tmp_path / "a2c.dot").exists() and not out.exists()


def test_unsupported_suffix_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["render", str(PLANS / "a2c.json"), "-o", str(tmp_path / "a.jpg")]) == 2
    assert "unsupported file suffix .jpg" in capsys.readouterr().err


def test_bad_override_or_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["render", str(PLANS / "a2c.json"), "--config", "oops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert cli.main(["render", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_render_imports_neither_ray_nor_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from plangraph import cli;"
        f"rc = cli.main(['render', {str(PLANS / 'dqn.py')!r}, '-o', {str(tmp_path / 'd.dot')!r}]);"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch'));"
        "print(rc, heavy)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert proc.stdout.strip() == "0 []", proc.stdout + proc.stderr
