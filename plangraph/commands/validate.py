"""``plangraph validate PLAN...``: check plans without running anything.

Exit status: 0 when every plan is free of errors (warnings allowed), 1 when any plan has
errors (each printed as a located diagnostic), 2 on usage errors (e.g. a missing file).
Imports neither ray nor torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "validate",
        help="check plans (.json or .py) and report every problem",
        description="Check plans and report every problem at once, with its location.",
    )
    p.add_argument("plans", nargs="*", metavar="PLAN", help="plan files (.json or .py)")
    p.add_argument("--list-codes", action="store_true", help="list the diagnostic codes and exit")
    p.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (text)"
    )
    add_config_option(p)
    add_pass_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics")
    return p


def add_pass_option(p: argparse.ArgumentParser) -> None:
    """``--no-pass NAME`` (repeatable): compile without that optimisation pass."""
    # No compiler import here: every command builds its parser on each `plangraph` call.
    p.add_argument(
        "--no-pass",
        dest="no_pass",
        action="append",
        default=[],
        metavar="NAME",
        help="compile without optimisation pass NAME (repeatable; 'all': without any); "
        "`plangraph explain PLAN` lists the passes and what each did",
    )


def parse_passes(names: list[str]) -> frozenset[str] | str:
    """The ``--no-pass`` names as a set, or an error message with a did-you-mean."""
    from plangraph.compiler.passes import check_pass_names
    from plangraph.errors import UnknownPassError

    try:
        return check_pass_names(names)
    except UnknownPassError as exc:
        return f"--no-pass: {exc}"


def add_config_option(p: argparse.ArgumentParser) -> None:
    # --set is the spelling `plangraph run` uses; -c/--config stays for existing scripts.
    p.add_argument(
        "--set",
        "-c",
        "--config",
        dest="config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config default (VALUE is JSON, else a string); repeatable, "
        "e.g. --set train_batch_size=4000 (-c/--config are the same option)",
    )


def parse_overrides(items: list[str]) -> dict[str, Any] | str:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``, or an error message."""
    from plangraph.text import parse_key_value

    out: dict[str, Any] = {}
    for item in items:
        pair = parse_key_value(item)
        if pair is None:
            return f"--set/-c/--config expects KEY=VALUE, got {item!r}"
        out[pair[0]] = pair[1]
    return out


def check_paths(paths: list[str]) -> str | None:
    for p in paths:
        path = Path(p)
        if not path.exists():
            return f"no such file: {p}"
        if path.is_dir():
            return f"{p} is a directory; pass plan files (e.g. {p.rstrip('/')}/*.json)"
    return None


def analyze_safely(
    path: str, overrides: dict[str, Any], disable_passes: frozenset[str] = frozenset()
) -> Any:
    """``analyze`` for the CLI: an internal failure becomes a message, not a traceback."""
    from plangraph.compiler import analyze

    try:
        return analyze(path, config=overrides, disable_passes=disable_passes)
    except Exception as exc:  # a compiler bug must not look like a crash of the user's plan
        print(
            f"{path}: internal error in the plangraph compiler: {type(exc).__name__}: {exc}\n"
            "  please report this with the plan that triggered it",
            file=sys.stderr,
        )
        return None


def _list_codes(fmt: str) -> int:
    from plangraph.compiler import CODES

    if fmt == "json":
        rows = [
            {"code": c, "name": n, "severity": sev, "description": doc}
            for c, (n, sev, doc) in CODES.items()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    w = max(len(n) for n, _, _ in CODES.values())
    for code, (name, sev, doc) in CODES.items():
        print(f"{code}  {name:<{w}}  {sev:<7}  {doc}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.list_codes:
        return _list_codes(args.format)
    if not args.plans:
        print("plangraph validate: error: give at least one PLAN", file=sys.stderr)
        return 2
    overrides = parse_overrides(args.config)
    if isinstance(overrides, str):
        print(f"plangraph validate: error: {overrides}", file=sys.stderr)
        return 2
    disabled = parse_passes(args.no_pass)
    if isinstance(disabled, str):
        print(f"plangraph validate: error: {disabled}", file=sys.stderr)
        return 2
    problem = check_paths(args.plans)
    if problem:
        print(f"plangraph validate: error: {problem}", file=sys.stderr)
        return 2
    results = []
    failed = False
    for path in args.plans:
        compiled = analyze_safely(path, overrides, disabled)
        if compiled is None:
            failed = True
            results.append({"path": path, "ok": False, "diagnostics": []})
            continue
        failed |= not compiled.ok
        results.append(
            {
                "path": path,
                "ok": compiled.ok,
                "nodes": len(compiled.nodes),
                "diagnostics": [d.to_dict() for d in compiled.diagnostics],
                "_compiled": compiled,
            }
        )
    if args.format == "json":
        for r in results:
            r.pop("_compiled", None)
        print(json.dumps({"ok": not failed, "plans": results}, indent=2))
        return 1 if failed else 0
    n_err = n_warn = 0
    for r in results:
        compiled = r.pop("_compiled", None)
        if compiled is None:
            continue
        for d in compiled.diagnostics:
            print(d.format())
        n_err += len(compiled.errors)
        n_warn += len(compiled.warnings)
        if compiled.ok and not args.quiet:
            extra = f", {len(compiled.warnings)} warning(s)" if compiled.warnings else ""
            print(f"{r['path']}: ok ({len(compiled.nodes)} nodes{extra})")
    if not args.quiet and (n_err or len(results) > 1):
        print(
            f"{len(results)} plan{'s' if len(results) != 1 else ''} checked: "
            f"{n_err} error{'s' if n_err != 1 else ''}, "
            f"{n_warn} warning{'s' if n_warn != 1 else ''}"
        )
    return 1 if failed else 0
