"""``plangraph render``: draw a plan (DOT, SVG or PNG), errors marked, without ray or torch."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_PLAN_ERRORS = 1
EXIT_USAGE = 2
EXIT_CANNOT_DRAW = 3


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "render",
        help="draw a plan as DOT, SVG or PNG (errors marked in red)",
        description=(
            "Compile PLAN and draw its dataflow: operators styled by category, port types on "
            "the edges, resources as cylinders with dashed read/write edges. A plan that fails "
            "validation is still drawn, with the failing nodes and edges in red. The format "
            "comes from the suffix of -o: .dot/.gv need nothing else, .svg/.png need Graphviz's "
            "`dot` binary (Debian/Ubuntu: sudo apt-get install graphviz). Without -o the DOT "
            "text goes to stdout. Exit status: 0 drawn, 1 drawn but --check found errors, "
            "2 usage error, 3 could not draw the requested format (the .dot is written instead)."
        ),
    )
    p.add_argument("plan", help="plan file (.json or .py)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="output file: OUT.dot, OUT.gv, OUT.svg or OUT.png (default: DOT on stdout)",
    )
    p.add_argument(
        "--rankdir",
        choices=("TB", "LR"),
        default="TB",
        help="layout direction: TB top to bottom (default), LR left to right",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="exit with status 1 after drawing when the plan has errors",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a plan config value (repeatable), e.g. --set train_batch_size=4000",
    )
    return p


def _say(msg: str) -> None:
    print(f"plangraph render: {msg}", file=sys.stderr)


def _parse_overrides(items: list[str]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            _say(f"error: --set {item!r}: expected KEY=VALUE, e.g. --set train_batch_size=4000")
            return None
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def run(args: argparse.Namespace) -> int:
    # Only the compiler and the renderer: neither imports ray or torch.
    from plangraph.compiler import analyze
    from plangraph.render import (
        SUFFIXES,
        DotBinaryMissingError,
        GraphvizPackageMissingError,
        RenderError,
        UnsupportedFormatError,
        render,
        to_dot,
    )

    overrides = _parse_overrides(args.overrides)
    if overrides is None:
        return EXIT_USAGE
    out: Path | None = args.output
    if out is not None and out.suffix.lower() not in SUFFIXES:
        _say(f"error: {UnsupportedFormatError(out, SUFFIXES)}")
        return EXIT_USAGE

    compiled = analyze(args.plan, config=overrides or None)

    if out is None:
        sys.stdout.write(to_dot(compiled, rankdir=args.rankdir))
        status = EXIT_OK
    else:
        try:
            render(compiled, out, rankdir=args.rankdir)
            _say(f"wrote {out}")
            status = EXIT_OK
        except (DotBinaryMissingError, GraphvizPackageMissingError) as exc:
            fallback = out.with_suffix(".dot")
            render(compiled, fallback, rankdir=args.rankdir)
            _say(f"error: cannot write {out}: {exc}")
            _say(f"wrote {fallback} instead (render it later with: dot -T{out.suffix[1:]} ...)")
            status = EXIT_CANNOT_DRAW
        except RenderError as exc:
            _say(f"error: cannot write {out}: {exc}")
            status = EXIT_CANNOT_DRAW

    _report_diagnostics(compiled, args.plan)
    if args.check and not compiled.ok and status == EXIT_OK:
        return EXIT_PLAN_ERRORS
    return status


def _report_diagnostics(compiled: Any, plan: str) -> None:
    errors = [d for d in compiled.diagnostics if getattr(d, "severity", "error") == "error"]
    others = len(compiled.diagnostics) - len(errors)
    if not compiled.diagnostics:
        return
    parts = [f"{len(errors)} error{'s' * (len(errors) != 1)}"]
    if others:
        parts.append(f"{others} warning{'s' * (others != 1)}")
    _say(
        f"{plan}: {' and '.join(parts)}, marked in the diagram; details: plangraph validate {plan}"
    )
