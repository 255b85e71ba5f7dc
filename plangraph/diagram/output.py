"""Writing a compiled plan to a file: DOT text directly, SVG/PNG through Graphviz ``dot``.

DOT needs nothing beyond the standard library. SVG and PNG need two separate things, and
a missing one is reported as exactly that: the ``graphviz`` Python package (which runs the
program) and Graphviz's ``dot`` binary (Debian's ``graphviz`` package).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from plangraph.diagram.errors import (
    DotBinaryMissingError,
    DotFailedError,
    GraphvizPackageMissingError,
    UnsupportedFormatError,
)
from plangraph.diagram.graph import to_dot

if TYPE_CHECKING:
    from types import ModuleType

    from plangraph.compiler import CompiledPlan
    from plangraph.ir.profile import RunProfile

DOT_SUFFIXES: tuple[str, ...] = (".dot", ".gv")
"""Suffixes written as DOT text (no Graphviz needed)."""
IMAGE_SUFFIXES: tuple[str, ...] = (".svg", ".png")
"""Suffixes drawn by Graphviz's ``dot`` (the binary must be on ``PATH``)."""
SUFFIXES: tuple[str, ...] = DOT_SUFFIXES + IMAGE_SUFFIXES


def _graphviz() -> ModuleType:
    try:
        import graphviz
    except ImportError as exc:
        raise GraphvizPackageMissingError() from exc
    return graphviz


def dot_binary() -> str | None:
    """Path of Graphviz's ``dot`` program on ``PATH``, or ``None`` when it is not installed."""
    return shutil.which("dot")


def run_dot(dot_source: str, fmt: str) -> bytes:
    """Lay out ``dot_source`` with Graphviz ``dot -T<fmt>`` and return the output bytes.

    Raises:
        GraphvizPackageMissingError: the ``graphviz`` Python package is not importable.
        DotBinaryMissingError: no ``dot`` program on ``PATH``.
        DotFailedError: ``dot`` exited non-zero (its stderr is in the message).
    """
    graphviz = _graphviz()
    if dot_binary() is None:
        raise DotBinaryMissingError()
    try:
        return graphviz.pipe("dot", fmt, dot_source.encode("utf-8"), quiet=True)
    except graphviz.ExecutableNotFound as exc:  # PATH changed between the check and the run
        raise DotBinaryMissingError() from exc
    except graphviz.CalledProcessError as exc:
        stderr = exc.stderr.decode("utf-8", "replace") if exc.stderr else ""
        raise DotFailedError(fmt, exc.returncode, stderr) from exc


def to_svg(compiled: CompiledPlan, rankdir: str = "TB") -> str:
    """The plan drawn as an SVG document (needs ``dot``; see :func:`run_dot` for errors)."""
    return run_dot(to_dot(compiled, rankdir=rankdir), "svg").decode("utf-8")


def render(
    compiled: CompiledPlan,
    path: str | Path,
    rankdir: str = "TB",
    profile: RunProfile | None = None,
) -> Path:
    """Draw ``compiled`` to ``path``; the format comes from the suffix.

    ``.dot``/``.gv`` write DOT text (UTF-8) and need no Graphviz; ``.svg`` and ``.png`` run
    ``dot``. Parent directories are created. A plan with diagnostics renders too, with the
    failing nodes and edges marked in red.

    Args:
        compiled: the result of ``plangraph.compiler.analyze`` (or ``compile``).
        path: output file; its suffix picks the format (case-insensitive).
        rankdir: ``"TB"`` (top to bottom) or ``"LR"`` (left to right).
        profile: a run's profile to draw on the plan (see :func:`to_dot`).

    Returns:
        The path written.

    Raises:
        UnsupportedFormatError: any other suffix.
        GraphvizPackageMissingError, DotBinaryMissingError, DotFailedError: for SVG/PNG,
            see :func:`run_dot`. Nothing is written in that case.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UnsupportedFormatError(path, SUFFIXES)
    source = to_dot(compiled, rankdir=rankdir, profile=profile)
    if suffix in DOT_SUFFIXES:
        data = source.encode("utf-8")
    else:
        data = run_dot(source, suffix[1:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
