"""``plangraph validate PLAN...``: check plans without running anything.

Exit status: 0 when every plan is free of errors (warnings allowed), 1 when any plan has
errors (each printed as a located diagnostic), 2 on usage errors (e.g. a missing file).
Imports neither ray nor torch. ``--memory`` also sizes the replay from the env's spaces
(PG176; makes one env per env id, so it imports gymnasium).
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
    p.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics")
    p.add_argument(
        "--memory",
        action="store_true",
        help="also estimate each replay buffer's memory when full from the env's spaces "
        "(makes one env per env id) and report PG176 where the replay cannot fit",
    )
    p.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="with --memory: the memory to fit in, in bytes or with a unit (e.g. 8GiB, "
        "512MiB); default: the memory available on this machine",
    )
    return p


_UNITS = {"": 1, "B": 1, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def parse_size(text: str) -> int | None:
    """``"8GiB"`` -> 8589934592, ``"1000"`` -> 1000 (binary units); ``None`` if invalid."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]iB|B)?\s*", text, flags=re.IGNORECASE)
    if m is None:
        return None
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])


def _memory_diagnostics(compiled: Any, limit: int | None) -> list[Any]:
    """PG176 for replay that cannot fit in ``limit`` bytes (default: available here)."""
    from plangraph.runtime.memory_check import (
        available_memory_bytes,
        estimate_replay_memory,
        replay_memory_diagnostics,
    )

    if not compiled.ok:
        return []
    params = {rid: res.params for rid, res in compiled.resources.items()}
    available = limit if limit is not None else available_memory_bytes()
    if available is None:
        return []
    where = "--memory-limit is" if limit is not None else "this machine has available"
    estimates = estimate_replay_memory(compiled, params)
    return replay_memory_diagnostics(compiled, estimates, available, where)


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


def analyze_safely(path: str, overrides: dict[str, Any]) -> Any:
    """``analyze`` for the CLI: an internal failure becomes a message, not a traceback."""
    from plangraph.compiler import analyze

    try:
        return analyze(path, config=overrides)
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
    problem = check_paths(args.plans)
    if problem:
        print(f"plangraph validate: error: {problem}", file=sys.stderr)
        return 2
    limit = None
    if args.memory_limit is not None:
        limit = parse_size(args.memory_limit)
        if limit is None or not args.memory:
            what = (
                "needs --memory"
                if limit is not None
                else f"expects a size such as 8GiB, got {args.memory_limit!r}"
            )
            print(f"plangraph validate: error: --memory-limit {what}", file=sys.stderr)
            return 2
    results = []
    failed = False
    for path in args.plans:
        compiled = analyze_safely(path, overrides)
        if compiled is None:
            failed = True
            results.append({"path": path, "ok": False, "diagnostics": []})
            continue
        extra = _memory_diagnostics(compiled, limit) if args.memory else []
        ok = compiled.ok and not extra
        failed |= not ok
        results.append(
            {
                "path": path,
                "ok": ok,
                "nodes": len(compiled.nodes),
                "diagnostics": [d.to_dict() for d in (*compiled.diagnostics, *extra)],
                "_compiled": compiled,
                "_extra": extra,
            }
        )
    if args.format == "json":
        for r in results:
            r.pop("_compiled", None)
            r.pop("_extra", None)
        print(json.dumps({"ok": not failed, "plans": results}, indent=2))
        return 1 if failed else 0
    n_err = n_warn = 0
    for r in results:
        compiled = r.pop("_compiled", None)
        extra = r.pop("_extra", [])
        if compiled is None:
            continue
        for d in (*compiled.diagnostics, *extra):
            print(d.format())
        n_err += len(compiled.errors) + len(extra)
        n_warn += len(compiled.warnings)
        if r["ok"] and not args.quiet:
            extra = f", {len(compiled.warnings)} warning(s)" if compiled.warnings else ""
            print(f"{r['path']}: ok ({len(compiled.nodes)} nodes{extra})")
    if not args.quiet and (n_err or len(results) > 1):
        print(
            f"{len(results)} plan{'s' if len(results) != 1 else ''} checked: "
            f"{n_err} error{'s' if n_err != 1 else ''}, "
            f"{n_warn} warning{'s' if n_warn != 1 else ''}"
        )
    return 1 if failed else 0
