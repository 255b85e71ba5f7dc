"""``plangraph render``: draw a plan (DOT, SVG or PNG), errors marked, without ray or torch."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules
from plangraph.commands.validate import (
    add_config_option,
    add_pass_option,
    analyze_safely,
    check_paths,
    parse_overrides,
    parse_passes,
)

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
        "--profile",
        type=Path,
        metavar="RUN_DIR",
        help="draw the profile of a run (RUN_DIR/profile.json, written by plangraph run) "
        "on the plan: each node's share of wall time, ms per call, calls per iteration, "
        "items/s on the edges (`plangraph profile RUN_DIR` also prints the table)",
    )
    add_config_option(p)
    add_pass_option(p)
    add_import_option(p)
    return p


def _say(msg: str) -> None:
    print(f"plangraph render: {msg}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    # Only the compiler and the renderer: neither imports ray or torch.
    from plangraph.diagram import (
        SUFFIXES,
        DotBinaryMissingError,
        GraphvizPackageMissingError,
        RenderError,
        UnsupportedFormatError,
        render,
        to_dot,
    )

    overrides = parse_overrides(args.config)
    if isinstance(overrides, str):
        _say(f"error: {overrides}")
        return EXIT_USAGE
    disabled = parse_passes(args.no_pass)
    if isinstance(disabled, str):
        _say(f"error: {disabled}")
        return EXIT_USAGE
    problem = import_user_modules(args.imports) or check_paths([args.plan])
    if problem:
        _say(f"error: {problem}")
        return EXIT_USAGE
    out: Path | None = args.output
    if out is not None and out.suffix.lower() not in SUFFIXES:
        _say(f"error: {UnsupportedFormatError(out, SUFFIXES)}")
        return EXIT_USAGE

    profile = None
    if args.profile is not None:
        from plangraph.ir.profile import ProfileError, read_profile

        try:
            profile = read_profile(args.profile)
        except ProfileError as exc:
            _say(f"error: --profile: {exc}")
            return EXIT_USAGE

    compiled = analyze_safely(args.plan, overrides, disable_passes=disabled)
    if compiled is None:
        return EXIT_PLAN_ERRORS
    if profile is not None:
        from plangraph.commands.profile import profile_mismatch

        problem = profile_mismatch(compiled, profile)
        if problem:
            _say(f"error: --profile {args.profile}: {problem}")
            return EXIT_USAGE
        if profile.plan != compiled.plan.name:
            _say(f"note: the profile is of plan {profile.plan!r}, drawn on {compiled.plan.name!r}")

    if out is None:
        sys.stdout.write(to_dot(compiled, rankdir=args.rankdir, profile=profile))
        status = EXIT_OK
    else:
        try:
            render(compiled, out, rankdir=args.rankdir, profile=profile)
            _say(f"wrote {out}")
            status = EXIT_OK
        except (DotBinaryMissingError, GraphvizPackageMissingError) as exc:
            fallback = out.with_suffix(".dot")
            render(compiled, fallback, rankdir=args.rankdir, profile=profile)
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
    n_err, n_warn = len(compiled.errors), len(compiled.warnings)
    if not (n_err or n_warn):
        return
    parts = [f"{n_err} error{'s' * (n_err != 1)}"] if n_err else []
    if n_warn:
        parts.append(f"{n_warn} warning{'s' * (n_warn != 1)}")
    _say(
        f"{plan}: {' and '.join(parts)}, marked in the diagram; details: plangraph validate {plan}"
    )
