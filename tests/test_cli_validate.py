"""``plangraph validate``: one broken plan per diagnostic code, exact expected text.

Each ``tests/fixtures/bad_plans/<CODE>_<what>.<json|py|...>`` has a ``<same name>.expected``
file holding exactly what ``plangraph validate --quiet`` prints for it (optional
``<same name>.args``: extra command-line arguments).
Regenerate with ``PLANGRAPH_UPDATE_EXPECTED=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plangraph import cli
from plangraph.compiler import CODES

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "bad_plans"
PLAN_FILES = sorted(
    p for p in FIXTURES.iterdir() if p.suffix not in (".expected", ".args") and p.is_file()
)


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["validate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_code_has_a_fixture() -> None:
    codes = {p.name.split("_", 1)[0] for p in PLAN_FILES}
    assert set(CODES) <= codes, f"codes without a fixture: {sorted(set(CODES) - codes)}"


@pytest.mark.parametrize("path", PLAN_FILES, ids=lambda p: p.name)
def test_fixture_output_is_exact(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rel = path.relative_to(ROOT).as_posix()
    args_file = path.with_name(path.name + ".args")
    extra = args_file.read_text().split() if args_file.exists() else []
    rc, out, err = _validate(capsys, "--quiet", *extra, rel)
    expected_file = path.with_name(path.name + ".expected")
    if os.environ.get("PLANGRAPH_UPDATE_EXPECTED"):
        expected_file.write_text(out, encoding="utf-8")
    expected = expected_file.read_text(encoding="utf-8")
    assert out == expected
    assert err == ""  # never a traceback
    code = path.name.split("_", 1)[0]
    if code in CODES:
        assert f" {code} [{CODES[code][0]}] " in out
    has_error = any(": error PG" in line for line in out.splitlines())
    assert rc == (1 if has_error else 0)


def test_clean_plans_exit_zero(capsys: pytest.CaptureFixture[str]) -> None:
    plans = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "plans").iterdir())
    rc, out, _ = _validate(capsys, *plans)
    assert rc == 0, out
    assert out.splitlines()[-1] == f"{len(plans)} plans checked: 0 errors, 0 warnings"


def test_json_format(capsys: pytest.CaptureFixture[str]) -> None:
    bad = "tests/fixtures/bad_plans/PG140_negative_batch_size.json"
    rc, out, _ = _validate(capsys, "--format", "json", "plans/a2c.json", bad)
    data = json.loads(out)
    assert rc == 1 and data["ok"] is False
    good, broken = data["plans"]
    assert good == {"path": "plans/a2c.json", "ok": True, "nodes": 4, "diagnostics": []}
    (d,) = broken["diagnostics"]
    assert d["code"] == "PG140" and d["name"] == "invalid-param"
    assert d["node"] == "concat"
    assert d["pointer"] == "/nodes/concat/params/min_batch_size"
    assert (d["line"], d["col"]) == (29, 27)


def test_an_override_given_twice_with_different_values_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, _, err = _validate(capsys, "--set", "lr=0.1", "-c", "lr=0.2", "plans/a2c.json")
    assert rc == 2
    assert "--set lr is given twice, as 0.1 and then 0.2: pass it once" in err
    rc, _, _ = _validate(capsys, "--set", "lr=0.1", "--set", "lr=0.1", "plans/a2c.json")
    assert rc == 0


def test_config_override(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _validate(capsys, "-c", "train_batch_size=-1", "plans/a2c.json")
    assert rc == 1
    assert "min_batch_size: Input should be greater than or equal to 1 (got -1" in out
    rc, _, _ = _validate(capsys, "-c", "train_batch_size=1000", "plans/a2c.json")
    assert rc == 0
    rc, out, _ = _validate(capsys, "--set", "train_batch_size=-1", "plans/a2c.json")
    assert rc == 1 and "the value comes from --set train_batch_size=-1" in out
    rc, _, _ = _validate(
        capsys, "--set", "train_batch_size=1000", "--config", "lr=0.01", "plans/a2c.json"
    )
    assert rc == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["no/such/plan.json"],
        ["plans"],
        ["-c", "novalue", "plans/a2c.json"],
        ["--set", "novalue", "plans/a2c.json"],
        [],
    ],
)
def test_usage_errors_exit_two(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        rc = cli.main(["validate", *argv])
    except SystemExit as exc:  # argparse
        rc = int(exc.code)  # type: ignore[arg-type]
    assert rc == 2
    assert "Traceback" not in capsys.readouterr().err


def test_list_codes(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _validate(capsys, "--list-codes")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == len(CODES)
    assert lines[0].split()[:3] == ["PG100", "json-syntax", "error"]
    rc, out, _ = _validate(capsys, "--list-codes", "--format", "json")
    assert {r["code"] for r in json.loads(out)} == set(CODES)


def test_validate_imports_neither_ray_nor_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from plangraph.cli import main\n"
        "rc = main(['validate', '--quiet', 'plans/dqn.json', 'plans/ppo.py'])\n"
        "heavy = sorted(m for m in ('ray', 'torch', 'gymnasium') if m in sys.modules)\n"
        "print(rc, heavy)\n"
    )
    # Its own env-spaces cache (not the user's, which other processes rewrite): the first
    # run creates CartPole once (gymnasium), the second reads the cache only.
    env = {**os.environ, "PLANGRAPH_CACHE_DIR": str(tmp_path)}
    outs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout.strip().splitlines()[-1])
    assert outs == ["0 ['gymnasium']", "0 []"]


def test_validate_imports_networkx_only_for_a_plan_with_a_cycle() -> None:
    # An acyclic plan is checked on the topology's own adjacency (networkx takes about
    # 0.2 s to import); a cycle's strongly connected components still come from networkx.
    code = (
        "import sys, contextlib, io\n"
        "from plangraph.cli import main\n"
        "quiet = contextlib.redirect_stdout(io.StringIO())\n"
        "with quiet, contextlib.redirect_stderr(io.StringIO()):\n"
        "    ok = main(['validate', '--quiet', 'plans/ppo.json', 'plans/dqn.json'])\n"
        "    before = 'networkx' in sys.modules\n"
        "    bad = main(['validate', 'tests/fixtures/bad_plans/PG120_cycle.json'])\n"
        "print(ok, before, bad, 'networkx' in sys.modules)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "False", "1", "True"]
