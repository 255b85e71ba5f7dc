"""Messages name the cause (issue 35): pydantic's errors whole, no knock-on diagnostic
after an unknown operator, ``--import`` on every command that reads a plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plangraph
from plangraph.cli import main

ROOT = Path(__file__).resolve().parent.parent

PLAN_COMMANDS = ("validate", "render", "diff", "run", "eval", "profile", "tune", "explain", "ops")
"""The commands that read a plan (a file, or a run directory's): each takes --import."""


def test_a_python_plan_raising_a_validation_error_shows_it_whole(tmp_path: Path) -> None:
    plan = tmp_path / "bad.py"
    plan.write_text(
        "from plangraph.ir.plan import Resource\n"
        'Resource(kind="ReplayBuffer", params={"x": object()})\n',
        encoding="utf-8",
    )
    (d,) = plangraph.analyze(plan).diagnostics
    assert d.code == "PG103"
    assert d.location is not None and d.location.line == 2
    # Location in the model, pydantic's message and the input, not "1 validation error".
    assert "Resource.params: Value error" in d.message
    assert "is not a JSON value" in d.message
    assert "(input: {'x': <object object at" in d.message
    assert "1 validation error" not in d.message


def test_an_import_raising_a_validation_error_shows_it_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = tmp_path / "bad_module.py"
    module.write_text(
        "from plangraph.ir.plan import Resource\n"
        'Resource(kind="ReplayBuffer", params={"x": object()})\n',
        encoding="utf-8",
    )
    code = main(["validate", str(ROOT / "plans" / "ppo.json"), "--import", str(module)])
    err = capsys.readouterr().err
    assert code != 0
    assert "is not a JSON value" in err and "bad_module.py:2" in err


@pytest.mark.parametrize("where", ["rollouts", "between"])
def test_an_unknown_user_operator_gets_pg110_and_no_knock_on(where: str) -> None:
    """A JSON plan using a user operator without --import: the operator is unknown (PG110),
    and the replay it would have fed is not reported as a branch that never produces."""
    plan = json.loads((ROOT / "plans" / "dqn.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    if where == "rollouts":
        plan["nodes"]["rollouts"] = {"op": "RandomCartPoleNotImported", "params": {}}
    else:
        plan["nodes"]["mix"] = {"op": "MixNotImported", "inputs": ["rollouts"], "params": {}}
        plan["nodes"]["store"]["inputs"] = ["mix"]
    codes = [d.code for d in plangraph.analyze(plan).diagnostics if d.is_error]
    assert codes == ["PG110"]


def test_a_branch_that_never_produces_is_still_reported() -> None:
    """The same plan with the writer fed from its own buffer's reader: PG176 stays."""
    plan = json.loads((ROOT / "plans" / "dqn.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["nodes"]["store"]["inputs"] = ["replay_batches"]
    codes = [d.code for d in plangraph.analyze(plan).diagnostics if d.is_error]
    assert "PG176" in codes


@pytest.mark.parametrize("command", PLAN_COMMANDS)
def test_every_command_that_reads_a_plan_takes_import(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert "--import MODULE" in capsys.readouterr().out


def test_profile_imports_the_user_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``profile --import`` imports it before reading the run (a failing one is reported)."""
    module = tmp_path / "boom.py"
    module.write_text("raise RuntimeError('boom at import')\n", encoding="utf-8")
    code = main(["profile", str(tmp_path), "--import", str(module)])
    assert code == 2
    assert "boom at import" in capsys.readouterr().err
