"""Bounded everything (issue 35): every size a plan can set has an upper bound checked
when its params are validated, so no input makes the compiler (or a build) allocate, loop
or recurse without limit; the diagnostics point inside the file, and nested Python values
are refused with a diagnostic, never a ``RecursionError``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph.cli import main
from plangraph.ops import sizes
from plangraph.text import parse_key_value

ROOT = Path(__file__).resolve().parent.parent


def _plan(name: str) -> dict[str, Any]:
    data = json.loads((ROOT / "plans" / f"{name}.json").read_text(encoding="utf-8"))
    data.pop("$schema", None)
    return data


def _errors(compiled: Any) -> list[tuple[str, str | None]]:
    return [(d.code, d.pointer) for d in compiled.diagnostics if d.is_error]


@pytest.mark.parametrize(
    ("plan", "path", "value", "code"),
    [
        ("ppo", ("resources", "workers", "params", "num_workers"), sizes.MAX_WORKERS + 1, "PG141"),
        (
            "ppo",
            ("resources", "workers", "params", "num_envs_per_worker"),
            sizes.MAX_ENVS_PER_WORKER + 1,
            "PG141",
        ),
        (
            "ppo",
            ("resources", "workers", "params", "rollout_fragment_length"),
            2**63 - 1,
            "PG141",
        ),
        ("ppo", ("nodes", "concat", "params", "min_batch_size"), sizes.MAX_BATCH + 1, "PG140"),
        ("ppo", ("nodes", "train", "params", "num_sgd_iter"), 2**63 - 1, "PG140"),
        (
            "dqn",
            ("resources", "replay", "params", "capacity"),
            sizes.MAX_REPLAY_CAPACITY + 1,
            "PG141",
        ),
        ("apex", ("resources", "replay", "params", "num_shards"), sizes.MAX_SHARDS + 1, "PG141"),
        (
            "ppo",
            ("resources", "workers", "params", "policy", "hiddens"),
            [sizes.MAX_LAYER_WIDTH + 1],
            "PG141",
        ),
        (
            "ppo",
            ("resources", "workers", "params", "policy", "hiddens"),
            [8] * (sizes.MAX_LAYERS + 1),
            "PG141",
        ),
        ("ppo", ("resources", "workers", "params", "policy", "hiddens"), [0], "PG141"),
        ("dqn", ("resources", "workers", "params", "policy", "n_step"), 2**63 - 1, "PG141"),
    ],
)
def test_a_size_beyond_its_bound_is_a_located_error(
    plan: str, path: tuple[str, ...], value: Any, code: str, tmp_path: Path
) -> None:
    data = _plan(plan)
    box = data
    for key in path[:-1]:
        box = box[key]
    box[path[-1]] = value
    file = tmp_path / "plan.json"
    text = json.dumps(data, indent=2)
    file.write_text(text, encoding="utf-8")
    compiled = plangraph.analyze(file)
    pointer = "/" + "/".join(path)
    errors = [(c, p) for c, p in _errors(compiled) if p is not None and p.startswith(pointer)]
    assert errors and errors[0][0] == code, compiled.diagnostics
    # The diagnostic points at the value, inside the file.
    (d,) = [d for d in compiled.diagnostics if d.pointer == errors[0][1]][:1]
    assert d.location is not None
    lines = text.split("\n")
    assert 1 <= d.location.line <= len(lines)
    assert d.location.col is not None and 1 <= d.location.col <= len(lines[d.location.line - 1])


@pytest.mark.parametrize("count", [2**63 - 1, 10**9, sizes.MAX_AGENTS + 1, 0, -1, 2.5])
def test_an_agent_count_beyond_its_bound_is_refused_at_once(count: Any) -> None:
    """``num_agents`` of 2**63 - 1 made validate build a list of 2**63 - 1 agent ids."""
    data = _plan("ppo_multiagent")
    data["resources"]["workers"]["params"]["env_config"]["num_agents"] = count
    t0 = time.process_time()
    compiled = plangraph.analyze(data)
    assert time.process_time() - t0 < 5  # far less: no list of agents is built
    assert ("PG141", "/resources/workers/params/env_config/num_agents") in _errors(compiled)


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("key", ["lr", "nodes.train.num_sgd_iter"])
def test_a_deeply_nested_python_override_is_a_diagnostic(depth: int, kind: str, key: str) -> None:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    compiled = plangraph.analyze(ROOT / "plans" / "ppo.json", config={key: value})
    (d,) = [d for d in compiled.diagnostics if d.is_error]
    assert d.code == "PG105"
    assert "nested more than 64 levels deep" in d.message
    assert d.pointer is not None and d.pointer.startswith(f"/config/{key}/")


def test_a_deeply_nested_value_in_a_python_plan_is_a_diagnostic(tmp_path: Path) -> None:
    plan = tmp_path / "deep.py"
    plan.write_text(
        "from plangraph.ir.plan import Resource\n"
        "v = 1\n"
        "for _ in range(100_000):\n"
        "    v = [v]\n"
        'Resource(kind="ReplayBuffer", params={"capacity": v})\n',
        encoding="utf-8",
    )
    (d,) = plangraph.analyze(plan).diagnostics
    assert d.code == "PG103"
    assert "nested more than 64 levels deep" in d.message


@pytest.mark.parametrize(
    ("raw", "why"),
    [("9" * 5000, "integers must fit in 64 bits"), ("[" * 50_000 + "]" * 50_000, "nested")],
)
def test_a_command_line_value_no_plan_can_hold_is_refused(
    raw: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match=why):
        parse_key_value(f"x={raw}")
    code = main(["validate", str(ROOT / "plans" / "ppo.json"), "--set", f"x={raw}"])
    err = capsys.readouterr().err
    assert code == 2 and why in err and "Traceback" not in err


def test_a_file_name_too_long_for_the_system_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "x" * 100_000])
    assert code == 2
    assert "not a file name this system accepts" in capsys.readouterr().err
