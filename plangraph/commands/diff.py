"""``plangraph diff A B``: what changed between two plans, as compiled; without ray or torch.

Exit status as ``diff``: 0 the plans are identical, 1 they differ, 2 trouble (a missing
file, a plan with errors, a corrupt run directory, a diagram that cannot be drawn).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules

EXIT_SAME = 0
EXIT_DIFFERENT = 1
EXIT_TROUBLE = 2


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "diff",
        help="what changed between two plans (or a plan and a run directory)",
        description=(
            "Compile A and B and list what changed: nodes added, removed and re-wired, "
            "params and config with ${config} references resolved and defaults filled in, "
            "resources added, removed and changed. A or B may be a run directory "
            "(runs/NAME/, or one of its checkpoints): its saved plan.json, the plan as that "
            "run compiled it. Exit status: 0 identical, 1 different, 2 trouble."
        ),
    )
    p.add_argument("a", metavar="A", help="plan file (.json or .py) or run directory")
    p.add_argument("b", metavar="B", help="plan file (.json or .py) or run directory")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json (sorted keys, stable order)",
    )
    p.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="OUT",
        help="also draw the diff: OUT.svg, OUT.png (Graphviz dot), OUT.dot or OUT.gv",
    )
    p.add_argument("--rankdir", choices=("TB", "LR"), default="TB", help="diagram direction (TB)")
    add_import_option(p)
    for side in ("a", "b"):
        p.add_argument(
            f"--set-{side}",
            dest=f"set_{side}",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help=f"override a config value of plan {side.upper()} (repeatable; VALUE is "
            f"JSON, else a string), e.g. --set-{side} lr=0.001",
        )
    return p


def _say(msg: str) -> None:
    print(f"plangraph diff: {msg}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    # The compiler and the renderer only: neither imports ray or torch.
    from plangraph.commands.validate import parse_overrides
    from plangraph.compiler.diagnostics import PlanValidationError
    from plangraph.compiler.diff import diff_plans
    from plangraph.compiler.diff_text import format_diff
    from plangraph.compiler.plan_view import load_view
    from plangraph.diagram import SUFFIXES, UnsupportedFormatError
    from plangraph.errors import PlangraphError

    problem = import_user_modules(args.imports)
    if problem is not None:
        _say(f"error: {problem}")
        return EXIT_TROUBLE
    out: Path | None = args.out
    if out is not None and out.suffix.lower() not in SUFFIXES:
        _say(f"error: {UnsupportedFormatError(out, SUFFIXES)}")
        return EXIT_TROUBLE
    views = []
    for path, items in ((args.a, args.set_a), (args.b, args.set_b)):
        overrides = parse_overrides(items)
        if isinstance(overrides, str):
            _say(f"error: {overrides.replace('--set/-c/--config', '--set-a/--set-b')}")
            return EXIT_TROUBLE
        try:
            views.append(load_view(path, overrides))
        except PlanValidationError as exc:
            for d in exc.diagnostics:
                print(d.format(), file=sys.stderr)
            _say(f"error: {path}: not compared: fix the errors above first")
            return EXIT_TROUBLE
        except PlangraphError as exc:
            _say(f"error: {exc}")
            return EXIT_TROUBLE
    diff = diff_plans(views[0], views[1], a_label=args.a, b_label=args.b)
    sys.stdout.write(diff.to_json() if args.format == "json" else format_diff(diff))
    if out is not None and not _draw(diff, out, args.rankdir):
        return EXIT_TROUBLE
    return EXIT_SAME if diff.identical else EXIT_DIFFERENT


def _draw(diff: Any, out: Path, rankdir: str) -> bool:
    from plangraph.diagram import DotBinaryMissingError, GraphvizPackageMissingError, RenderError
    from plangraph.diagram.diff import render_diff

    try:
        render_diff(diff, out, rankdir=rankdir)
    except (DotBinaryMissingError, GraphvizPackageMissingError) as exc:
        fallback = out.with_suffix(".dot")
        render_diff(diff, fallback, rankdir=rankdir)
        _say(f"error: cannot write {out}: {exc}")
        _say(f"wrote {fallback} instead (render it later with: dot -T{out.suffix[1:]} ...)")
        return False
    except (RenderError, OSError) as exc:
        _say(f"error: cannot write {out}: {exc}")
        return False
    _say(f"wrote {out}")
    return True
