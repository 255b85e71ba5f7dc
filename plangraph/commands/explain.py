"""``plangraph explain PLAN``: the checks run, the optimisation passes (what each changed
in the executed plan, or why not), typed nodes in order with where each runs after them
(rollout workers, driver, a learner thread), the rollout workers' reservations and
placement (with ``--address`` or ``--node``: each worker's expected node, checked against
the cluster's nodes), resources with their resolved params (defaults included), what each
resource kind notes (replay shards, per-worker exploration), the replay memory estimated
from the env's spaces, diagnostics.

Exit status: 0 for a plan without errors, 1 with errors, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules
from plangraph.commands.validate import (
    add_config_option,
    add_pass_option,
    analyze_safely,
    check_paths,
    parse_overrides,
    parse_passes,
    target_capacity,
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "explain",
        help="show how a plan compiles: checks, optimisation passes, typed nodes, resources",
        description="Compile a plan and explain the result: the checks run, the "
        "optimisation passes (what each changed in the executed plan, before/after and "
        "why, or why not), every node with its inferred types, resolved params and where "
        "it runs (driver, rollout workers, learner thread), every resource with its "
        "resolved params (defaults included, e.g. a WorkerSet's env, workers and policy), "
        "and diagnostics.",
    )
    p.add_argument("plan", metavar="PLAN", help="plan file (.json or .py)")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text (default) or json (the compiled graph plus diagnostics)",
    )
    add_config_option(p)
    add_pass_option(p)
    add_import_option(p)
    from plangraph.commands.validate import add_target_options

    add_target_options(p)
    return p


def run(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.config)
    if isinstance(overrides, str):
        print(f"plangraph explain: error: {overrides}", file=sys.stderr)
        return 2
    disabled = parse_passes(args.no_pass)
    if isinstance(disabled, str):
        print(f"plangraph explain: error: {disabled}", file=sys.stderr)
        return 2
    problem = import_user_modules(args.imports) or check_paths([args.plan])
    if problem:
        print(f"plangraph explain: error: {problem}", file=sys.stderr)
        return 2
    capacity = target_capacity(args)
    if isinstance(capacity, str):
        print(f"plangraph explain: error: {capacity}", file=sys.stderr)
        return 2
    compiled = analyze_safely(args.plan, overrides, capacity, disable_passes=disabled)
    if compiled is None:
        return 1
    if args.format == "json":
        data = compiled.to_dict()
        data["passes"] = list(compiled.passes)
        data["optimisations"] = [r.to_dict() for r in compiled.optimisations]
        # where each node runs after the passes: in words, and as data
        data["placement"] = {nid: compiled.placement(nid) for nid in compiled.nodes}
        data["execution"] = {
            n.id: {
                "placement": n.placement,
                "host": n.host,
                "stage": list(n.stage),
                "worker_maps": list(n.worker_maps),
            }
            for n in compiled.nodes.values()
        }
        data["executed"] = compiled.executed.to_dict()
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
