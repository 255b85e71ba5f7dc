"""Which checkpoints a run directory keeps: the newest ``keep``, plus the best by a metric.

``plangraph run --keep-checkpoints K --checkpoint-score KEY``: after every checkpoint the
run deletes its older ``checkpoints/iter_*`` directories except the ``K`` newest (what
``--resume`` needs is the newest) and the one with the highest score, where a checkpoint's
score is the last value of result key ``KEY`` (``/`` for nested keys, e.g.
``evaluation/episode_return_mean``) seen up to its iteration. ``K = 0`` keeps every one.

The scores live in ``checkpoints/checkpoints.json`` (``{"metric", "scores", "best"}``), so a
resumed run goes on pruning by them. It is data about the directory it sits in: a
hand-edited one can at worst make the run keep or delete its own ``iter_*`` directories
(names are only ever matched against the directories found, never used as paths).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_KEEP_CHECKPOINTS", "INDEX_FILE", "Retention", "best_checkpoint"]

DEFAULT_KEEP_CHECKPOINTS = 3
"""Newest checkpoints a run keeps by default (plus the best one)."""

INDEX_FILE = "checkpoints.json"
_NAME = re.compile(r"iter_\d{6,}")


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass
class Retention:
    """The retention rule of one run and the scores of its checkpoints (by dir name)."""

    keep: int
    metric: str
    scores: dict[str, float | None] = field(default_factory=dict)

    @classmethod
    def load(cls, run_dir: Path, *, keep: int, metric: str) -> Retention:
        """The rule for ``run_dir``, with the scores an earlier run of it recorded for the
        same metric (none when the file is missing, unreadable or of another metric)."""
        out = cls(keep=keep, metric=metric)
        try:
            data = json.loads((Path(run_dir) / "checkpoints" / INDEX_FILE).read_text("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return out
        if isinstance(data, dict) and data.get("metric") == metric:
            scores = data.get("scores")
            if isinstance(scores, dict):
                out.scores = {
                    k: _finite(v)
                    for k, v in scores.items()
                    if isinstance(k, str) and _NAME.fullmatch(k)
                }
        return out

    @property
    def best(self) -> str | None:
        """The checkpoint with the highest score (the newest among equals), or None."""
        scored = [(v, k) for k, v in self.scores.items() if v is not None]
        return max(scored)[1] if scored else None

    def record(self, checkpoint: Path, score: Any) -> None:
        """Note ``checkpoint``'s score (a number, or None when the metric has no value yet)."""
        self.scores[checkpoint.name] = _finite(score)

    def prune(self, run_dir: Path) -> list[Path]:
        """Delete the checkpoints the rule does not keep; write the index. Returns what was
        deleted."""
        root = Path(run_dir) / "checkpoints"
        found = sorted(p for p in root.glob("iter_*") if p.is_dir() and _NAME.fullmatch(p.name))
        kept = {p.name for p in found[-self.keep :]} if self.keep else {p.name for p in found}
        best = self.best
        if best is not None:
            kept.add(best)
        removed = [p for p in found if p.name not in kept]
        for p in removed:
            shutil.rmtree(p, ignore_errors=True)
            self.scores.pop(p.name, None)
        index = {
            "metric": self.metric,
            "scores": {k: self.scores.get(k) for k in sorted(kept) if (root / k).is_dir()},
            "best": best,
        }
        root.mkdir(parents=True, exist_ok=True)
        (root / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
        return removed


def best_checkpoint(run_dir: Path) -> Path | None:
    """The best checkpoint that ``checkpoints/checkpoints.json`` names, if it is there."""
    root = Path(run_dir) / "checkpoints"
    try:
        data = json.loads((root / INDEX_FILE).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    name = data.get("best") if isinstance(data, dict) else None
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return None
    path = root / name
    return path if (path / "algorithm.json").is_file() else None
