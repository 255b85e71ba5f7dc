"""``progress.csv``: the rows of ``result.jsonl`` as a table, one column per flattened key.

Columns are the results' leaves with ``/``-joined keys (``timers/train``,
``evaluation/episode_return_mean``), the same names as ``result.jsonl`` and ``--stop``.
The column order is stable: the first row's keys sorted, then each key seen later
appended (sorted among those new in the same row). When a row brings a new key the whole
file is rewritten with the wider header and empty cells in the earlier rows, as
Stable-Baselines3's ``CSVOutputFormat`` does, so that pandas, spreadsheets and
``csv.DictReader`` read every row with every column. Missing and non-finite values are
empty cells.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["PROGRESS_FILE", "ProgressCsv", "drop_rows_after", "flatten_row"]

PROGRESS_FILE = "progress.csv"


def _cell(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item) and getattr(value, "size", 1) == 1:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return repr(list(value))
    return value


def _flatten(value: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key in value:
        inner = value[key]
        name = f"{prefix}{key}"
        if isinstance(inner, Mapping):
            yield from _flatten(inner, f"{name}/")
        else:
            yield name, _cell(inner)


def flatten_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` as one CSV row: ``{"iteration": 3, "timers/train": 0.01, ...}``."""
    return dict(_flatten(result, ""))


class ProgressCsv:
    """Appends rows to ``run_dir/progress.csv``; re-opening an existing file (``--resume``)
    keeps its rows and columns."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / PROGRESS_FILE
        self.columns: list[str] = []
        if self.path.is_file() and self.path.stat().st_size > 0:
            with self.path.open(newline="", encoding="utf-8") as f:
                self.columns = next(csv.reader(f), [])
        self._file = self.path.open("a", newline="", encoding="utf-8")

    def write(self, result: Mapping[str, Any]) -> None:
        row = flatten_row(result)
        new = sorted(k for k in row if k not in set(self.columns))
        if new:
            self._widen(new)
        csv.DictWriter(self._file, fieldnames=self.columns, restval="").writerow(row)
        self._file.flush()

    def _widen(self, new: list[str]) -> None:
        """Rewrite the file with ``new`` columns appended to the header."""
        self._file.close()
        rows: list[dict[str, str]] = []
        if self.columns:
            with self.path.open(newline="", encoding="utf-8") as f:
                rows = list(csv.DictReader(f))
        self.columns = [*self.columns, *new]
        _rewrite(self.path, self.columns, rows)
        self._file = self.path.open("a", newline="", encoding="utf-8")

    def close(self) -> None:
        self._file.close()


def drop_rows_after(run_dir: Path, iteration: int) -> None:
    """Drop the rows of iterations after ``iteration`` from ``run_dir/progress.csv`` (a
    resumed run logs them again); rows without an ``iteration`` are kept."""
    path = Path(run_dir) / PROGRESS_FILE
    if not path.is_file():
        return
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows, columns = list(reader), list(reader.fieldnames or [])
    keep = [r for r in rows if not r.get("iteration") or int(r["iteration"]) <= iteration]
    if "iteration" in columns and len(keep) < len(rows):
        _rewrite(path, columns, keep)


def _rewrite(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    """Write ``path`` anew with header ``columns`` and ``rows``."""
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(path)  # a crash mid-rewrite leaves the old file whole
