"""``plangraph validate PLAN...``: check plans without running anything.

Exit status: 0 when every plan is free of errors (warnings allowed), 1 when any plan has
errors (each printed as a located diagnostic), 2 on usage errors (e.g. a missing file).
Imports neither ray nor torch (``--address`` imports ray). ``--replay-memory`` also sizes
the replay from the env's spaces (PG185; makes one env per env id, so it imports gymnasium).
``--datasets`` also checks each ``OfflineData`` dataset as ``plangraph run`` does before
launch (PG198: its Parquet footers against the env and the learner's columns).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from plangraph.commands.user_modules import add_import_option, import_user_modules
from plangraph.text import brief


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
    add_import_option(p)
    p.add_argument("-q", "--quiet", action="store_true", help="print only diagnostics")
    add_target_options(p)
    p.add_argument(
        "--replay-memory",
        action="store_true",
        help="also estimate each replay buffer's memory when full from the env's spaces "
        "(makes one env per env id) and report PG185 where the replay cannot fit in the "
        "target machine's memory (--memory SIZE, --address) or, by default, in the memory "
        "available on this machine",
    )
    p.add_argument(
        "--datasets",
        action="store_true",
        help="also read each OfflineData dataset's Parquet footers (no rows) and check its "
        "columns against the env and the learner of each ReadExperiences reading it, as "
        "plangraph run does before launch (PG198; makes one env per worker set, so it "
        "imports gymnasium and pyarrow)",
    )
    return p


def add_target_options(p: argparse.ArgumentParser) -> None:
    """``--address`` / ``--cpus`` / ``--memory`` / ``--gpus`` / ``--node``: what the plan's
    rollout workers and reservations are checked against (default: this machine)."""
    target = p.add_argument_group(
        "target machine",
        "what the rollout workers are checked against (default: this machine's CPUs, "
        "memory and GPUs)",
    )
    target.add_argument(
        "--address",
        metavar="ADDR",
        help="ask the Ray cluster at ADDR for its nodes and their resources (joins it "
        "briefly; the only option that imports Ray)",
    )
    target.add_argument(
        "--cpus", type=float, metavar="N", help="check against a machine with N CPUs"
    )
    target.add_argument(
        "--memory", metavar="SIZE", help="check against a machine with SIZE memory (e.g. 8GiB)"
    )
    target.add_argument(
        "--gpus", type=float, metavar="N", help="check against a machine with N GPUs"
    )
    target.add_argument(
        "--node",
        dest="nodes",
        action="append",
        default=[],
        metavar="RESOURCES",
        help="check against a cluster of nodes, one --node each, e.g. --node CPU=4,GPU=1 "
        "--node CPU=4,memory=8GiB,sim=2 (Ray's resource names; repeatable)",
    )


def _parse_node(text: str, i: int) -> Any:
    """``"CPU=4,GPU=1,memory=8GiB"`` -> a ``NodeCapacity`` named ``--node <i>``, or a
    message."""
    from plangraph.compiler.capacity import NodeCapacity, parse_size

    resources: dict[str, float] = {}
    for part in (x.strip() for x in text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            return f"--node {text!r}: expected NAME=AMOUNT pairs, e.g. CPU=4,GPU=1,memory=8GiB"
        try:
            amount = float(parse_size(value)) if key.strip() == "memory" else float(value)
        except ValueError:
            return f"--node {text!r}: {key.strip()}={value!r} is not an amount"
        if not amount >= 0:
            return f"--node {text!r}: {key.strip()} must be >= 0"
        resources[key.strip()] = amount
    return NodeCapacity.of(f"--node {i}", "", resources)


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


def target_capacity(args: argparse.Namespace) -> Any:
    """The ``Capacity`` the plans are checked against, or an error message (str)."""
    from plangraph.compiler import Capacity
    from plangraph.compiler.capacity import parse_size

    address = getattr(args, "address", None)
    cpus, memory = getattr(args, "cpus", None), getattr(args, "memory", None)
    gpus, node_specs = getattr(args, "gpus", None), getattr(args, "nodes", None) or []
    machine = cpus is not None or memory is not None or gpus is not None
    if address is not None and (machine or node_specs):
        return (
            "--address asks the cluster for its nodes and resources; drop "
            "--cpus/--memory/--gpus/--node"
        )
    if node_specs and machine:
        return "--node describes each node of a cluster; drop --cpus/--memory/--gpus"
    if node_specs:
        nodes = []
        for i, spec in enumerate(node_specs, 1):
            node = _parse_node(spec, i)
            if isinstance(node, str):
                return node
            nodes.append(node)
        return Capacity.of_nodes(f"the target cluster ({len(nodes)} --node)", tuple(nodes))
    if address is not None:
        from plangraph.errors import BuildError
        from plangraph.runtime.ray_session import cluster_capacity

        try:
            return cluster_capacity(address)
        except BuildError as exc:
            return str(exc)
    if not machine:
        return Capacity.local()
    if cpus is not None and not cpus > 0:
        return f"--cpus {cpus:g}: give a number of CPUs > 0"
    if gpus is not None and not gpus >= 0:
        return f"--gpus {gpus:g}: give a number of GPUs >= 0"
    nbytes = None
    if memory is not None:
        try:
            nbytes = parse_size(memory)
        except ValueError as exc:
            return f"--memory: {exc}"
    shown = " ".join(
        part
        for part in (
            f"--cpus {cpus:g}" if cpus else "",
            f"--memory {memory}" if memory else "",
            f"--gpus {gpus:g}" if gpus is not None else "",
        )
        if part
    )
    return Capacity(f"the target machine ({shown})", cpus, nbytes, gpus)


def _memory_diagnostics(compiled: Any, capacity: Any, explicit: bool) -> list[Any]:
    """PG185 for replay that cannot fit in the target's memory (``explicit``: given with
    ``--memory``/``--address``) or, by default, in the memory available here."""
    from plangraph.runtime.memory_check import (
        available_memory_bytes,
        estimate_replay_memory,
        replay_memory_diagnostics,
    )

    if not compiled.ok:
        return []
    params = {rid: res.params for rid, res in compiled.resources.items()}
    if explicit:
        available, where = capacity.memory_bytes, f"{capacity.where} has"
    else:
        available, where = available_memory_bytes(), "this machine has available"
    if available is None:
        return []
    estimates = estimate_replay_memory(compiled, params)
    return replay_memory_diagnostics(compiled, estimates, available, where)


def _dataset_diagnostics(compiled: Any) -> list[Any]:
    """PG198 for each ``OfflineData`` dataset that ``plangraph run`` would refuse before
    launch (``plangraph.runtime.dataset_check``: the same check, on the footers only); the
    learner's columns are the algorithm's torch-free ``dataset_columns``."""
    from plangraph.rl.row_layout import env_spaces
    from plangraph.rl.wrappers import with_wrappers
    from plangraph.runtime.dataset_check import check_datasets

    if not compiled.ok:
        return []
    params = {rid: res.params for rid, res in compiled.resources.items()}
    worker_sets = {
        rid: params[rid] for rid, res in compiled.resources.items() if res.kind == "WorkerSet"
    }

    def spaces(rid: str) -> tuple[Any, Any]:
        ws = worker_sets[rid]
        return env_spaces(with_wrappers(ws.env, ws.wrappers))

    def needed(policy: Any) -> tuple[str, ...]:
        return type(policy).dataset_columns or ()

    _infos, problems = check_datasets(compiled, params, worker_sets, spaces, needed)
    return [p.diagnostic(compiled) for p in problems]


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
        help="override a config key or, by a dotted path, a node or resource param (VALUE "
        "is JSON, else a string); repeatable, e.g. --set train_batch_size=4000, --set "
        "nodes.train.num_sgd_iter=5, --set workers.policy.lr=0.001 (-c/--config are the "
        "same option)",
    )


def parse_overrides(items: list[str]) -> dict[str, Any] | str:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}``, or an error message (also for one key
    given two different values: which one was meant is not for us to guess)."""
    from plangraph.text import parse_key_value, same_value

    out: dict[str, Any] = {}
    for item in items:
        try:
            pair = parse_key_value(item)
        except ValueError as exc:
            return f"--set {exc}"
        if pair is None:
            return f"--set/-c/--config expects KEY=VALUE, got {item!r}"
        key, value = pair
        if key in out and not same_value(out[key], value):
            return (
                f"--set {key} is given twice, as {json.dumps(out[key])} and then "
                f"{json.dumps(value)}: pass it once"
            )
        out[key] = value
    return out


