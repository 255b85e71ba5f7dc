"""The one style table: how each operator category, resources and diagnostics look.

Shapes and colours are chosen here once; ``graph.py`` only looks them up, and the legend
is drawn from the same table, so a diagram and its legend cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

FONT = "Helvetica"
"""Font family for every label (fontconfig maps it to a sans font on Linux)."""

TEXT_COLOR = "#1b2631"
MUTED_COLOR = "#566573"
ERROR_COLOR = "#c0392b"
ERROR_FILL = "#fadbd8"
WARNING_COLOR = "#b9770e"
WARNING_FILL = "#fdf2e9"


@dataclass(frozen=True)
class NodeStyle:
    """Graphviz node attributes of one kind of box in the diagram."""

    shape: str
    fill: str
    border: str
    style: str = "filled"
    penwidth: float = 1.2
    peripheries: int = 1
    description: str = ""

    def attrs(self) -> dict[str, str | int | float]:
        out: dict[str, str | int | float] = {
            "shape": self.shape,
            "style": self.style,
            "fillcolor": self.fill,
            "color": self.border,
            "penwidth": self.penwidth,
        }
        if self.peripheries != 1:
            out["peripheries"] = self.peripheries
        return out


CATEGORY_STYLES: dict[str, NodeStyle] = {
    "source": NodeStyle(
        "invhouse", "#d5f5e3", "#1e8449", description="source: produces items (rollouts)"
    ),
    "combine": NodeStyle(
        "box", "#d6eaf8", "#2471a3", style="rounded,filled", description="combine: reshapes"
    ),
    "train": NodeStyle(
        "box", "#fdebd0", "#b9770e", penwidth=2.0, description="train: updates the policy"
    ),
    "replay": NodeStyle(
        "box", "#ebdef0", "#7d3c98", style="filled,diagonals", description="replay"
    ),
    "merge": NodeStyle(
        "hexagon", "#fcf3cf", "#9a7d0a", description="merge: drives several branches"
    ),
    "sink": NodeStyle(
        "box", "#e5e8e8", "#2e4053", peripheries=2, description="sink: reports results"
    ),
}
"""Style of an operator node, keyed by ``OpSignature.category``."""

UNKNOWN_STYLE = NodeStyle(
    "box", "#ffffff", MUTED_COLOR, style="dashed,filled", description="unknown operator"
)
"""An op the catalog does not know (the plan fails validation): no category to look up."""

MISSING_STYLE = NodeStyle(
    "box", ERROR_FILL, ERROR_COLOR, style="dashed,filled", description="missing node"
)
"""Placeholder for an id that an ``inputs`` list names but the plan does not define."""

MARKED_STYLE = NodeStyle("box", "#ffffff", ERROR_COLOR, penwidth=2.5, description="diagnostic")
"""Legend sample for "this node has a diagnostic": any style, border red (orange: warning)."""

RESOURCE_STYLE = NodeStyle(
    "cylinder", "#f4f6f6", "#5d6d7e", description="resource (worker set, replay buffer)"
)
"""Resources are shared state, not dataflow: drawn as cylinders with dashed edges."""

RESOURCE_EDGE: dict[str, str | int | float] = {
    "style": "dashed",
    "color": "#7f8c8d",
    "fontcolor": "#7f8c8d",
    "arrowsize": 0.7,
}
"""Read/write edges between a resource and the ops that use it."""

DATA_EDGE: dict[str, str | int | float] = {"color": "#34495e", "fontcolor": "#34495e"}
"""Dataflow edges (items moving between operators)."""

PASSIVE_EDGE: dict[str, str | int | float] = {"color": "#aab7b8", "fontcolor": "#839192"}
"""A ``Concurrently`` input that is driven but not in ``output_indexes``: nothing flows on."""

ERROR_EDGE: dict[str, str | int | float] = {
    "color": ERROR_COLOR,
    "fontcolor": ERROR_COLOR,
    "penwidth": 2.0,
}
WARNING_EDGE: dict[str, str | int | float] = {
    "color": WARNING_COLOR,
    "fontcolor": WARNING_COLOR,
    "penwidth": 1.6,
}


def category_style(category: str | None) -> NodeStyle:
    """The style of an op category; :data:`UNKNOWN_STYLE` for ``None`` or a new category."""
    if category is None:
        return UNKNOWN_STYLE
    return CATEGORY_STYLES.get(category, UNKNOWN_STYLE)


# -- plan diffs (plangraph diff): status colours replace the category colours -------------

ADDED_COLOR = "#1e8449"
REMOVED_COLOR = ERROR_COLOR
CHANGED_COLOR = WARNING_COLOR
UNCHANGED_COLOR = "#95a5a6"

DIFF_STYLES: dict[str, NodeStyle] = {
    "added": NodeStyle("box", "#d5f5e3", ADDED_COLOR, penwidth=2.0, description="added (in b)"),
    "removed": NodeStyle(
        "box",
        ERROR_FILL,
        REMOVED_COLOR,
        style="dashed,filled",
        penwidth=2.0,
        description="removed (only in a)",
    ),
    "changed": NodeStyle("box", "#fdebd0", CHANGED_COLOR, penwidth=2.0, description="changed"),
    "unchanged": NodeStyle("box", "#f4f6f6", UNCHANGED_COLOR, description="unchanged"),
}
"""Fill and border of a node or resource by its status in a diff; the shape stays the one
of its category (``CATEGORY_STYLES``) or ``RESOURCE_STYLE``."""

DIFF_EDGES: dict[str, dict[str, str | int | float]] = {
    "added": {"color": ADDED_COLOR, "fontcolor": ADDED_COLOR, "penwidth": 2.0},
    "removed": {
        "color": REMOVED_COLOR,
        "fontcolor": REMOVED_COLOR,
        "penwidth": 2.0,
        "style": "dashed",
    },
    "changed": {"color": CHANGED_COLOR, "fontcolor": CHANGED_COLOR, "penwidth": 2.0},
    "unchanged": {"color": UNCHANGED_COLOR, "fontcolor": "#7f8c8d"},
}
"""Edge attributes by status (``changed``: the same edge with another port type)."""
