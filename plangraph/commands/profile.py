"""``plangraph profile RUN_DIR``: where a run's time went, as a table and on its diagram.

Reads ``RUN_DIR/profile.json`` (written by ``plangraph run``) and the plan the run built
(``RUN_DIR/plan.source.json`` with the ``--set`` overrides of ``RUN_DIR/run.json``), prints
one table (seconds and % per phase: sampling, waiting on the object store, learning,
broadcasting weights, waiting on a learner thread, other driver work) and draws the plan
with each node's share of wall time (``RUN_DIR/profile.svg`` unless ``-o`` says
otherwise). Imports neither ray nor torch.

Exit status: 0 done, 2 the run directory lacks or has a broken profile/plan/run.json,
3 the drawing could not be made in the requested format (the .dot is written instead).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CANNOT_DRAW = 3


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "profile",
        help="where a run's time went: a table, and the plan drawn with it",
        description=(
            "Print where the wall time of the run in RUN_DIR went (sampling, waiting on the "
            "object store, learning, broadcasting weights, waiting on a learner thread, other "
            "driver work) and draw the run's plan with each node's share of it (heat colour, "
            "ms per call, calls per iteration) and each edge's items per second."
        ),
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a `plangraph run` directory")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT",
        help="drawing: OUT.svg, OUT.png, OUT.dot or OUT.gv (default: RUN_DIR/profile.svg)",
    )
    p.add_argument("--rankdir", choices=("TB", "LR"), default="TB", help="layout direction")
    p.add_argument("--no-draw", action="store_true", help="only print the table")
    # The run's plan is compiled to draw it: a user's operators must be registered.
    add_import_option(p)
    return p


def _say(msg: str) -> None:
    print(f"plangraph profile: {msg}", file=sys.stderr)


def load_run_plan(run_dir: Path) -> Any:
    """The compiled plan a run built: ``plan.source.json`` with ``run.json``'s overrides.

    Raises:
        PlangraphError: a missing or broken ``run.json`` or ``plan.source.json`` (one line).
    """
    from plangraph.commands.run_args import PLAN_SNAPSHOT_FILE, read_run_args
    from plangraph.compiler import analyze
    from plangraph.errors import CheckpointError

    source = run_dir / PLAN_SNAPSHOT_FILE
    if not source.is_file():
        raise CheckpointError(f"{run_dir}: no {PLAN_SNAPSHOT_FILE} (not a plangraph run directory)")
    overrides = read_run_args(run_dir).overrides
    return analyze(source, config=overrides, override_syntax="cli")


def draw(compiled: Any, profile: Any, out: Path, rankdir: str) -> int:
    """Draw ``compiled`` with ``profile`` to ``out``; an exit code (3: .dot written instead)."""
    from plangraph.diagram import (
        SUFFIXES,
        DotBinaryMissingError,
        GraphvizPackageMissingError,
        RenderError,
        UnsupportedFormatError,
        render,
    )

    if out.suffix.lower() not in SUFFIXES:
        _say(f"error: {UnsupportedFormatError(out, SUFFIXES)}")
        return EXIT_USAGE
    try:
        render(compiled, out, rankdir=rankdir, profile=profile)
    except (DotBinaryMissingError, GraphvizPackageMissingError) as exc:
        fallback = out.with_suffix(".dot")
        render(compiled, fallback, rankdir=rankdir, profile=profile)
        _say(f"error: cannot write {out}: {exc}; wrote {fallback} instead")
        return EXIT_CANNOT_DRAW
    except RenderError as exc:
        _say(f"error: cannot write {out}: {exc}")
        return EXIT_CANNOT_DRAW
    _say(f"wrote {out}")
    return EXIT_OK


def profile_mismatch(compiled: Any, profile: Any) -> str | None:
    """Why ``profile`` cannot be drawn on ``compiled`` (no node in common), else None."""
    if profile.nodes and not set(profile.nodes) & set(compiled.nodes):
        return (
            f"the profile (of plan {profile.plan!r}: nodes {', '.join(sorted(profile.nodes))}) "
            f"has none of the nodes of plan {compiled.plan.name!r}"
        )
    return None


def run(args: argparse.Namespace) -> int:
    from plangraph.errors import PlangraphError
    from plangraph.ir.profile import ProfileError, read_profile

    run_dir: Path = args.run_dir
    problem = import_user_modules(args.imports)
    if problem is not None:
        _say(f"error: {problem}")
        return EXIT_USAGE
    if not run_dir.is_dir():
        _say(f"error: {run_dir}: not a directory (give a `plangraph run --out` directory)")
        return EXIT_USAGE
    try:
        profile = read_profile(run_dir)
    except ProfileError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    sys.stdout.write(profile.table())
    if args.no_draw:
        return EXIT_OK
    try:
        compiled = load_run_plan(run_dir)
    except PlangraphError as exc:
        _say(f"error: {exc}")
        return EXIT_USAGE
    problem = profile_mismatch(compiled, profile)
    if problem:
        _say(f"error: {problem}")
        return EXIT_USAGE
    out = args.output if args.output is not None else run_dir / "profile.svg"
    return draw(compiled, profile, out, args.rankdir)
