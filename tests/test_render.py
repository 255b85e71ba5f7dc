"""The DOT a plan renders to: labels, styles, resources, errors, hostile ids, snapshots.

Everything here needs neither the ``dot`` binary nor Ray; ``test_render_images.py`` runs
``dot``. Snapshots of the seed plans live in ``tests/snapshots/render/``; after an
intended change regenerate them with ``PLANGRAPH_UPDATE_SNAPSHOTS=1 pytest
tests/test_render.py`` and review the diff.
"""

from __future__ import annotations

import itertools
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from plangraph.compiler import CompiledPlan, analyze, load_plan
from plangraph.diagram import CATEGORY_STYLES, to_dot
from plangraph.diagram.dotlang import escape_html, quote
from plangraph.diagram.style import ERROR_COLOR, PASSIVE_EDGE
from plangraph.ops import all_ops
from plangraph.ops.registry import CATEGORIES

ROOT = Path(__file__).resolve().parents[1]
PLANS = ROOT / "plans"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "render"
SEED_PLANS = ("ppo", "a2c", "a2c_microbatch", "dqn", "impala", "appo", "a3c")
UPDATE = os.environ.get("PLANGRAPH_UPDATE_SNAPSHOTS") == "1"


def node_stmt(dot: str, node_id: str) -> str:
    """The one DOT statement that declares ``node_id`` (its attributes included)."""
    hits = [ln for ln in dot.splitlines() if ln.strip().startswith(f"{quote(node_id)} [")]
    assert len(hits) == 1, f"expected one statement for node {node_id!r}, got {hits}"
    return hits[0]


def edge_stmt(dot: str, tail: str, head: str) -> str:
    prefix = f"{quote(tail)} -> {quote(head)} ["
    hits = [ln for ln in dot.splitlines() if ln.strip().startswith(prefix)]
    assert len(hits) == 1, f"expected one edge {tail!r} -> {head!r}, got {hits}"
    return hits[0]


def seed(name: str, config: dict[str, Any] | None = None) -> CompiledPlan:
    compiled = analyze(PLANS / f"{name}.json", config=config)
    assert compiled.ok, [d.format() for d in compiled.diagnostics]
    return compiled


def broken_a2c() -> CompiledPlan:
    """a2c with two errors: an invalid param on ``concat`` and a type error on an edge."""
    data = load_plan(PLANS / "a2c.json").to_dict()
    data["nodes"]["concat"]["params"]["min_batch_size"] = 0  # PG140 on node concat
    data["nodes"]["train"]["op"] = "AverageGradients"  # SampleBatch -> list[GradInfo]: PG130
    data["nodes"]["train"]["params"] = {}
    compiled = analyze(data)
    codes = {(d.code, d.node) for d in compiled.diagnostics}
    assert ("PG140", "concat") in codes and ("PG130", "train") in codes, codes
    return compiled


@pytest.mark.parametrize("name", SEED_PLANS)
def test_seed_plan_dot_matches_snapshot(name: str) -> None:
    dot = to_dot(seed(name))
    snap = SNAPSHOTS / f"{name}.dot"
    if UPDATE:
        snap.parent.mkdir(parents=True, exist_ok=True)
        snap.write_text(dot, encoding="utf-8")
    assert snap.exists(), f"no snapshot {snap}; create it with PLANGRAPH_UPDATE_SNAPSHOTS=1"
    assert dot == snap.read_text(encoding="utf-8"), (
        f"DOT of plans/{name}.json changed; if intended, regenerate with "
        f"PLANGRAPH_UPDATE_SNAPSHOTS=1 pytest tests/test_render.py and review the diff"
    )


def test_python_and_json_forms_draw_the_same() -> None:
    for name in SEED_PLANS:
        assert to_dot(analyze(PLANS / f"{name}.py")) == to_dot(seed(name)), name


