"""``plangraph ops [NAME]``: list the operators, or one operator with its params."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "ops",
        help="list operators, or show one with its params",
        description="List the operator catalog, or describe one operator: its port "
        "types, how it applies to a stream, and its params with defaults, ranges, units. "
        "NAME may also be a resource kind (WorkerSet, ReplayBuffer, ReplayActors, "
        "LearnerThread) or a policy (a2c, ppo, dqn, impala, appo, sac: the params of a "
        "WorkerSet's policy).",
    )
    p.add_argument(
        "name", nargs="?", metavar="NAME", help="operator, resource kind or policy to describe"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    add_import_option(p)
    return p


def run(args: argparse.Namespace) -> int:
    problem = import_user_modules(args.imports)
    if problem:
        print(f"plangraph ops: error: {problem}", file=sys.stderr)
        return 2
    from plangraph.ops import all_ops, all_resource_kinds, get_op
    from plangraph.ops.describe import (
        catalog_text,
        describe_model_type,
        describe_op,
        describe_policy,
        describe_resource_kind,
        find_policy,
        model_type_text,
        op_text,
        policy_configs,
        policy_text,
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
    algo = find_policy(args.name)
    if algo is not None:
        if args.format == "json":
            print(json.dumps(describe_policy(algo), indent=2))
        else:
            sys.stdout.write(policy_text(algo))
        return 0
    from plangraph.ops.models import model_types

    if args.name in model_types():
        if args.format == "json":
            print(json.dumps(describe_model_type(args.name), indent=2))
        else:
            sys.stdout.write(model_type_text(args.name))
        return 0
    if args.name not in all_ops():
        from plangraph.text import close_matches

        names = [*all_ops(), *kinds, *policy_configs(), *model_types()]
        close = close_matches(args.name, names)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        print(
            f"plangraph ops: error: {args.name!r} is no operator, resource kind, policy or "
            f"model type{hint} (`plangraph ops` lists them)",
            file=sys.stderr,
        )
        return 2
    sig = get_op(args.name)
    if args.format == "json":
        print(json.dumps(describe_op(sig), indent=2))
    else:
        sys.stdout.write(op_text(sig))
    return 0
