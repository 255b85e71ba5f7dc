"""``--import MODULE``: the user's own code (envs, operators) for JSON plans and runs.

A JSON plan never carries code, only registered names: a custom env
(``gymnasium.register``), operator (``plangraph.ops.register_op``) or implementation
(``plangraph.runtime.lowering.register_impl``) is registered by importing the module that
declares it. ``--import`` (repeatable, on every command that reads a plan) imports such
modules in this process before the plan is read. ``MODULE`` is a module name, importable
from the current directory or installed (``--import my_envs``, ``--import pkg.envs``), or
the path of a ``.py`` file (``--import path/to/my_envs.py``, imported as ``my_envs``).

Only this process imports them: envs travel to the rollout workers as resolved creators
(``plangraph.rl.envs``), so the modules need not be importable on a cluster's nodes.
Imports neither ray nor torch (``validate`` stays fast unless a module itself does).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType

__all__ = ["add_import_option", "import_user_modules"]


def add_import_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE (a module name, or a path to a .py file) first, for the envs, "
        "operators and implementations it registers; repeatable",
    )


def _where(exc: BaseException, file: str | None) -> str:
    """``" (my_envs.py:12)"``: the last frame of ``exc`` in ``file`` (or any frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f" ({exc.filename}:{exc.lineno})"
    mine = [f for f in frames if file and os.path.abspath(f.filename) == os.path.abspath(file)]
    where = mine or list(frames)
    return f" ({where[-1].filename}:{where[-1].lineno})" if where else ""


def _import_file(path: Path) -> ModuleType:
    name = path.stem
    have = sys.modules.get(name)
    if have is not None:
        if os.path.abspath(getattr(have, "__file__", "") or "") == str(path.resolve()):
            return have
        raise ImportError(
            f"a module named {name!r} is already loaded from "
            f"{getattr(have, '__file__', None) or 'a built-in'}; rename {path.name}"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def recorded_import(name: str) -> str:
    """``name`` as a run directory records it: a ``.py`` path made absolute (``--resume``
    may be given from another directory), a module name as given."""
    if name.endswith(".py") or os.sep in name or "/" in name:
        return str(Path(name).resolve())
    return name


def import_user_modules(names: list[str]) -> str | None:
    """Import each of ``names`` (see the module docstring), in order; ``None`` when all
    imported, else a one-line message naming the module and what failed."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        # As `python -m` does: a module beside the user's files is importable.
        sys.path.insert(0, cwd)
    for name in names:
        is_file = name.endswith(".py") or os.sep in name or "/" in name
        path = Path(name)
        if is_file and not path.is_file():
            return f"--import {name}: no such file"
        if not is_file and not name.replace(".", "").replace("_", "").isalnum():
            return (
                f"--import {name!r}: not a module name; give a dotted module name "
                "(--import my_envs) or a path to a .py file (--import path/to/my_envs.py)"
            )
        try:
            if is_file:
                _import_file(path)
            else:
                importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not is_file and exc.name is not None and name.startswith(exc.name):
                return (
                    f"--import {name}: no module named {exc.name!r} here; run plangraph from "
                    f"the directory that holds {exc.name.split('.')[0]}.py, install it, or "
                    f"pass its path: --import path/to/{name.split('.')[-1]}.py"
                )
            return f"--import {name}: {type(exc).__name__}: {exc}{_where(exc, None)}"
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # the user's module may fail in any way: report it
            file = str(path) if is_file else getattr(sys.modules.get(name), "__file__", None)
            import pydantic

            if isinstance(exc, pydantic.ValidationError):  # its first line hides the cause
                from plangraph.compiler.loader import validation_text

                msg = validation_text(exc)
            else:
                msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            detail = f": {msg}" if msg else ""
            return (
                f"--import {name}: importing it raised {type(exc).__name__}{detail}"
                f"{_where(exc, file)}"
            )
    return None
