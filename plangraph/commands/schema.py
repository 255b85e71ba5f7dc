"""``plangraph schema``: print the plan JSON Schema, check or rewrite the committed copy.

``--check`` exits 1 when ``plangraph/ops/plan.schema.json`` differs from the schema the
current models generate (regenerate with ``--write`` or ``tools/export_plans.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "schema",
        help="print the plan JSON Schema (or check the committed one)",
        description="Print the JSON Schema of plan files, generated from the IR and the "
        "operator catalog.",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--check", action="store_true", help="exit 1 if the committed schema is out of date"
    )
    g.add_argument("--write", action="store_true", help="rewrite the committed schema")
    g.add_argument("-o", "--output", metavar="PATH", help="write the schema to PATH")
    return p


def run(args: argparse.Namespace) -> int:
    from plangraph.ops.schema import SCHEMA_PATH, plan_schema, schema_text

    text = schema_text()
    if args.check:
        try:
            committed = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"{SCHEMA_PATH}: cannot read the committed schema: {exc}", file=sys.stderr)
            return 1
        if committed != plan_schema():
            print(
                f"{SCHEMA_PATH}: out of date with the operator catalog and IR models; "
                "run `plangraph schema --write` (or tools/export_plans.py) and commit it",
                file=sys.stderr,
            )
            return 1
        print(f"{SCHEMA_PATH}: up to date")
        return 0
    if args.write or args.output:
        path = SCHEMA_PATH if args.write else Path(args.output)
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"plangraph schema: error: cannot write {path}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {path}")
        return 0
    sys.stdout.write(text)
    return 0
