"""Drawing compiled plans: DOT text, SVG and PNG (Graphviz), errors and types visible.

Public API:

* :func:`to_dot` (``compiled -> str``): deterministic DOT, no Graphviz needed;
* :func:`render` (``compiled, path -> Path``): format from the suffix (``.dot``/``.gv``,
  ``.svg``, ``.png``);
* :func:`to_svg` (``compiled -> str``): SVG text (needs ``dot``);
* :class:`RenderError` and its subclasses for each reason a drawing cannot be made;
* :data:`CATEGORY_STYLES`: the style table keyed by operator category.

Imports neither ray nor torch; the ``graphviz`` package is imported only to run ``dot``.

``plangraph.render`` and ``plangraph.to_dot`` are this package's :func:`render` and
:func:`to_dot`. (The package is named ``diagram``, not ``render``: a subpackage
``plangraph.render`` would replace the function ``plangraph.render`` on the package as
soon as it was imported.)
"""

from __future__ import annotations

from plangraph.diagram.errors import (
    DotBinaryMissingError,
    DotFailedError,
    GraphvizPackageMissingError,
    RenderError,
    UnsupportedFormatError,
)
from plangraph.diagram.graph import RANKDIRS, to_dot
from plangraph.diagram.output import (
    DOT_SUFFIXES,
    IMAGE_SUFFIXES,
    SUFFIXES,
    dot_binary,
    render,
    run_dot,
    to_svg,
)
from plangraph.diagram.style import CATEGORY_STYLES, RESOURCE_STYLE, NodeStyle

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
    "run_dot",
    "to_dot",
    "to_svg",
]
