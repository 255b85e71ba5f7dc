"""SVG and PNG through Graphviz's real ``dot`` binary, and the errors when it is missing.

Tests that draw images skip only when ``dot`` is not on PATH (``tools/bootstrap`` installs
Debian's ``graphviz``, so CI runs them); the missing-binary and missing-package tests
always run, by hiding the binary or the package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_render import HOSTILE, PLANS, broken_a2c, hostile_plan, seed

from plangraph.compiler import analyze
from plangraph.diagram import (
    DotBinaryMissingError,
    GraphvizPackageMissingError,
    UnsupportedFormatError,
    render,
    to_dot,
    to_svg,
)
from plangraph.diagram.style import ERROR_COLOR

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz `dot` binary not on PATH (Debian/Ubuntu: apt-get install graphviz; "
    "tools/bootstrap installs it)",
)
SVG = "{http://www.w3.org/2000/svg}"
ALL_PLANS = sorted(PLANS.glob("*.json")) + sorted(PLANS.glob("*.py"))


def svg_groups(svg: bytes | str, cls: str) -> dict[str, ET.Element]:
    """``<g class=cls>`` elements of a dot SVG, keyed by their ``<title>`` text."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == cls:
            title = g.find(f"{SVG}title")
            assert title is not None and title.text is not None
            out[title.text] = g
    return out


def texts(g: ET.Element) -> list[str]:
    return [t.text or "" for t in g.iter(f"{SVG}text")]


def strokes(g: ET.Element) -> set[str]:
    return {e.get("stroke", "") for e in g.iter() if e.get("stroke")}


def test_plans_directory_is_not_empty() -> None:
    assert {p.stem for p in ALL_PLANS} >= {"a2c", "a2c_microbatch", "dqn"}


@needs_dot
@pytest.mark.parametrize("plan", ALL_PLANS, ids=lambda p: p.name)
def test_every_plan_renders_to_dot_svg_and_png(plan: Path, tmp_path: Path) -> None:
    compiled = analyze(plan)
    assert compiled.ok, [d.format() for d in compiled.diagnostics]
    dot_file = render(compiled, tmp_path / "plan.dot")
    svg_file = render(compiled, tmp_path / "plan.svg")
    png_file = render(compiled, tmp_path / "plan.png")
    assert dot_file.read_text(encoding="utf-8") == to_dot(compiled)
    nodes = svg_groups(svg_file.read_bytes(), "node")
    assert set(compiled.nodes) | {f"@{r}" for r in compiled.resources} <= set(nodes)
    assert png_file.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_file.stat().st_size > 10_000
    # dot accepts the text without a single warning (bad HTML labels only warn).
    proc = subprocess.run(
        ["dot", "-Tsvg", str(dot_file)], capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@needs_dot
def test_broken_plan_svg_marks_the_right_node(tmp_path: Path) -> None:
    svg = render(broken_a2c(), tmp_path / "broken.svg").read_bytes()
    nodes = svg_groups(svg, "node")
    assert ERROR_COLOR in strokes(nodes["concat"])
    assert "PG140" in texts(nodes["concat"])
    for clean in ("rollouts", "metrics"):
        assert ERROR_COLOR not in strokes(nodes[clean]), clean
        assert not any(t.startswith("PG") for t in texts(nodes[clean])), clean
    edges = svg_groups(svg, "edge")
    assert "PG130" in texts(edges["concat->train"])
    assert ERROR_COLOR in strokes(edges["concat->train"])


@needs_dot
def test_hostile_ids_pass_through_dot_as_written(tmp_path: Path) -> None:
    dot_file = render(hostile_plan(), tmp_path / "hostile.dot")
    proc = subprocess.run(
        ["dot", "-Tjson0", str(dot_file)], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stderr == ""
    graph = json.loads(proc.stdout)
    names = [o["name"] for o in graph["objects"]]
    # DOT has no escape for a lone backslash, so `x\` is named `x\\` inside dot; its label
    # (checked below) still shows `x\`. Every other id is its own DOT name.
    for nid in HOSTILE:
        assert (nid if nid != "x\\" else "x\\\\") in names, nid
    pairs = {(names[e["tail"]], names[e["head"]]) for e in graph["edges"]}
    assert ("a:b", "graph") in pairs and ("graph", '"x"') in pairs  # not read as node:port
    svg = render(hostile_plan(), tmp_path / "hostile.svg").read_bytes()
    shown = {t for g in svg_groups(svg, "node").values() for t in texts(g)}
    assert set(HOSTILE) <= shown


@needs_dot
def test_the_top_level_render_draws_what_the_diagram_layer_draws(tmp_path: Path) -> None:
    import plangraph

    compiled = seed("a2c")
    out = plangraph.render(compiled, tmp_path / "a2c.svg")
    svg = out.read_text(encoding="utf-8")
    assert "<svg" in svg and "concat" in svg
    assert svg == to_svg(compiled)
    assert plangraph.to_dot(compiled, rankdir="LR") == to_dot(compiled, rankdir="LR")


def test_missing_dot_binary_is_reported_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    compiled = seed("a2c")
    with pytest.raises(DotBinaryMissingError) as exc:
        render(compiled, tmp_path / "a2c.svg")
    assert "`dot` binary is not on PATH" in str(exc.value)
    assert "sudo apt-get install graphviz" in str(exc.value)
    assert not (tmp_path / "a2c.svg").exists()
    assert render(compiled, tmp_path / "a2c.dot").read_text(encoding="utf-8") == to_dot(compiled)
    with pytest.raises(DotBinaryMissingError):
        to_svg(compiled)


def test_missing_python_package_is_a_different_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # makes `import graphviz` fail
    compiled = seed("a2c")
    with pytest.raises(GraphvizPackageMissingError) as exc:
        render(compiled, tmp_path / "a2c.png")
    assert "Python package `graphviz` is not installed" in str(exc.value)
    assert "binary" not in str(exc.value)
    assert render(compiled, tmp_path / "a2c.gv").read_text(encoding="utf-8") == to_dot(compiled)


def test_unsupported_suffix(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match=r"\.jpg.*\.dot, \.gv, \.svg, \.png"):
        render(seed("a2c"), tmp_path / "a2c.jpg")
