#!/usr/bin/env python3
"""Regenerate the plan diagrams under ``docs/diagrams/`` and the site section about them.

For every ``plans/*.json``: ``docs/diagrams/<name>.dot`` (what was drawn) and
``docs/diagrams/<name>.png`` (drawn by Graphviz ``dot``), which each plan's page under
``docs/algorithms/`` shows (``tools/gen_docs.py``); and the site's example of
``plangraph diff`` (``docs/diagrams/diff_a2c__a2c_microbatch.dot`` and ``.png``). The
block of ``docs/guide/commands.md`` between ``<!-- diagrams:begin -->`` and
``<!-- diagrams:end -->`` is rewritten with the style table (from
``plangraph.diagram.style``).

Usage: ``.venv/bin/python tools/render_diagrams.py [--check]``. With ``--check`` nothing
is written; the exit status is 1 if a .dot, a .png or the page's block is out of date
(PNG bytes depend on the Graphviz version and fonts, so a PNG counts as current when the
.dot it was drawn from is).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plangraph.compiler import analyze  # noqa: E402
from plangraph.compiler.diff import diff_plans  # noqa: E402
from plangraph.compiler.plan_view import load_view  # noqa: E402
from plangraph.diagram import CATEGORY_STYLES, RESOURCE_STYLE, render, to_dot  # noqa: E402
from plangraph.diagram.diff import diff_to_dot, render_diff  # noqa: E402
from plangraph.diagram.style import NodeStyle  # noqa: E402

PLANS = ROOT / "plans"
OUT = ROOT / "docs" / "diagrams"
PAGE = ROOT / "docs" / "guide" / "commands.md"
BEGIN, END = "<!-- diagrams:begin -->", "<!-- diagrams:end -->"
DIFF_EXAMPLE = ("a2c", "a2c_microbatch")
"""The site's `plangraph diff` example: plans/a2c.json -> plans/a2c_microbatch.json."""

SHAPE_WORDS = {
    "invhouse": "pentagon pointing down",
    "box": "box",
    "hexagon": "hexagon",
    "cylinder": "cylinder",
}


def _looks(style: NodeStyle) -> str:
    words = SHAPE_WORDS.get(style.shape, style.shape)
    if "rounded" in style.style:
        words = "rounded " + words
    if "diagonals" in style.style:
        words += " with corner ticks"
    if style.peripheries == 2:
        words = "double " + words
    if style.penwidth >= 2:
        words = "bold " + words
    return f"{words}, fill `{style.fill}`"


def page_section() -> str:
    """The markdown between the page's markers (without the markers)."""
    rows = [f"| {cat} | {_looks(st)} |" for cat, st in CATEGORY_STYLES.items()]
    rows.append(f"| resource (`@id`) | {_looks(RESOURCE_STYLE)} |")
    parts = [
        "## render: see the plan before it launches",
        "",
        textwrap.fill(
            "Every plan draws itself from the compiler's typed graph: "
            "`plangraph render PLAN -o plan.svg` (or `.png`, `.dot`; `--rankdir LR`; "
            "`--set key=value` overrides config), `plangraph.render(compiled, path)` and "
            "`plangraph.to_dot(compiled)` in Python. Node labels give the id "
            "(bold), the operator and the params the plan sets, with `${config}` references "
            "resolved; edges carry the inferred item type; resources are cylinders with dashed "
            "read/write edges; `Concurrently` shows its mode, weights and which inputs are "
            "output (grey edges: driven, not output). A plan that fails validation is still "
            "drawn, with each diagnostic's code in red on the node or edge it concerns "
            "(`plangraph render --check` then exits 1). DOT needs nothing else; SVG/PNG need "
            "Graphviz's `dot` (Debian's `graphviz` package, installed by `tools/bootstrap`).",
            width=92,
            break_on_hyphens=False,
        ),
        "",
        "| category | drawn as |",
        "|---|---|",
        *rows,
        "",
        textwrap.fill(
            "Every plan in `plans/` is drawn on its page under Algorithms (regenerate the "
            "drawings with `.venv/bin/python tools/render_diagrams.py`; `--check` reports "
            "stale files).",
            width=92,
            break_on_hyphens=False,
        ),
    ]
    return "\n".join(parts)


def replace_section(page: str, section: str) -> str:
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{PAGE}: markers {BEGIN} ... {END} not found (in that order)")
    return page[: start + len(BEGIN)] + "\n" + section + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale files")
    args = ap.parse_args(argv)
    stale: list[str] = []
    for plan in sorted(PLANS.glob("*.json")):
        compiled = analyze(plan)
        if not compiled.ok:
            print(f"error: {plan.relative_to(ROOT)} does not validate:", file=sys.stderr)
            for d in compiled.diagnostics:
                print(d.format(), file=sys.stderr)
            return 1
        dot_path, png_path = OUT / f"{plan.stem}.dot", OUT / f"{plan.stem}.png"
        dot = to_dot(compiled)
        current = dot_path.exists() and dot_path.read_text(encoding="utf-8") == dot
        if current and png_path.exists():
            continue
        stale += [str(p.relative_to(ROOT)) for p in (dot_path, png_path)]
        if not args.check:
            render(compiled, png_path)  # first: fails cleanly without `dot`, writing nothing
            dot_path.write_text(dot, encoding="utf-8")
    a, b = DIFF_EXAMPLE
    diff = diff_plans(
        load_view(PLANS / f"{a}.json"),
        load_view(PLANS / f"{b}.json"),
        a_label=f"plans/{a}.json",
        b_label=f"plans/{b}.json",
    )
    dot_path, png_path = OUT / f"diff_{a}__{b}.dot", OUT / f"diff_{a}__{b}.png"
    dot = diff_to_dot(diff)
    if not (
        dot_path.exists() and dot_path.read_text(encoding="utf-8") == dot and png_path.exists()
    ):
        stale += [str(p.relative_to(ROOT)) for p in (dot_path, png_path)]
        if not args.check:
            render_diff(diff, png_path)
            dot_path.write_text(dot, encoding="utf-8")
    page = PAGE.read_text(encoding="utf-8")
    updated = replace_section(page, page_section())
    if updated != page:
        stale.append(f"{PAGE.relative_to(ROOT)} (diagrams section)")
        if not args.check:
            PAGE.write_text(updated, encoding="utf-8")
    for item in stale:
        print(f"{'stale' if args.check else 'wrote'}: {item}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
