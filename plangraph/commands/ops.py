"""``plangraph ops [NAME]``: list the operators, or one operator with its params."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ops",
        help="list operators, or show one with its params",
        description="List the operator catalog, or describe one operator: its port "
        "types, how it applies to a stream, and its params with defaults, ranges, units. "
        "NAME may also be a resource kind (WorkerSet, ReplayBuffer, ReplayActors, LearnerThread).",
    )
    p.add_argument(
        "name", nargs="?", metavar="NAME", help="operator (or resource kind) to describe"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def run(args: argparse.Namespace) -> int:
    from plangraph.ops import all_ops, all_resource_kinds, get_op
    from plangraph.ops.describe import (
        catalog_text,
        describe_op,
        describe_resource_kind,
        op_text,
        resource_kind_text,
    )

    if args.name is None:
        sigs = all_ops()
        if args.format == "json":
            print(json.dumps([describe_op(s) for s in sigs.values()], indent=2))
        else:
            sys.stdout.write(catalog_text(sigs))
        return 0
    kinds = all_resource_kinds()
    if args.name in kinds:
        kind = kinds[args.name]
        if args.format == "json":
            print(json.dumps(describe_resource_kind(kind), indent=2))
        else:
            sys.stdout.write(resource_kind_text(kind))
        return 0
    try:
        sig = get_op(args.name)
    except KeyError as exc:
        print(f"plangraph ops: error: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(describe_op(sig), indent=2))
    else:
        sys.stdout.write(op_text(sig))
    return 0
