"""Per-iteration result logs of a run directory: ``result.jsonl``, ``progress.csv``,
TensorBoard events and any extra loggers (MLflow, W&B: ``plangraph.runtime.loggers``).

Layout of a run directory (``plangraph run --out DIR``)::

    DIR/result.jsonl            one JSON object per training iteration (sorted keys)
    DIR/progress.csv            the same rows, one column per ``/``-joined key
    DIR/events.out.tfevents.*   TensorBoard scalars, tagged ``rollout/``, ``learner/``,
                                ``time/``, ``eval/``, ``counters/`` (``metric_tags``)
    DIR/plan.json, plan.dot     the plan as compiled (a valid plan file) and drawn (plan.svg)
    DIR/checkpoints/iter_000010 checkpoints (see ``Algorithm.save``)
    DIR/profile.json            where the time went, per node and phase (``ir.profile``)
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from plangraph.runtime.metric_tags import metric_tags
from plangraph.runtime.progress_csv import ProgressCsv, drop_rows_after

if TYPE_CHECKING:
    from plangraph.runtime.result import Result


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "size", 1) == 1:
        value = value.item()  # numpy / torch scalars
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def flatten_scalars(result: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every finite numeric leaf of a nested result dict as ``("a/b", value)``, sorted."""
    for key in sorted(result, key=str):
        value = result[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten_scalars(value, prefix=f"{name}/")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)) and math.isfinite(value):
            yield name, float(value)


class MetricLogger(Protocol):
    """An extra destination of each iteration's metrics (``plangraph.runtime.loggers``)."""

    def log(self, tags: Mapping[str, float], step: int) -> None:
        """Record ``tags`` (``metric_tags`` names) at ``step`` (env steps sampled)."""

    def close(self) -> None: ...


def result_step(result: Mapping[str, Any]) -> int:
    """The x axis of every logger: env steps sampled (the iteration before any)."""
    return int(result.get("num_env_steps_sampled", result.get("iteration", 0)))


class TensorBoardEvents:
    """The ``MetricLogger`` of a TensorBoard event file in ``run_dir``
    (``events.out.tfevents.*``, written by TensorBoard's own ``EventFileWriter``): one
    event per iteration holding every tag's scalar (``simple_value``, float32), flushed at
    once so a live TensorBoard sees it.

    One event with all of an iteration's scalars, not one per scalar as torch's
    ``SummaryWriter.add_scalar`` writes them: TensorBoard reads both alike, and
    ``add_scalar`` costs about 60 us a call, 1.9 ms an iteration for the PPO plan's 31
    tags (0.5 ms this way).
    """

    def __init__(self, run_dir: Path, *, purge_step: int | None = None) -> None:
        """``purge_step``: TensorBoard drops the run's earlier events at steps >= it (a
        ``SessionLog.START`` restart marker, as torch's ``SummaryWriter(purge_step=...)``
        writes one): the iterations a resumed run logged after its checkpoint."""
        # Imported here (about 0.15 s), so that a run without TensorBoard does not pay.
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self._event, self._summary = Event, Summary
        self._writer = EventFileWriter(str(run_dir))
        if purge_step is not None:
            start = SessionLog(status=SessionLog.START)
            self._writer.add_event(Event(wall_time=time.time(), step=purge_step, session_log=start))
            self._writer.flush()

    def log(self, tags: Mapping[str, float], step: int) -> None:
        """Record ``tags`` (name -> value) at ``step`` (env steps sampled)."""
        values = [self._summary.Value(tag=k, simple_value=float(v)) for k, v in tags.items()]
        summary = self._summary(value=values)
        self._writer.add_event(self._event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class RunLog:
    """Appends each iteration's result to ``result.jsonl``, ``progress.csv``, TensorBoard
    event files and ``loggers``; ``close`` closes them all.

    Re-opening a run directory appends; earlier lines are kept. A run resumed from the
    checkpoint of iteration ``resume_iteration`` (``--resume``; 0: no checkpoint, from
    scratch) runs the iterations after it again, so the rows logged after it (by a run
    that crashed or was killed before its next checkpoint) are dropped first:
    ``result.jsonl`` and ``progress.csv`` are cut (``cut_results_after``; ``dropped``
    counts them) and TensorBoard gets a restart marker at the first step after the
    checkpoint's. ``loggers`` (MLflow, W&B) keep what they were sent.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        tensorboard: bool = True,
        loggers: Sequence[MetricLogger] = (),
        resume_iteration: int | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.dropped, purge_step = 0, None
        if resume_iteration is not None:
            self.dropped, kept_step = cut_results_after(self.run_dir, resume_iteration)
            if self.dropped:
                purge_step = 0 if kept_step is None else kept_step + 1
        self._jsonl = (self.run_dir / "result.jsonl").open("a", encoding="utf-8")
        self._csv = ProgressCsv(self.run_dir)
        # TensorBoard first, as before the --logger loggers.
        self._loggers: list[MetricLogger] = (
            [TensorBoardEvents(self.run_dir, purge_step=purge_step)] if tensorboard else []
        )
        self._loggers += loggers

    def write(self, result: Result) -> None:
        """Append ``result`` as one JSON line and one CSV row, and its numeric leaves under
        their ``metric_tags`` names to TensorBoard and each logger at step
        ``num_env_steps_sampled`` (env steps)."""
        self._jsonl.write(json.dumps(_jsonable(result), sort_keys=True) + "\n")
        self._jsonl.flush()
        self._csv.write(result)
        if not self._loggers:
            return
        step, tags = result_step(result), metric_tags(result)
        for logger in self._loggers:
            logger.log(tags, step)

    def close(self) -> None:
        self._jsonl.close()
        self._csv.close()
        for logger in self._loggers:
            logger.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cut_results_after(run_dir: Path, iteration: int) -> tuple[int, int | None]:
    """Drop the rows of iterations after ``iteration`` from ``run_dir/result.jsonl`` and
    ``progress.csv`` (each file rewritten whole, then renamed over the old one, so a crash
    leaves either version); rows without an ``iteration`` are kept.

    Returns:
        ``(rows dropped from result.jsonl, num_env_steps_sampled of its last kept row or
        None)``: the step where a resumed run's TensorBoard curve continues.

    Raises:
        ValueError: a line of ``result.jsonl`` is not JSON.
    """
    dropped, kept_step = 0, None
    path = Path(run_dir) / "result.jsonl"
    if path.is_file():
        kept: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line:
                continue
            row = json.loads(line)
            if int(row.get("iteration", 0)) > iteration:
                dropped += 1
                continue
            kept.append(line + "\n")
            kept_step = result_step(row)
        if dropped:
            tmp = path.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(kept), encoding="utf-8")
            tmp.replace(path)
    drop_rows_after(run_dir, iteration)
    return dropped, kept_step


def read_results(run_dir: Path) -> list[Result]:
    """All results logged in ``run_dir/result.jsonl``, in order (non-finite floats read
    back as ``None``)."""
    path = Path(run_dir) / "result.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
