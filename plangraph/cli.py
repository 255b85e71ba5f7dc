"""The ``plangraph`` command line.

Each subcommand lives in ``plangraph/commands/<name>.py`` and exposes
``add_parser(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``.
Command modules must not import ray or torch at module level: ``validate`` and
``render`` answer in well under a second without them.

Exit codes: 0 success, 1 the input has errors (diagnostics printed), 2 usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Order is the order shown in ``plangraph --help``.
COMMANDS: tuple[str, ...] = (
    "validate",
    "render",
    "diff",
    "run",
    "eval",
    "profile",
    "plot",
    "tune",
    "explain",
    "schema",
    "ops",
)


def _available_commands(names: Sequence[str] = COMMANDS) -> list[tuple[str, object]]:
    mods: list[tuple[str, object]] = []
    for name in names:
        try:
            mods.append((name, importlib.import_module(f"plangraph.commands.{name}")))
        except ModuleNotFoundError as exc:  # a command not built yet in this checkout
            if exc.name != f"plangraph.commands.{name}":
                raise
    return mods


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``plangraph`` parser with every command, or with ``command`` alone (what
    ``main`` parses a command line naming one with: importing and building all eleven
    commands takes about 0.03 s, a tenth of a ``validate``)."""
    parser = argparse.ArgumentParser(
        prog="plangraph",
        description="Declare, check, draw and run distributed RL execution plans.",
    )
    from plangraph import __version__

    parser.add_argument("--version", action="version", version=f"plangraph {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for _name, mod in _available_commands(COMMANDS if command is None else (command,)):
        p = mod.add_parser(sub)  # type: ignore[attr-defined]
        p.set_defaults(_run=mod.run)  # type: ignore[attr-defined]
    return parser


def main(argv: Sequence[str] | None = None, *, owns_process: bool = False) -> int:
    """Run the command ``argv`` names (default: the command line); its exit code.

    ``owns_process``: the process ends when the command does (the ``plangraph`` command
    itself, not a caller's ``main([...])``), so the command may tune the process for its
    whole remaining life (``run`` freezes its start-up heap out of the cyclic GC).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # Help, --version and a misspelt command get every command (to list or suggest).
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)  # argparse exits with 2 on usage errors
    args.owns_process = owns_process
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
