"""Profiles: every second of the flow attributed to one node, phases, profile.json, the
profile drawn on the plan (DOT snapshot) and ``plangraph profile`` on a real PPO run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plangraph import cli
from plangraph.compiler import analyze
from plangraph.diagram import to_dot
from plangraph.diagram.heat import heat_color
from plangraph.flow import profile as profile_mod
from plangraph.flow.local import LocalIterator
from plangraph.flow.metrics import MetricsContext, phase
from plangraph.flow.sentinel import NOT_READY
from plangraph.ir.profile import ProfileError, RunProfile, read_profile

ROOT = Path(__file__).resolve().parent.parent
FIXED = ROOT / "tests" / "fixtures" / "profiles" / "ppo.profile.json"
SNAPSHOT = ROOT / "tests" / "snapshots" / "profile" / "ppo.dot"
UPDATE = os.environ.get("PLANGRAPH_UPDATE_SNAPSHOTS") == "1"


class Clock:
    """A clock that only moves when an operator says so (tests never read wall time)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(profile_mod, "_clock", c)
    return c


def _flow(clock: Clock) -> tuple[LocalIterator[Any], MetricsContext]:
    """source (3 s per item, 1 s of it "sampling") -> double (2 s, "learning") -> sink."""

    def source() -> Iterator[Any]:
        for i in range(3):
            clock.t += 2.0
            with phase("sampling"):
                clock.t += 1.0
            yield i
            yield NOT_READY  # costs nothing, is a pull, not an item

    def double(x: int) -> int:
        with phase("learning"):
            clock.t += 2.0
        return 2 * x

    def sink(x: int) -> int:
        clock.t += 0.5
        return x

    src = LocalIterator.from_iterable(source, name="source").profiled("source")
    mid = src.for_each(double).profiled("double")
    out = mid.for_each(sink).profiled("sink")
    ctx = MetricsContext()
    out.shared_metrics.set(ctx)
    return out, ctx


def test_each_second_goes_to_the_node_whose_code_ran(clock: Clock) -> None:
    out, ctx = _flow(clock)
    items = [x for x in out if x is not NOT_READY]
    assert items == [0, 2, 4]
    prof = ctx.profile
    got = {n: (t.seconds, t.items, t.pulls) for n, t in prof.nodes.items()}
    # The sink's for_each passes NOT_READY through, so every node sees 6 pulls, 3 items.
    assert got == {"sink": (1.5, 3, 6), "double": (6.0, 3, 6), "source": (9.0, 3, 6)}
    assert prof.wall_s == 16.5 == sum(t.seconds for t in prof.nodes.values())
    assert prof.phases == {"sampling": 3.0, "learning": 6.0}
    assert prof.nodes["source"].phases == {"sampling": 3.0}
    assert prof.nodes["double"].phases == {"learning": 6.0}
    # Timers: the node's own seconds per item it emitted.
    assert ctx.timers["source"].mean == 3.0
    assert ctx.timers["double"].mean == 2.0
    assert ctx.timers["sink"].mean == 0.5


def test_a_phase_never_counts_the_nodes_pulled_inside_it(clock: Clock) -> None:
    """A node that pulls its input inside a phase: the input's time stays the input's."""
    inner = LocalIterator.from_iterable([1, 2], name="inner").for_each(
        lambda x: (setattr(clock, "t", clock.t + 4.0), x)[1]
    )
    inner = inner.profiled("inner")

    def base(timeout: float | None) -> Iterator[int]:
        it = iter(inner)
        while True:
            with phase("idle"):
                clock.t += 1.0
                item = next(it, None)
            if item is None:
                return
            yield item

    outer = LocalIterator(base, shared_metrics=inner.shared_metrics, name="outer")
    outer = outer.profiled("outer")
    ctx = MetricsContext()
    outer.shared_metrics.set(ctx)
    assert list(outer) == [1, 2]
    prof = ctx.profile
    assert prof.nodes["inner"].seconds == 8.0
    assert prof.nodes["outer"].seconds == 3.0  # 3 phase blocks of 1 s (the last finds no item)
    assert prof.phases == {"idle": 3.0}
    assert prof.wall_s == 11.0


def test_phase_outside_a_pull_is_a_no_op_and_names_are_checked() -> None:
    with phase("learning"):
        pass
    with pytest.raises(ValueError, match="unknown phase 'thinking'"):
        with phase("thinking"):
            pass


def test_restore_resets_the_profile(clock: Clock) -> None:
    out, ctx = _flow(clock)
    list(out)
    ctx.restore(ctx.save())
    assert ctx.profile.nodes == {} and ctx.profile.wall_s == 0.0


# -- profile.json -------------------------------------------------------------------------


