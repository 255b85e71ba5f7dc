"""``plangraph diff``: what changed between two plans, as compiled; text, JSON, diagram.

The a2c -> a2c_microbatch diff is pinned as snapshots (JSON and text) in
``tests/snapshots/diff/``; after an intended change regenerate them with
``PLANGRAPH_UPDATE_SNAPSHOTS=1 pytest tests/test_plan_diff.py`` and review the diff.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plangraph import cli
from plangraph.compiler import analyze, compile
from plangraph.compiler.diff import ABSENT, PlanDiff, ValueChange, diff_plans, same_value
from plangraph.compiler.diff_text import format_diff
from plangraph.compiler.plan_view import PlanView, load_view
from plangraph.diagram.diff import diff_to_dot, render_diff
from plangraph.diagram.style import DIFF_EDGES, DIFF_STYLES

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "plans"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "diff"
UPDATE = os.environ.get("PLANGRAPH_UPDATE_SNAPSHOTS") == "1"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` not on PATH")


def plan_data(name: str) -> dict[str, Any]:
    return json.loads((PLANS / f"{name}.json").read_text())


def view(data: dict[str, Any], **config: Any) -> PlanView:
    return PlanView.from_compiled(compile(data, config=config))


def diff_of(a: dict[str, Any], b: dict[str, Any]) -> PlanDiff:
    return diff_plans(view(a), view(b), a_label="a.json", b_label="b.json")


def _check_snapshot(name: str, text: str) -> None:
    snap = SNAPSHOTS / name
    if UPDATE:
        snap.parent.mkdir(parents=True, exist_ok=True)
        snap.write_text(text, encoding="utf-8")
    assert snap.exists(), f"no snapshot {snap}; create it with PLANGRAPH_UPDATE_SNAPSHOTS=1"
    assert text == snap.read_text(encoding="utf-8"), (
        f"{name} changed; if intended, regenerate with PLANGRAPH_UPDATE_SNAPSHOTS=1 "
        "pytest tests/test_plan_diff.py and review the diff"
    )


def test_a2c_to_a2c_microbatch_json_and_text_match_their_snapshots(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)  # the sources are named as given: relative paths
    a, b = "plans/a2c.json", "plans/a2c_microbatch.json"
    assert cli.main(["diff", a, b, "--format", "json"]) == 1
    out = capsys.readouterr().out
    _check_snapshot("a2c__a2c_microbatch.json", out)
    data = json.loads(out)
    # Deterministic: keys sorted at every level, the same text on every call.
    assert out == json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert cli.main(["diff", a, b, "--format", "json"]) == 1
    assert capsys.readouterr().out == out
    # What it says, read back: the microbatch chain replaces the one train step.
    assert data["identical"] is False
    assert sorted(data["nodes"]["added"]) == ["apply", "average", "batch", "grads"]
    assert list(data["nodes"]["removed"]) == ["train"]
    assert data["nodes"]["changed"]["metrics"] == {"inputs": {"a": ["train"], "b": ["apply"]}}
    # min_batch_size is "${train_batch_size}" in a and "${microbatch_size}" in b: resolved.
    assert data["nodes"]["changed"]["concat"]["params"] == {"min_batch_size": {"a": 1024, "b": 512}}
    assert data["nodes"]["added"]["batch"]["params"] == {"n": 2}  # ${ceil(1024 / 512)}
    assert data["config"]["added"] == {"microbatch_size": 512}
    assert data["config"]["changed"] == {"rollout_fragment_length": {"a": 64, "b": 32}}
    assert data["resources"]["changed"]["workers"]["params"] == {
        "rollout_fragment_length": {"a": 64, "b": 32}
    }
    assert data["plan"] == {"name": {"a": "a2c", "b": "a2c_microbatch"}}

    assert cli.main(["diff", a, b]) == 1
    _check_snapshot("a2c__a2c_microbatch.txt", capsys.readouterr().out)


def test_identical_plans_exit_0_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    # The JSON and the Python form of one plan compile to the same thing.
    assert cli.main(["diff", str(PLANS / "dqn.json"), str(PLANS / "dqn.py")]) == 0
    out = capsys.readouterr().out
    assert "identical" in out
    assert (
        cli.main(["diff", str(PLANS / "dqn.json"), str(PLANS / "dqn.py"), "--format", "json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["identical"] is True
    assert data["summary"]["nodes_unchanged"] == len(plan_data("dqn")["nodes"])


def test_values_are_compared_resolved_with_defaults_filled_in() -> None:
    a = plan_data("a2c")
    b = copy.deepcopy(a)
    # A config reference written as its value, and a default written out, are no change.
    b["nodes"]["concat"]["params"]["min_batch_size"] = 1024
    b["nodes"]["train"]["params"]["num_sgd_iter"] = 1
    assert diff_of(a, b).identical
    # The same "${train_batch_size}" text on both sides differs when the config does.
    c = diff_plans(view(a), view(a, train_batch_size=2048))
    assert [(x.name, x.a, x.b) for x in c.config] == [("train_batch_size", 1024, 2048)]
    (concat,) = c.nodes_changed
    assert concat.id == "concat"
    assert concat.params == (ValueChange(("min_batch_size",), 1024, 2048),)


def test_nodes_added_removed_rewired_retyped_and_params() -> None:
    a = plan_data("a2c")
    b = copy.deepcopy(a)
    # A node inserted between concat and train (train re-wired), metrics' param changed.
    b["nodes"]["std"] = {
        "op": "WaitUntilTimestepsElapsed",
        "inputs": ["concat"],
        "params": {"target": 2048},
    }
    b["nodes"]["train"]["inputs"] = ["std"]
    b["nodes"]["metrics"]["params"]["min_iter_time_s"] = 2.5
    d = diff_of(a, b)
    assert d.nodes_added == ("std",) and d.nodes_removed == ()
    assert d.order == ("rollouts", "concat", "std", "train", "metrics")
    changed = {c.id: c for c in d.nodes_changed}
    assert set(changed) == {"train", "metrics"}
    assert changed["train"].inputs == (("concat",), ("std",)) and changed["train"].rewired
    assert changed["metrics"].params == (ValueChange(("min_iter_time_s",), 0.0, 2.5),)
    assert [(e.src, e.dst, e.port) for e in d.edges_added] == [
        ("concat", "std", 0),
        ("std", "train", 0),
    ]
    assert [(e.src, e.dst) for e in d.edges_removed] == [("concat", "train")]
    assert d.node_status("rollouts") == "unchanged" and d.node_status("std") == "added"

    # The op of a node replaced (re-typed): op, output type and params change together.
    c = copy.deepcopy(a)
    c["nodes"]["train"] = {"op": "ComputeGradients", "inputs": ["concat"], "params": {}}
    c["nodes"]["apply"] = {"op": "ApplyGradients", "inputs": ["train"], "params": {}}
    c["nodes"]["metrics"]["inputs"] = ["apply"]
    d = diff_of(a, c)
    train = d.node_change("train")
    assert train is not None
    assert train.op == ("TrainOneStep", "ComputeGradients")
    assert train.output_type == ("TrainInfo", "GradInfo")
    assert {x.name: x.status for x in train.params} == {
        "num_sgd_iter": "removed",
        "policies": "removed",
        "sgd_minibatch_size": "removed",
        "update_workers_every": "removed",
    }
    # The edge train -> metrics is gone; train -> apply -> metrics is new.
    assert [(e.src, e.dst) for e in d.edges_removed] == [("train", "metrics")]
    # train now reads @workers (the learner computes gradients), apply writes it.
    assert {(u.node, u.access) for u in d.uses_added} == {("apply", "write"), ("train", "read")}
    assert {(u.node, u.access) for u in d.uses_removed} == {("train", "write")}

    # Removing a node (here: the metrics sink replaced by another id).
    e = copy.deepcopy(a)
    e["nodes"]["report"] = e["nodes"].pop("metrics")
    e["output"] = "report"
    d = diff_of(a, e)
    assert d.nodes_removed == ("metrics",) and d.nodes_added == ("report",)
    assert d.output == ("metrics", "report")
    text = format_diff(d)
    assert "  ~ output: metrics -> report" in text
    assert "  - metrics   StandardMetricsReporting  inputs: train" in text


def test_resources_added_removed_kind_and_params() -> None:
    a = plan_data("dqn")
    b = copy.deepcopy(a)
    b["resources"]["replay"]["params"]["prioritized"] = True
    b["config"]["buffer_size"] = 5000
    b["resources"]["workers"]["params"]["policy"]["hiddens"] = [32, 32]
    d = diff_of(a, b)
    changed = {c.id: c for c in d.resources_changed}
    assert {x.name: (x.a, x.b) for x in changed["replay"].params} == {
        "capacity": (100000, 5000),
        "prioritized": (False, True),
    }
    assert {x.name: (x.a, x.b) for x in changed["workers"].params} == {
        "policy.hiddens": ([64, 64], [32, 32])
    }
    assert changed["replay"].params[0].pointer("/resources/replay/params") == (
        "/resources/replay/params/capacity"
    )
    text = format_diff(d)
    assert "             policy.hiddens: [64, 64] -> [32, 32]" in text

    # A resource added and one removed: a2c's worker set renamed.
    c = plan_data("a2c")
    r = copy.deepcopy(c)
    r["resources"]["learner"] = r["resources"].pop("workers")
    for nid in ("rollouts", "train", "metrics"):
        r["nodes"][nid]["params"]["workers"] = "@learner"
    d = diff_of(c, r)
    assert d.resources_added == ("learner",) and d.resources_removed == ("workers",)
    assert d.resource_status("learner") == "added" and d.resource_status("workers") == "removed"
    assert {(u.node, u.resource, u.access) for u in d.uses_removed} == {
        ("rollouts", "workers", "read"),
        ("train", "workers", "write"),
        ("metrics", "workers", "read"),
    }
    as_json = d.to_dict()
    assert as_json["resources"]["added"]["learner"]["kind"] == "WorkerSet"
    assert as_json["nodes"]["changed"]["train"]["params"] == {
        "workers": {"a": "@workers", "b": "@learner"}
    }

    # The kind of a resource changed: reported as such (its params all differ with it).
    k = copy.deepcopy(a)
    k["resources"]["replay"] = {"kind": "LearnerThread", "params": {}}
    k["nodes"]["store"]["params"]["buffer"] = "@replay2"
    k["nodes"]["replay_batches"]["params"]["buffer"] = "@replay2"
    k["resources"]["replay2"] = a["resources"]["replay"]
    d = diff_plans(view(a), PlanView.from_compiled(analyze(k)))
    (res,) = [c for c in d.resources_changed if c.id == "replay"]
    assert res.kind == ("ReplayBuffer", "LearnerThread")


def test_same_value_is_json_equality() -> None:
    assert same_value({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    assert not same_value(1, 1.0) and not same_value(1, True) and not same_value(0, None)
    assert (
        ValueChange(("x",), b=3).status == "added" and ValueChange(("x",), a=3).status == "removed"
    )
    assert ValueChange(("x",), b=3).sides() == {"b": 3} and repr(ABSENT) == "(absent)"


def _saved_plan_dir(tmp_path: Path, compiled: Any) -> Path:
    """A directory holding plan.json as ``plangraph run`` writes it."""
    from plangraph.commands.run import _write_plan_files

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write_plan_files(compiled, compiled.to_plan(), run_dir)
    return run_dir


def test_a_run_directory_is_its_saved_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = _saved_plan_dir(tmp_path, compile(PLANS / "ppo.json", config={"lr": 0.01}))
    # The saved plan is the one the run compiled: its --set override is in it.
    assert cli.main(["diff", str(run_dir), str(PLANS / "ppo.json"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    # A saved plan has every param written out and no config: the resolved params differ.
    assert data["config"]["changed"] == {}
    plan_lr = json.loads((PLANS / "ppo.json").read_text())["config"]["lr"]
    assert data["resources"]["changed"]["workers"]["params"]["policy.lr"] == {
        "a": 0.01,
        "b": plan_lr,
    }
    assert data["a"] == {"source": str(run_dir), "plan": "ppo"}
    assert cli.main(["diff", str(run_dir), str(PLANS / "ppo.json"), "--set-b", "lr=0.01"]) == 0
    capsys.readouterr()
    # The plan.json file itself, and the view it reads, are the same as the directory.
    assert load_view(run_dir / "plan.json") == load_view(run_dir)
    assert diff_plans(load_view(run_dir), load_view(PLANS / "ppo.json", {"lr": 0.01})).identical


BAD_INPUTS = [
    ("missing file", ["{tmp}/nope.json", "{plans}/a2c.json"], "no such file or directory"),
    ("directory without plan.json", ["{tmp}", "{plans}/a2c.json"], "a directory without plan.json"),
    ("plan with errors", ["{tmp}/broken.json", "{plans}/a2c.json"], "not compared: fix the errors"),
    ("corrupt saved plan", ["{tmp}/run", "{plans}/a2c.json"], "run/plan.json:"),
    ("bad --set-a", ["{plans}/a2c.json", "{plans}/a2c.json", "--set-a", "oops"], "KEY=VALUE"),
    ("--set-b on a run", ["{plans}/a2c.json", "{tmp}/good_run", "--set-b", "lr=1"],
     "--set applies to plan files"),
    ("bad --out suffix", ["{plans}/a2c.json", "{plans}/a2c.json", "-o", "{tmp}/x.pdf"],
     "unsupported"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), [pytest.param(*r[1:], id=r[0]) for r in BAD_INPUTS])
def test_bad_input_exits_2_with_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    broken = plan_data("a2c")
    broken["nodes"]["concat"]["params"]["min_batch_size"] = -5
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = json.loads(compile(PLANS / "a2c.json").to_json())
    saved["nodes"]["concat"]["inputs"] = "rollouts"  # a string, not a list of ids
    (run_dir / "plan.json").write_text(json.dumps(saved, indent=2))
    good = tmp_path / "good_run"
    good.mkdir()
    (good / "plan.json").write_text(compile(PLANS / "a2c.json").to_json())
    argv = [a.format(tmp=tmp_path, plans=PLANS) for a in args]
    assert cli.main(["diff", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], captured.err


def test_corrupt_saved_plan_error_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = json.loads(compile(PLANS / "a2c.json").to_json())
    saved["resources"]["workers"]["kind"] = 7
    (tmp_path / "plan.json").write_text(json.dumps(saved, indent=2))
    assert cli.main(["diff", str(tmp_path), str(PLANS / "a2c.json")]) == 2
    err = capsys.readouterr().err
    line = next(
        i
        for i, t in enumerate((tmp_path / "plan.json").read_text().splitlines(), 1)
        if '"kind": 7' in t
    )
    assert f"plan.json:{line}:" in err and "/resources/workers/kind" in err, err


def test_diagram_colours_every_status() -> None:
    d = diff_plans(load_view(PLANS / "a2c.json"), load_view(PLANS / "a2c_microbatch.json"))
    dot = diff_to_dot(d)
    assert dot == diff_to_dot(d)  # deterministic

    def stmt(name: str) -> str:
        return next(line for line in dot.splitlines() if line.strip().startswith(f'"{name}" ['))

    assert DIFF_STYLES["added"].fill in stmt("grads")
    assert DIFF_STYLES["removed"].fill in stmt("train") and "dashed" in stmt("train")
    assert DIFF_STYLES["changed"].fill in stmt("concat")
    assert "min_batch_size = 1024 \u2192 512" in stmt("concat")
    assert "inputs = train \u2192 apply" in stmt("metrics")
    assert DIFF_STYLES["unchanged"].fill in stmt("rollouts")
    assert DIFF_STYLES["changed"].fill in stmt("@workers")
    edges = {line.strip().split(" [")[0]: line for line in dot.splitlines() if " -> " in line}
    assert DIFF_EDGES["removed"]["color"] in edges['"train" -> "metrics"']
    assert 'style="dashed"' in edges['"train" -> "metrics"']
    assert DIFF_EDGES["added"]["color"] in edges['"apply" -> "metrics"']
    assert DIFF_EDGES["unchanged"]["color"] in edges['"rollouts" -> "concat"']
    assert "legend/added" in dot and "legend/removed" in dot
    with pytest.raises(ValueError, match="rankdir"):
        diff_to_dot(d, rankdir="XX")


@needs_dot
def test_diff_draws_svg_and_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(PLANS / "ppo.json"), str(PLANS / "dqn.json")
    for suffix in (".svg", ".png", ".dot"):
        out = tmp_path / f"diff{suffix}"
        assert cli.main(["diff", a, b, "-o", str(out)]) == 1
        assert f"wrote {out}" in capsys.readouterr().err
        assert out.stat().st_size > 1000
    assert (tmp_path / "diff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "diff.svg").read_text()


@needs_dot
def test_hostile_ids_draw(tmp_path: Path) -> None:
    from test_render import hostile_plan

    compiled = hostile_plan()
    a = PlanView.from_compiled(compiled)
    data = compiled.plan.to_dict()
    first = next(iter(data["nodes"]))
    data["nodes"][first]["params"]["mode"] = "async"
    b = PlanView.from_compiled(analyze(data))
    d = diff_plans(a, b, a_label='a "x" <b>', b_label="b\\")
    assert d.node_status(first) == "changed"
    render_diff(d, tmp_path / "hostile.svg")  # dot accepts what was written


def test_diff_imports_neither_ray_nor_torch(tmp_path: Path) -> None:
    code = (
        "import sys; from plangraph import cli;"
        f"rc = cli.main(['diff', {str(PLANS / 'dqn.py')!r}, {str(PLANS / 'ppo.json')!r},"
        f" '-o', {str(tmp_path / 'd.dot')!r}]);"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch'));"
        "print(rc, heavy)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.stdout.strip().splitlines()[-1] == "1 []", proc.stdout + proc.stderr
