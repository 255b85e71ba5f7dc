#!/usr/bin/env python3
"""Regenerate the JSON twins of the Python plans (``plans/<name>.json`` from ``.py``)
and the committed plan JSON Schema.

Usage: ``.venv/bin/python tools/export_plans.py [--check]``. With ``--check`` nothing is
written; the exit status is 1 if any file is out of date.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from plangraph.ir import Plan  # noqa: E402
from plangraph.ops.schema import SCHEMA_PATH, SCHEMA_REF_FROM_PLANS, schema_text  # noqa: E402


def plan_json(py: Path) -> str:
    """The JSON text ``plans/<name>.json`` must hold for Python plan ``py``."""
    plan = runpy.run_path(str(py))["plan"]
    if not isinstance(plan, Plan):
        raise TypeError(f"{py}: `plan` is {type(plan).__name__}, not a Plan")
    return plan.to_json(schema_ref=SCHEMA_REF_FROM_PLANS)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale files")
    args = ap.parse_args(argv)
    targets = {SCHEMA_PATH: schema_text()}
    for py in sorted((ROOT / "plans").glob("*.py")):
        targets[py.with_suffix(".json")] = plan_json(py)
    stale = 0
    for path, text in targets.items():
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        stale += 1
        rel = path.relative_to(ROOT)
        if args.check:
            print(f"stale: {rel}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
