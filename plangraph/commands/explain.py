"""``plangraph explain PLAN``: the checks run, typed nodes in order, resources with their
resolved params (defaults included), what each resource kind notes (replay shards,
per-worker exploration), the replay memory estimated from the env's spaces, diagnostics.

Exit status: 0 for a plan without errors, 1 with errors, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from plangraph.commands.validate import (
    add_config_option,
    analyze_safely,
    check_paths,
    parse_overrides,
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "explain",
        help="show how a plan compiles: checks, typed nodes, resources",
        description="Compile a plan and explain the result: the checks run, every node "
        "with its inferred types and resolved params, every resource with its resolved "
        "params (defaults included, e.g. a WorkerSet's env, workers and policy), and "
        "diagnostics.",
    )
    p.add_argument("plan", metavar="PLAN", help="plan file (.json or .py)")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json (the compiled graph plus diagnostics)",
    )
    add_config_option(p)
    return p


def run(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.config)
    if isinstance(overrides, str):
        print(f"plangraph explain: error: {overrides}", file=sys.stderr)
        return 2
    problem = check_paths([args.plan])
    if problem:
        print(f"plangraph explain: error: {problem}", file=sys.stderr)
        return 2
    compiled = analyze_safely(args.plan, overrides)
    if compiled is None:
        return 1
    if args.format == "json":
        data = compiled.to_dict()
        data["passes"] = list(compiled.passes)
        data["diagnostics"] = [d.to_dict() for d in compiled.diagnostics]
        print(json.dumps(data, indent=2))
    else:
        sys.stdout.write(compiled.explain(_memory_notes(compiled)))
    return 0 if compiled.ok else 1


def _memory_notes(compiled: Any) -> dict[str, list[str]]:
    """Replay memory estimates by resource id (``memory_check``; makes one env per env
    id, imports neither ray nor torch); none for a plan with errors."""
    if not compiled.ok:
        return {}
    from plangraph.runtime.memory_check import replay_memory_notes

    params = {rid: res.params for rid, res in compiled.resources.items()}
    return replay_memory_notes(compiled, params)