def test_dot_is_deterministic_across_processes() -> None:
    """Same DOT in a fresh interpreter with another hash seed (no set/dict-order leaks)."""
    here = to_dot(seed("dqn"))
    code = (
        "import sys; from plangraph.compiler import analyze; from plangraph.diagram import to_dot;"
        f"sys.stdout.write(to_dot(analyze({str(PLANS / 'dqn.json')!r})))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    ).stdout
    assert other == here


def test_style_table_covers_every_category_and_registered_op() -> None:
    assert tuple(CATEGORY_STYLES) == CATEGORIES
    for name, sig in all_ops().items():
        assert sig.category in CATEGORY_STYLES, name
    shapes = {(s.shape, s.style, s.peripheries) for s in CATEGORY_STYLES.values()}
    fills = {s.fill for s in CATEGORY_STYLES.values()}
    assert len(shapes) == len(fills) == len(CATEGORY_STYLES), "categories must look distinct"


def test_nodes_are_styled_by_category_with_a_legend() -> None:
    dot = to_dot(seed("dqn"))
    for nid, cat in [
        ("rollouts", "source"),
        ("store", "replay"),
        ("train", "train"),
        ("concurrently", "merge"),
        ("metrics", "sink"),
    ]:
        style = CATEGORY_STYLES[cat]
        stmt = node_stmt(dot, nid)
        assert f'shape="{style.shape}"' in stmt and f'fillcolor="{style.fill}"' in stmt, stmt
        legend = node_stmt(dot, f"legend/{cat}")
        assert f'shape="{style.shape}"' in legend and f'fillcolor="{style.fill}"' in legend
    assert "legend/combine" not in dot  # only categories the plan uses
    assert 'subgraph "cluster_legend"' in dot


def test_labels_show_bold_id_op_and_resolved_config() -> None:
    stmt = node_stmt(to_dot(seed("a2c")), "concat")
    assert "<B>concat</B>" in stmt and "ConcatBatches" in stmt
    assert "min_batch_size = 1024" in stmt and "(${train_batch_size})" in stmt
    overridden = node_stmt(to_dot(seed("a2c", config={"train_batch_size": 1000})), "concat")
    assert "min_batch_size = 1000" in overridden


def test_edges_carry_inferred_port_types() -> None:
    dot = to_dot(seed("a2c_microbatch"))
    assert "label=<SampleBatch>" in edge_stmt(dot, "concat", "grads")
    assert "label=<GradInfo>" in edge_stmt(dot, "grads", "batch")
    assert "label=<list[GradInfo]>" in edge_stmt(dot, "batch", "average")
    assert "label=<TrainInfo>" in edge_stmt(dot, "apply", "metrics")
    assert "n = 2" in node_stmt(dot, "batch")  # ceil(1024 / 512), resolved


def test_resources_are_cylinders_with_dashed_read_write_edges() -> None:
    dot = to_dot(seed("dqn"))
    for rid, kind in [("workers", "WorkerSet"), ("replay", "ReplayBuffer")]:
        stmt = node_stmt(dot, f"@{rid}")
        assert 'shape="cylinder"' in stmt and kind in stmt, stmt
    writes = edge_stmt(dot, "store", "@replay")
    reads = edge_stmt(dot, "@replay", "replay_batches")
    assert 'style="dashed"' in writes and "label=<writes>" in writes
    assert 'style="dashed"' in reads and "label=<reads>" in reads
    assert "capacity = 100000" in node_stmt(dot, "@replay")
    # The learner writes the weights its rollouts read: that edge must not move ranks.
    assert "constraint=false" in edge_stmt(dot, "train", "@workers")
    assert "constraint=false" not in edge_stmt(dot, "@workers", "rollouts")


def test_concurrently_shows_mode_weights_and_output_indexes() -> None:
    dot = to_dot(seed("dqn"))
    stmt = node_stmt(dot, "concurrently")
    for text in ("mode = round_robin", "output_indexes = [1]", "weights = [1, 16]"):
        assert text in stmt, stmt
    driven = edge_stmt(dot, "store", "concurrently")
    assert "input 0 \u00b7 weight 1 \u00b7 driven, not output" in driven
    assert f'color="{PASSIVE_EDGE["color"]}"' in driven
    emitted = edge_stmt(dot, "target", "concurrently")
    assert "input 1 \u00b7 weight 16 \u00b7 output" in emitted


def test_broken_plan_marks_the_failing_node_and_edge() -> None:
    compiled = broken_a2c()
    dot = to_dot(compiled)
    concat = node_stmt(dot, "concat")
    assert f'color="{ERROR_COLOR}"' in concat and "<B>PG140</B>" in concat
    edge = edge_stmt(dot, "concat", "train")
    assert f'color="{ERROR_COLOR}"' in edge and "<B>PG130</B>" in edge
    for clean in ("rollouts", "metrics"):
        stmt = node_stmt(dot, clean)
        assert ERROR_COLOR not in stmt and "PG1" not in stmt, stmt
    assert "PG140" not in node_stmt(dot, "train") and "PG130" not in concat
    assert re.search(r"\d+ errors? \(does not validate\)", dot)


def test_unknown_inputs_and_resources_get_red_placeholders() -> None:
    data = load_plan(PLANS / "dqn.json").to_dict()
    data["nodes"]["metrics"]["inputs"] = ["concurently"]
    data["nodes"]["store"]["params"]["buffer"] = "@replai"
    dot = to_dot(analyze(data))
    assert "no such node" in node_stmt(dot, "concurently")
    assert "<B>PG111</B>" in edge_stmt(dot, "concurently", "metrics")
    assert "not declared" in node_stmt(dot, "@replai")
    assert "<B>PG112</B>" in node_stmt(dot, "store")
    assert f'color="{ERROR_COLOR}"' in edge_stmt(dot, "store", "@replai")


HOSTILE = ("a:b", "graph", '"x"', "\u00fc", "node", "edge", "subgraph", "a b", "x\\", "<b>&")


def hostile_plan() -> CompiledPlan:
    """A chain through every hostile id (the compiler flags the ids; the drawing must not
    break on them)."""
    ids = list(HOSTILE)
    nodes: dict[str, Any] = {ids[0]: {"op": "ParallelRollouts"}}
    for prev, nid in itertools.pairwise(ids):
        nodes[nid] = {"op": "Duplicate", "inputs": [prev]}
    nodes["metrics"] = {"op": "StandardMetricsReporting", "inputs": [ids[-1]]}
    return analyze(
        {
            "name": 'hostile "plan"',
            "resources": {"workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "a2c"}}}},
            "nodes": nodes,
            "output": "metrics",
        }
    )


def test_hostile_ids_are_quoted_and_shown_as_written() -> None:
    compiled = hostile_plan()
    assert list(compiled.plan.nodes)[: len(HOSTILE)] == list(HOSTILE)
    dot = to_dot(compiled)
    for nid in HOSTILE:
        stmt = node_stmt(dot, nid)
        assert f"<B>{escape_html(nid)}</B>" in stmt
    assert edge_stmt(dot, "a:b", "graph").startswith('  "a:b" -> "graph" [')
    assert 'digraph "hostile \\"plan\\"" {' in dot


def test_quote_and_escape_rules() -> None:
    assert quote("a:b") == '"a:b"'
    assert quote("graph") == '"graph"'
    assert quote('"x"') == '"\\"x\\""'
    assert quote("x\\") == '"x\\\\"'
    assert quote("two\nlines") == '"two\\nlines"'
    assert escape_html('<b> & "q"') == "&lt;b&gt; &amp; &quot;q&quot;"
    assert escape_html("bell\x07") == "bell\ufffd"


def test_rankdir() -> None:
    assert 'rankdir="LR"' in to_dot(seed("a2c"), rankdir="LR")
    with pytest.raises(ValueError, match="rankdir must be one of TB, LR"):
        to_dot(seed("a2c"), rankdir="BT")


def test_the_top_level_to_dot_is_the_diagram_layers() -> None:
    import plangraph

    compiled = seed("a2c")
    assert plangraph.to_dot(compiled) == to_dot(compiled)
    assert plangraph.to_dot(compiled, rankdir="LR") == to_dot(compiled, rankdir="LR")


def test_diagrams_and_their_docs_section_are_current() -> None:
    """docs/diagrams/*.dot and the block of docs/guide/commands.md match the plans (no `dot`
    needed)."""
    tool = runpy.run_path(str(ROOT / "tools" / "render_diagrams.py"), run_name="render_diagrams")
    assert tool["main"](["--check"]) == 0, (
        "diagrams or their docs section are stale: run .venv/bin/python tools/render_diagrams.py"
    )