def test_fixed_profile_reads_and_its_table_adds_up() -> None:
    prof = read_profile(FIXED.parent / FIXED.name)
    seconds = prof.phase_seconds()
    assert list(seconds) == ["sampling", "object_store", "learning", "broadcast", "idle", "other"]
    assert sum(seconds.values()) == pytest.approx(prof.wall_s)
    table = prof.table()
    assert table.splitlines()[0].startswith("where the time goes: plan ppo, iterations 1-6")
    assert table.splitlines()[-1].split()[0] == "total"
    assert table.splitlines()[-1].split()[-1] == "100.0"
    assert RunProfile.model_validate_json(prof.to_json()) == prof


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no profile.json (plangraph run writes it"),
        ("{", "not valid JSON"),
        ('{"plan": "p", "iterations": 1, "first_iteration": 1, "wall_s": NaN}', "not valid JSON"),
        ('{"plan": "p", "iterations": 1, "first_iteration": 1, "wall_s": -1}', "/wall_s:"),
        (
            '{"plan": "p", "iterations": 1, "first_iteration": 1, "wall_s": 1, "extra": 1}',
            "/extra: Extra inputs are not permitted",
        ),
        (
            '{"plan": "p", "iterations": 1, "first_iteration": 1, "wall_s": 1, '
            '"phases": {"sampling": -2}}',
            "/phases/sampling:",
        ),
    ],
)
def test_broken_profile_files_are_one_line_errors(
    tmp_path: Path, content: str | None, message: str
) -> None:
    if content is not None:
        (tmp_path / "profile.json").write_text(content)
    with pytest.raises(ProfileError, match=None) as info:
        read_profile(tmp_path)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# -- the profile drawn on the plan ----------------------------------------------------------


def test_profile_dot_matches_snapshot() -> None:
    dot = to_dot(analyze(ROOT / "plans" / "ppo.json"), profile=read_profile(FIXED))
    if UPDATE:
        SNAPSHOT.write_text(dot, encoding="utf-8")
    assert dot == SNAPSHOT.read_text(encoding="utf-8"), (
        "DOT of plans/ppo.json with tests/fixtures/profiles/ppo.profile.json changed; if "
        "intended, regenerate with PLANGRAPH_UPDATE_SNAPSHOTS=1 pytest tests/test_profile.py"
    )
    prof = read_profile(FIXED)
    share = prof.share("train")
    train = next(ln for ln in dot.splitlines() if ln.strip().startswith('"train" ['))
    assert f'fillcolor="{heat_color(share)}"' in train
    assert f"{100 * share:.1f}% of wall time" in train and "1.0 calls/iter" in train


def test_heat_colours_run_from_white_to_red() -> None:
    assert heat_color(0.0) == "#fff7ec"
    assert heat_color(1.0) == "#e34a33"
    assert heat_color(-1) == heat_color(0.0) and heat_color(2) == heat_color(1.0)


def test_render_refuses_a_profile_of_another_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(FIXED.read_text())
    data["nodes"] = {"elsewhere": data["nodes"]["train"]}
    (tmp_path / "profile.json").write_text(json.dumps(data))
    rc = cli.main(["render", str(ROOT / "plans" / "a2c.json"), "--profile", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "has none of the nodes of plan 'a2c'" in err


# -- a real run, profiled -----------------------------------------------------------------


def _plangraph(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plangraph", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_real_ppo_run_profiles_every_node(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    ran = _plangraph(
        "run", str(ROOT / "plans" / "ppo.json"), "--max-iterations", "3", "--out",
        str(run_dir), "--no-progress", "--no-tensorboard", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    prof = read_profile(run_dir)
    assert (prof.plan, prof.iterations, prof.first_iteration) == ("ppo", 3, 1)
    # One bulk-sync round (2 workers x 8 envs x 64 steps) is one train batch: each node
    # emits one item per iteration.
    assert {n: p.items for n, p in prof.nodes.items()} == {
        "rollouts": 3, "concat": 3, "train": 3, "metrics": 3,
    }  # fmt: skip
    assert sum(p.seconds for p in prof.nodes.values()) == pytest.approx(prof.wall_s)
    for name in ("sampling", "object_store", "learning", "broadcast"):
        assert prof.phases[name] > 0, name
    assert prof.phases.get("idle", 0.0) == 0.0
    results = [json.loads(x) for x in (run_dir / "result.jsonl").read_text().splitlines()]
    assert set(results[-1]["timers"]) == {"rollouts", "concat", "train", "metrics"}

    shown = _plangraph("profile", str(run_dir), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("where the time goes: plan ppo, iterations 1-3, ")
    labels = [ln[2:48].strip() for ln in lines[2:]]
    assert labels == [
        "sampling (waiting on rollout workers)",
        "waiting on the object store (fetching results)",
        "learning (policy updates in the driver)",
        "broadcasting weights to the workers",
        "waiting on a learner thread or local queue",
        "other driver work",
        "total",
    ]
    assert (run_dir / "profile.svg").read_text().lstrip().startswith("<?xml")
    assert f"wrote {run_dir / 'profile.svg'}" in shown.stderr

    png = tmp_path / "ppo.png"
    drawn = _plangraph(
        "render", str(ROOT / "plans" / "ppo.json"), "--profile", str(run_dir), "-o", str(png),
        cwd=tmp_path,
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
