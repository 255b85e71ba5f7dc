"""``profile.json``: where a run's wall time went, per plan node and per phase.

Written into the run directory by ``plangraph run`` at every checkpoint and at the end
(``plangraph.runtime.profile_log``), read by ``plangraph profile RUN_DIR`` and
``plangraph render PLAN --profile RUN_DIR``. A run directory is data, whoever made it:
the file is strict JSON, validated by :class:`RunProfile` (nothing in it runs).

Times are wall-clock seconds of the driver, measured inside the dataflow (``wall_s``:
the time the driver spent pulling results, i.e. the iterations; logging and checkpoints
between iterations are not in it). Each second is attributed to exactly one node, the one
whose own code ran (time in the nodes it pulls is theirs), so ``sum(node.seconds) ==
wall_s``. Phases say what the driver was doing: see :data:`PHASE_LABELS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "PHASE_LABELS",
    "PROFILE_FILE",
    "LearnerThreadProfile",
    "NodeProfile",
    "ProfileError",
    "RunProfile",
    "read_profile",
]

PROFILE_FILE = "profile.json"
"""The file name in a run directory."""

PHASE_LABELS: dict[str, str] = {
    "sampling": "sampling (waiting on rollout workers)",
    "object_store": "waiting on the object store (fetching results)",
    "learning": "learning (policy updates in the driver)",
    "broadcast": "broadcasting weights to the workers",
    "idle": "waiting on a learner thread or local queue",
}
"""Phase name -> what it measures, in report order; time in no phase is "other driver
work" (concatenating batches, replay sampling, metrics, the flow itself)."""

_Seconds = Field(ge=0.0, allow_inf_nan=False, description="wall-clock seconds")
Seconds = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class NodeProfile(BaseModel):
    """One plan node's share of the run."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    seconds: float = _Seconds
    items: int = Field(ge=0, description="items the node emitted (NOT_READY excluded)")
    pulls: int = Field(ge=0, description="pulls answered, not-ready markers included")
    phases: dict[str, Seconds] = Field(
        default_factory=dict, description="seconds of the node's own time in each phase"
    )


class LearnerThreadProfile(BaseModel):
    """A learner thread, which trains beside the driver (its time is not in ``wall_s``)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    busy_s: float = _Seconds


class RunProfile(BaseModel):
    """The content of ``profile.json`` (version 1).

    ``iterations``: iterations profiled (this process's; a resumed run starts afresh),
    ``first_iteration``: the number of the first of them. ``phases``: seconds per phase
    over all nodes (keys of :data:`PHASE_LABELS`; absent means 0).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    version: Literal[1] = 1
    plan: str
    iterations: int = Field(ge=0)
    first_iteration: int = Field(ge=1)
    wall_s: float = _Seconds
    phases: dict[str, Seconds] = Field(default_factory=dict)
    nodes: dict[str, NodeProfile] = Field(default_factory=dict)
    learner_threads: dict[str, LearnerThreadProfile] = Field(default_factory=dict)

    def phase_seconds(self) -> dict[str, float]:
        """Every phase of :data:`PHASE_LABELS` plus ``"other"`` (the rest of ``wall_s``),
        in report order; they sum to ``wall_s``."""
        out = {name: float(self.phases.get(name, 0.0)) for name in PHASE_LABELS}
        out["other"] = max(0.0, self.wall_s - sum(out.values()))
        return out

    def share(self, node_id: str) -> float:
        """Fraction of ``wall_s`` the node took (0.0 for a node not profiled)."""
        node = self.nodes.get(node_id)
        if node is None or self.wall_s <= 0:
            return 0.0
        return node.seconds / self.wall_s

    def span(self) -> str:
        """``"iterations 1-6"``, ``"iteration 4"`` or ``"no iteration finished"``."""
        if self.iterations == 0:
            return "no iteration finished"
        first, last = self.first_iteration, self.first_iteration + self.iterations - 1
        return f"iterations {first}-{last}" if last > first else f"iteration {first}"

    def table(self) -> str:
        """Where the time went, as one plain-text table: seconds and % of ``wall_s`` per
        phase (:data:`PHASE_LABELS`, then other driver work and the total), and each
        learner thread's busy time beside it."""
        rows = [
            (PHASE_LABELS.get(k, "other driver work"), s) for k, s in self.phase_seconds().items()
        ]
        rows.append(("total", self.wall_s))
        width = max(len(label) for label, _ in rows)
        lines = [
            f"where the time goes: plan {self.plan}, {self.span()}, "
            f"{self.wall_s:,.3f} s in the dataflow",
            f"  {'phase':<{width}}  {'seconds':>10}  {'%':>6}",
        ]
        for label, seconds in rows:
            pct = 100 * seconds / self.wall_s if self.wall_s > 0 else 0.0
            lines.append(f"  {label:<{width}}  {seconds:>10,.3f}  {pct:>6.1f}")
        for rid, t in sorted(self.learner_threads.items()):
            pct = 100 * t.busy_s / self.wall_s if self.wall_s > 0 else 0.0
            lines.append(
                f"  learner thread @{rid} trains beside the driver: busy {t.busy_s:,.3f} s "
                f"({pct:.1f}% of the driver's time)"
            )
        return "\n".join(lines) + "\n"

    def to_json(self) -> str:
        """Deterministic JSON (sorted keys, two-space indent, trailing newline)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


class ProfileError(ValueError):
    """``profile.json`` is missing, not JSON, or not a :class:`RunProfile`."""


def read_profile(path: Path) -> RunProfile:
    """Read and validate a run directory's profile (``path``: the directory or the file).

    Raises:
        ProfileError: one line naming the file and what is wrong.
    """
    path = Path(path)
    file = path / PROFILE_FILE if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        where = f"{path}: no {PROFILE_FILE}" if path.is_dir() else f"{file}: no such file"
        raise ProfileError(
            f"{where} (plangraph run writes it at every checkpoint and at the end)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{file}: cannot read it ({exc})") from None
    try:
        raw = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise ProfileError(f"{file}: not valid JSON ({exc})") from None
    try:
        profile = RunProfile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = "/" + "/".join(str(p) for p in err["loc"])
        raise ProfileError(f"{file}: {where}: {err['msg']}") from None
    return profile


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")