def check_paths(paths: list[str]) -> str | None:
    for p in paths:
        path = Path(p)
        try:
            exists = path.exists()
        except OSError as exc:  # a name the OS refuses to look up (too long, ...)
            return f"{brief(p)}: not a file name this system accepts ({exc.strerror})"
        if not exists:
            return f"no such file: {p}"
        if path.is_dir():
            return f"{p} is a directory; pass plan files (e.g. {p.rstrip('/')}/*.json)"
    return None


def analyze_safely(
    path: str,
    overrides: dict[str, Any],
    capacity: Any = None,
    disable_passes: frozenset[str] = frozenset(),
) -> Any:
    """``analyze`` for the CLI: an internal failure becomes a message, not a traceback."""
    from plangraph.compiler import analyze

    try:
        return analyze(
            path,
            config=overrides,
            capacity=capacity,
            disable_passes=disable_passes,
            override_syntax="cli",
        )
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
    problem = import_user_modules(args.imports)
    if problem:
        print(f"plangraph validate: error: {problem}", file=sys.stderr)
        return 2
    problem = check_paths(args.plans)
    if problem:
        print(f"plangraph validate: error: {problem}", file=sys.stderr)
        return 2
    capacity = target_capacity(args)
    if isinstance(capacity, str):
        print(f"plangraph validate: error: {capacity}", file=sys.stderr)
        return 2
    results = []
    failed = False
    for path in args.plans:
        compiled = analyze_safely(path, overrides, capacity, disabled)
        if compiled is None:
            failed = True
            results.append({"path": path, "ok": False, "diagnostics": []})
            continue
        explicit = args.memory is not None or args.address is not None
        extra = _memory_diagnostics(compiled, capacity, explicit) if args.replay_memory else []
        if args.datasets:
            extra += _dataset_diagnostics(compiled)
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
            warned = f", {len(compiled.warnings)} warning(s)" if compiled.warnings else ""
            print(f"{r['path']}: ok ({len(compiled.nodes)} nodes{warned})")
    if not args.quiet and (n_err or len(results) > 1):
        print(
            f"{len(results)} plan{'s' if len(results) != 1 else ''} checked: "
            f"{n_err} error{'s' if n_err != 1 else ''}, "
            f"{n_warn} warning{'s' if n_warn != 1 else ''}"
        )
    return 1 if failed else 0
