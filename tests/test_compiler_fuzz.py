"""Malformed plans give diagnostics, never a traceback, in bounded time and printable text.

The fuzz test runs the seeded mutator of ``tools/fuzz_plans.py`` (longer runs:
``.venv/bin/python tools/fuzz_plans.py --count 12000``); the other tests pin each bound
(``plangraph.ir.limits``) to a located diagnostic, and the schedule checks of
``plangraph.ops.policies``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import plangraph
from plangraph.algorithms.ppo import PPOConfig
from plangraph.ir.limits import MAX_DEPTH
from plangraph.ops.builtin.sink import StandardMetricsReportingParams

ROOT = Path(__file__).resolve().parent.parent
FUZZ_COUNT = 3000
"""Mutants per default-suite run (about 15-30 s on a loaded 2-core machine)."""


def _fuzz_module() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_plans", ROOT / "tools" / "fuzz_plans.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_plans"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _seed(name: str = "ppo") -> dict[str, Any]:
    data = json.loads((ROOT / "plans" / f"{name}.json").read_text(encoding="utf-8"))
    data.pop("$schema", None)
    return data


def _codes(compiled: Any) -> list[str]:
    return [d.code for d in compiled.diagnostics]


def _printable(compiled: Any) -> None:
    for d in compiled.diagnostics:
        text = d.format()
        text.encode("utf-8")
        text.encode("ascii", "backslashreplace")
        json.dumps(d.to_dict(), ensure_ascii=False).encode("utf-8")


def test_mutants_give_diagnostics_never_a_traceback() -> None:
    """No exception escapes ``analyze``; every diagnostic prints as UTF-8 and ASCII;
    no analysis blows up (10 s of CPU: on a slow day of the 2-core VM a seed plan took
    0.01-0.05 s once its env was made, up to 2 s for the first plan of an env, and one
    mutant 2.5 s of wall time, over the 2 s this limit was then); every DOT encodes
    (and ``dot`` accepts every 25th); clean mutants explain, serialise and round-trip."""
    fuzz = _fuzz_module()
    failures, examples = fuzz.run(FUZZ_COUNT, seed=0, time_limit=10.0, dot_every=25)
    assert not failures, "\n".join(f"{n} x {k}: {examples[k]}" for k, n in failures.items())


def test_the_mutator_reaches_the_bounds() -> None:
    """The mutants are not all trivially rejected: they hit each kind of bound and also
    leave many plans to the later checks (and some clean)."""
    fuzz = _fuzz_module()
    seen: dict[str, int] = {}
    for m in fuzz.mutants(400, seed=0):
        plan, config = (m.plan, m.config) if isinstance(m, fuzz.WithConfig) else (m, None)
        for code in set(_codes(plangraph.analyze(plan, config))) or {"clean"}:
            seen[code] = seen.get(code, 0) + 1
    for code in ("PG100", "PG102", "PG105", "PG118", "PG140", "clean"):
        assert seen.get(code, 0) > 0, seen


def test_a_few_mutants_through_the_cli() -> None:
    """``plangraph validate`` in a child process: exit 0 or 1, no traceback, every
    printed ``file:line:col`` inside the file (the full run: ``--cli 300``)."""
    fuzz = _fuzz_module()
    failures, examples = fuzz.run_cli(6, seed=0, time_limit=30.0)
    assert not failures, "\n".join(f"{n} x {k}: {examples[k]}" for k, n in failures.items())


def test_the_size_and_nesting_mutants_are_refused() -> None:
    """Size mutants (2**63 - 1, negative, floats) and nested config overrides give
    diagnostics, and a location is checked against the text it points into."""
    fuzz = _fuzz_module()
    kinds = {type(m).__name__ for m in fuzz.mutants(200, seed=0)}
    assert "WithConfig" in kinds
    rng = fuzz.random.Random(0)
    sized = fuzz.mutate_sizes(_seed(), rng)
    assert sized != _seed()
    where = fuzz.Location
    assert fuzz.outside_text("ab\ncd", where(None, 2, 3)) is None
    assert fuzz.outside_text("ab\ncd", where(None, 3, 1)) == "line 3 of a 2-line text"
    assert fuzz.outside_text("ab\ncd", where(None, 1, 4)) == "1:4, a line of 2 characters"


# -- bounds: each a located diagnostic ------------------------------------------------


def test_deep_json_text_is_a_located_too_large() -> None:
    text = json.dumps(_seed()).replace(
        '"params": {', '"params": {"deep": ' + "[" * 10_000 + "]" * 10_000 + ", ", 1
    )
    (d,) = plangraph.analyze(text).diagnostics
    assert d.code == "PG105" and d.name == "too-large"
    assert d.pointer.startswith("/resources/workers/params/deep/0/0")  # the first "params"
    assert d.location is not None and d.location.line == 1 and d.location.col is not None
    assert f"more than {MAX_DEPTH} levels" in d.message


@pytest.mark.parametrize("form", ["dict", "cyclic"])
def test_deep_or_cyclic_dict_is_a_located_too_large(form: str) -> None:
    data = _seed()
    deep: Any = []
    if form == "dict":
        for _ in range(10_000):
            deep = [deep]
    else:
        deep.append(deep)
    data["nodes"]["rollouts"]["params"]["deep"] = deep
    (d,) = plangraph.analyze(data).diagnostics
    assert d.code == "PG105" and d.pointer.startswith("/nodes/rollouts/params/deep/0")


@pytest.mark.parametrize("as_text", [True, False])
def test_huge_integer_is_a_located_too_large(as_text: bool) -> None:
    data = _seed()
    data["config"]["train_batch_size"] = 10**5000
    source: Any = data
    if as_text:
        sys.set_int_max_str_digits(0)  # only to write the text; the parser never converts it
        try:
            source = json.dumps(data, indent=2)
        finally:
            sys.set_int_max_str_digits(4300)
    (d,) = plangraph.analyze(source).diagnostics
    assert (d.code, d.pointer) == ("PG105", "/config/train_batch_size")
    assert "too large" in d.message and len(d.format()) < 400
    assert (d.location is not None) == as_text


def test_number_overflowing_a_double_is_a_located_too_large() -> None:
    text = json.dumps(_seed(), indent=2).replace('"gamma": 0.98', '"gamma": 1e999')
    (d,) = plangraph.analyze(text).diagnostics
    assert (d.code, d.pointer) == ("PG105", "/config/gamma")


def test_nan_in_a_dict_plan_is_located() -> None:
    data = _seed()
    data["resources"]["workers"]["params"]["policy"]["gamma"] = math.nan
    (d,) = plangraph.analyze(data).diagnostics
    assert (d.code, d.pointer) == ("PG102", "/resources/workers/params/policy/gamma")


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("*".join(["train_batch_size"] * 5000), "characters long"),
        ("+".join(["1"] * 100), "levels"),
        ("*".join(["train_batch_size"] * 8), "2**63"),  # 1024**8 = 2**80
        ("1e308*10", "not a finite number"),
        ("int(1e308)", "2**63"),
        ("9" * 30, "too large"),
        ("a\x00", "does not parse"),
    ],
)
def test_config_expressions_are_bounded(expr: str, words: str) -> None:
    data = _seed()
    data["config"]["a"] = 1
    data["nodes"]["concat"]["params"]["min_batch_size"] = "${" + expr + "}"
    compiled = plangraph.analyze(data)
    (d,) = [d for d in compiled.diagnostics if d.code == "PG118"]
    assert d.pointer == "/nodes/concat/params/min_batch_size"
    assert words in d.message
    assert len(d.message) < 600
    _printable(compiled)


def test_expression_results_stay_the_same_within_bounds() -> None:
    data = _seed()
    data["nodes"]["concat"]["params"]["min_batch_size"] = "${ceil(train_batch_size / 3) * 2}"
    compiled = plangraph.analyze(data)
    assert compiled.ok, [d.format() for d in compiled.diagnostics]
    expected = math.ceil(data["config"]["train_batch_size"] / 3) * 2
    assert compiled.nodes["concat"].params.min_batch_size == expected


# -- odd ids: printable diagnostics, DOT that encodes and that dot accepts -------------

ODD_IDS = ("", "]", "a\tb", "a\x00b", "\ud800", "x" * 5000)


def _odd_plan() -> dict[str, Any]:
    data = _seed()
    nodes = data["nodes"]
    for i, odd in enumerate(ODD_IDS):
        nodes[odd] = copy.deepcopy(nodes["concat"]) | {"inputs": [ODD_IDS[i - 1]]}
    nodes[ODD_IDS[0]]["inputs"] = ["nowhere\x00"]
    data["resources"]["]"] = {"kind": "ReplayBuffer\x00", "params": {"capacity": 2**63 - 1}}
    data["nodes"]["concat"]["params"]["min_batch_size"] = 9_223_372_036_854_775_807
    data["nodes"]["concat"]["params"]["huge"] = -9_223_372_036_854_775_807
    data["output"] = "\ud800"
    return data


@pytest.mark.parametrize("as_text", [False, True])
def test_odd_ids_give_printable_diagnostics_and_dot(as_text: bool) -> None:
    data = _odd_plan()
    compiled = plangraph.analyze(json.dumps(data) if as_text else data)
    assert not compiled.ok
    codes = set(_codes(compiled))
    assert {"PG102", "PG111", "PG119"} <= codes, codes
    _printable(compiled)
    text = "\n".join(d.format() for d in compiled.diagnostics)
    assert "a\\tb" in text and "a\\x00b" in text and "\\ud800" in text  # escaped, not dropped
    assert "\t" not in text and "\x00" not in text
    dot = plangraph.to_dot(compiled)
    dot.encode("utf-8")
    assert "\x00" not in dot  # dot ends a string at NUL; a tab in a label is fine
    if shutil.which("dot"):
        run = subprocess.run(
            ["dot", "-Tsvg"], input=dot.encode("utf-8"), capture_output=True, timeout=60
        )
        assert run.returncode == 0, run.stderr.decode("utf-8", "replace")
        assert b"<svg" in run.stdout


def test_diagnostic_text_escapes_controls_in_ids_and_pointers() -> None:
    from plangraph.compiler import Diagnostic

    d = Diagnostic("PG111", "input 'a\\tb' names no node", node="x\ty\x00", pointer="/nodes/\ud800")
    text = d.format()
    assert "node 'x\\ty\\x00'" in text and "at /nodes/\\ud800" in text
    text.encode("utf-8")
    assert d.to_dict()["node"] == "x\ty\x00"  # JSON escapes controls itself
    assert d.to_dict()["pointer"] == "/nodes/\\ud800"


# -- schedules ------------------------------------------------------------------------


def _with_schedule(points: Any) -> Any:
    data = _seed()
    data["resources"]["workers"]["params"]["policy"]["lr_schedule"] = points
    return plangraph.analyze(json.dumps(data, indent=2))


@pytest.mark.parametrize(
    ("points", "pointer", "words"),
    [
        ([[0, 1e-3], [1000, 1e-4], [500, 1e-5]], "2/0", "increase strictly"),
        ([[0, 1e-3], [0, 1e-4]], "1/0", "increase strictly"),
        ([[-5, 1e-3]], "0/0", ">= 0"),
        ([[0, 1e-3], [100, -1e-4]], "1/1", "finite number >= 0"),
        ([], "", "at least one"),
    ],
)
def test_bad_schedules_are_located(points: Any, pointer: str, words: str) -> None:
    compiled = _with_schedule(points)
    (d,) = compiled.diagnostics
    base = "/resources/workers/params/policy/lr_schedule"
    assert d.code == "PG141"
    assert d.pointer == (f"{base}/{pointer}" if pointer else base)
    assert words in d.message
    assert d.location is not None and d.hint and "lr_schedule" in d.hint


def test_good_schedules_stay_clean() -> None:
    assert _with_schedule([[0, 1e-3], [1000, 0.0]]).ok
    assert _with_schedule([[0, "${lr}"], [1000, 1e-5]]).ok
    assert _with_schedule([[100, 1e-3]]).ok


def test_policy_and_param_models_reject_non_finite_numbers() -> None:
    with pytest.raises(ValidationError):
        PPOConfig(gamma=math.nan)
    with pytest.raises(ValidationError):
        PPOConfig(grad_clip=math.inf)
    with pytest.raises(ValidationError):
        PPOConfig(lr_schedule=((0, math.nan),))
    with pytest.raises(ValidationError):
        PPOConfig(lr_schedule=((1000, 1e-3), (0, 1e-4)))
    with pytest.raises(ValidationError):
        StandardMetricsReportingParams(min_iter_time_s=math.inf)
