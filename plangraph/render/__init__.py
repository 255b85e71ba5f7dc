"""Drawing compiled plans: DOT text, SVG and PNG (Graphviz), errors and types visible.

Public API:

* :func:`to_dot` (``compiled -> str``): deterministic DOT, no Graphviz needed;
* :func:`render` (``compiled, path -> Path``): format from the suffix (``.dot``/``.gv``,
  ``.svg``, ``.png``);
* :func:`to_svg` / :func:`repr_svg`: SVG text (the latter for Jupyter's ``_repr_svg_``);
* :class:`RenderError` and its subclasses for each reason a drawing cannot be made;
* :data:`CATEGORY_STYLES`: the style table keyed by operator category.

Imports neither ray nor torch; the ``graphviz`` package is imported only to run ``dot``.
"""

from __future__ import annotations

from plangraph.render.errors import (
    DotBinaryMissingError,
    DotFailedError,
    GraphvizPackageMissingError,
    RenderError,
    UnsupportedFormatError,
)
from plangraph.render.graph import RANKDIRS, to_dot
from plangraph.render.output import (
    DOT_SUFFIXES,
    IMAGE_SUFFIXES,
    SUFFIXES,
    dot_binary,
    render,
    repr_svg,
    run_dot,
    to_svg,
)
from plangraph.render.style import CATEGORY_STYLES, RESOURCE_STYLE, NodeStyle

_repr_svg_ = repr_svg  # the name CompiledPlan._repr_svg_ delegates to

__all__ = [
    "CATEGORY_STYLES",
    "DOT_SUFFIXES",
    "IMAGE_SUFFIXES",
    "RANKDIRS",
    "RESOURCE_STYLE",
    "SUFFIXES",
    "DotBinaryMissingError",
    "DotFailedError",
    "GraphvizPackageMissingError",
    "NodeStyle",
    "RenderError",
    "UnsupportedFormatError",
    "dot_binary",
    "render",
    "repr_svg",
    "run_dot",
    "to_dot",
    "to_svg",
]
