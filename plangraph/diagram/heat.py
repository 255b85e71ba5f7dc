"""A run's profile drawn on the plan: heat colour per node, time per call, items per second.

``to_dot(compiled, profile=...)`` (``plangraph render PLAN --profile RUN_DIR``,
``plangraph profile RUN_DIR``) fills every node with a colour for its share of the
run's wall time (white: none, dark red: all of it), adds a line with that share, the
milliseconds per call (per item the node emitted) and the calls per iteration, and the
share of each phase the node spent (``sampling 27.9% · object store 0.4%``). Edges get the
items per second that flowed along them. Every number is formatted here, once, so the DOT
stays stable for a fixed ``profile.json``.
"""

from __future__ import annotations

import itertools

from plangraph.ir.profile import PHASE_LABELS, RunProfile

__all__ = [
    "HEAT_STOPS",
    "PHASE_SHORT",
    "edge_note",
    "heat_color",
    "node_lines",
    "phase_summary",
    "title_lines",
]

HEAT_STOPS: tuple[tuple[float, str], ...] = (
    (0.0, "#fff7ec"),
    (1 / 3, "#fdd49e"),
    (2 / 3, "#fc8d59"),
    (1.0, "#e34a33"),
)
"""Share of wall time -> fill (ColorBrewer OrRd, stopping short of its darkest shades so
that the labels' dark text stays readable), interpolated linearly between stops."""

NOT_PROFILED_FILL = "#f2f3f4"
"""Fill of a node the profile has no entry for (it never ran in that run)."""

PHASE_SHORT: dict[str, str] = {
    "sampling": "sampling",
    "object_store": "object store",
    "learning": "learning",
    "broadcast": "broadcast",
    "idle": "waiting (local)",
    "other": "other",
}
"""Short phase names for labels (``PHASE_LABELS`` has the long ones)."""


def _hex(rgb: tuple[float, float, float]) -> str:
    return "#" + "".join(f"{round(c):02x}" for c in rgb)


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def heat_color(share: float) -> str:
    """The fill for a share of wall time in [0, 1] (clamped)."""
    share = min(1.0, max(0.0, share))
    for (lo, lo_color), (hi, hi_color) in itertools.pairwise(HEAT_STOPS):
        if share <= hi:
            t = (share - lo) / (hi - lo)
            a, b = _rgb(lo_color), _rgb(hi_color)
            return _hex(tuple(x + (y - x) * t for x, y in zip(a, b, strict=True)))  # type: ignore[arg-type]
    return HEAT_STOPS[-1][1]


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _ms(seconds: float) -> str:
    ms = 1000 * seconds
    if ms >= 100:
        return f"{ms:,.0f} ms"
    if ms >= 1:
        return f"{ms:.1f} ms"
    return f"{ms:.3f} ms"


def _rate(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 1:
        return f"{x:.1f}"
    return f"{x:.2f}"


def node_lines(profile: RunProfile, node_id: str) -> list[str]:
    """Plain-text profile lines of one node's label (one line saying so for a node the
    profile has no entry for: it did not run)."""
    node = profile.nodes.get(node_id)
    if node is None:
        return ["not run in this profile"]
    share = profile.share(node_id)
    parts = [f"{_pct(share)} of wall time"]
    if node.items:
        parts.append(f"{_ms(node.seconds / node.items)}/call")
    if profile.iterations:
        parts.append(f"{_rate(node.items / profile.iterations)} calls/iter")
    lines = [" \u00b7 ".join(parts)]
    if node.phases and profile.wall_s > 0:
        spent = [
            f"{PHASE_SHORT[name]} {_pct(node.phases[name] / profile.wall_s)}"
            for name in PHASE_LABELS
            if node.phases.get(name, 0.0) > 0
        ]
        if spent:
            lines.append(" \u00b7 ".join(spent))
    return lines


def edge_note(profile: RunProfile, src: str) -> str | None:
    """``"1,234 items/s"`` along an edge out of ``src`` (every consumer sees every item)."""
    node = profile.nodes.get(src)
    if node is None or profile.wall_s <= 0:
        return None
    return f"{_rate(node.items / profile.wall_s)} items/s"


def phase_summary(profile: RunProfile) -> str:
    """``"sampling 27.9% · learning 65.2% · ..."``: the non-zero phases, report order."""
    if profile.wall_s <= 0:
        return "no time profiled"
    seconds = profile.phase_seconds()
    return " \u00b7 ".join(
        f"{PHASE_SHORT[name]} {_pct(s / profile.wall_s)}" for name, s in seconds.items() if s > 0
    )


def title_lines(profile: RunProfile) -> list[str]:
    """The diagram title's profile rows."""
    lines = [
        f"profile: {profile.span()}, {profile.wall_s:,.2f} s in the dataflow",
        phase_summary(profile),
    ]
    for rid, t in sorted(profile.learner_threads.items()):
        lines.append(f"learner thread @{rid}: busy {t.busy_s:,.2f} s beside the driver")
    return lines
