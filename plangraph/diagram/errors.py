"""Errors raised while drawing a plan.

Every failure to draw is a :class:`RenderError`; the subclasses separate the causes a user
fixes differently (install a Python package, install a system binary, pick another file
suffix), so the CLI can print one exact sentence instead of a traceback.
"""

from __future__ import annotations

from pathlib import Path

from plangraph.errors import RenderError

__all__ = [
    "DotBinaryMissingError",
    "DotFailedError",
    "GraphvizPackageMissingError",
    "RenderError",
    "UnsupportedFormatError",
]


class UnsupportedFormatError(RenderError):
    """The output path has a suffix plangraph cannot draw to."""

    def __init__(self, path: Path, supported: tuple[str, ...]) -> None:
        self.path = path
        self.supported = supported
        got = path.suffix or "(no suffix)"
        super().__init__(
            f"cannot draw to {path}: unsupported file suffix {got}; "
            f"use one of {', '.join(supported)} (the format is taken from the suffix)"
        )


class GraphvizPackageMissingError(RenderError):
    """The ``graphviz`` *Python package* is not importable (needed for SVG/PNG only)."""

    def __init__(self) -> None:
        super().__init__(
            "the Python package `graphviz` is not installed in this environment "
            "(.venv/bin/pip install graphviz, or run tools/bootstrap); "
            "DOT output (.dot/.gv) works without it"
        )


class DotBinaryMissingError(RenderError):
    """Graphviz's ``dot`` *program* is not on ``PATH`` (needed for SVG/PNG only)."""

    def __init__(self) -> None:
        super().__init__(
            "the `dot` binary is not on PATH (Debian/Ubuntu: sudo apt-get install graphviz; "
            "or run tools/bootstrap); DOT output (.dot/.gv) works without it"
        )


class DotFailedError(RenderError):
    """``dot`` ran but rejected the DOT text or failed to lay it out."""

    def __init__(self, fmt: str, returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        detail = stderr.strip() or "(no output on stderr)"
        super().__init__(
            f"`dot -T{fmt}` failed with exit status {returncode}; this is a plangraph bug, "
            f"please report it with the plan and `plangraph render PLAN -o plan.dot`:\n{detail}"
        )
