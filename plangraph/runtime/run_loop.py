"""The driver loop behind ``plangraph run``: train until a stop criterion, with a progress
bar, a result log, periodic checkpoints and a clean stop on Ctrl-C.

When to stop is decided by ``TrainingLoop`` (``plangraph.runtime.training_loop``), the same
loop as ``Algorithm.run``; this module adds what a command-line run shows and keeps."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plangraph.runtime.profile_log import write_profile
from plangraph.runtime.retention import Retention
from plangraph.runtime.run_log import MetricLogger, RunLog
from plangraph.runtime.stopping import StopCriteria, lookup
from plangraph.runtime.training_loop import TrainingLoop

if TYPE_CHECKING:
    from rich.console import Console

    from plangraph.runtime.algorithm import Algorithm
    from plangraph.runtime.result import Result


@dataclass(frozen=True)
class RunSummary:
    """How a run ended."""

    result: Mapping[str, Any]  # the last Result; empty if stopped before one was made
    reason: str  # TrainingLoop.reason: "stop criterion met: ...", "interrupted ...", ...
    checkpoint: Path | None
    interrupted: bool
    last_evaluation: Mapping[str, float] | None = None  # the run's last ``evaluation``
    best: Path | None = None  # the best checkpoint kept (``retention``), if scored


def _fmt(value: Any, spec: str = ",.0f") -> str:
    return "-" if not isinstance(value, (int, float)) else format(value, spec)


def checkpoint_dir(run_dir: Path, iteration: int) -> Path:
    return run_dir / "checkpoints" / f"iter_{iteration:06d}"


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest ``checkpoints/iter_*`` of a run directory with a complete checkpoint."""
    found = sorted((Path(run_dir) / "checkpoints").glob("iter_*"))
    complete = [p for p in found if (p / "algorithm.json").exists()]
    return complete[-1] if complete else None


@contextmanager
def _graceful_sigint(console: Console) -> Iterator[threading.Event]:
    """First Ctrl-C: set the returned event (the loop stops after the current iteration,
    so counters, policy and checkpoint stay consistent). Second Ctrl-C: stop at once."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if requested.is_set():
            # Further presses would interrupt the checkpoint and shutdown that follow.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            raise KeyboardInterrupt
        requested.set()
        console.print(
            "Ctrl-C: stopping after this iteration (press Ctrl-C again to stop at once)",
            highlight=False,
        )

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def ignoring_sigint() -> Iterator[None]:
    """Ctrl-C is ignored inside (main thread only): a final checkpoint, stopping actors
    and shutting Ray down must finish, or a half-written checkpoint is left, Ray's
    processes outlive the driver, and Ray's atexit hook prints a KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def progress_columns(*, evaluating: bool) -> list[Any]:
    """The progress bar's columns (rich ``ProgressColumn``s), reading the task fields
    ``iteration, steps, ret, eval, sps, eta``; the ``eval`` column only for a run that
    evaluates, so that a run that does not fits an 80-column terminal with its elapsed
    time in full."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn

    columns: list[Any] = [
        TextColumn("[bold]iter {task.fields[iteration]}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[steps]}"),
        TextColumn("return {task.fields[ret]}"),
    ]
    if evaluating:
        columns.append(TextColumn("eval {task.fields[eval]}"))
    columns += [
        TextColumn("{task.fields[sps]} steps/s"),
        TimeElapsedColumn(),
        TextColumn("ETA {task.fields[eta]}"),
    ]
    return columns


def train_until(
    algo: Algorithm,
    stop: StopCriteria,
    run_dir: Path,
    *,
    checkpoint_every: int = 10,
    show_progress: bool = True,
    tensorboard: bool = True,
    max_iterations: int | None = None,
    console: Console | None = None,
    retention: Retention | None = None,
    loggers: Sequence[MetricLogger] = (),
    resume_iteration: int | None = None,
) -> RunSummary:
    """Call ``algo.train()`` until ``stop`` is met (or ``max_iterations``, or Ctrl-C).

    Each result goes to ``run_dir/result.jsonl``, ``progress.csv``, TensorBoard and
    ``loggers`` (closed when the run ends); a checkpoint (and
    ``profile.json``, where the time went) is written every ``checkpoint_every``
    iterations (0 disables periodic ones) and always at the end,
    including after Ctrl-C (the first one finishes the current iteration; a second one
    stops at once and checkpoints the state as it is; further ones are ignored while that
    checkpoint is written). After each, ``retention`` (default: keep all) deletes the
    checkpoints it does not keep (``plangraph.runtime.retention``).

    ``resume_iteration``: ``algo`` was restored from the checkpoint of that iteration (0:
    a resumed run without one); the rows ``run_dir``'s logs hold after it are dropped
    first, with a note on ``console`` (``RunLog``).
    """
    from rich.console import Console
    from rich.progress import Progress

    console = console or Console(stderr=True)
    progress = Progress(
        *progress_columns(evaluating=bool(getattr(algo, "evaluation_interval", 0))),
        console=console,
        disable=not show_progress,
        transient=False,
    )
    started = time.monotonic()
    # The outer ignoring_sigint is what _graceful_sigint restores on exit, so no Ctrl-C
    # falls between the loop and the final checkpoint.
    with ignoring_sigint():
        return _train_until(
            algo,
            stop,
            run_dir,
            checkpoint_every=checkpoint_every,
            show_progress=show_progress,
            tensorboard=tensorboard,
            max_iterations=max_iterations,
            console=console,
            progress=progress,
            started=started,
            retention=retention,
            loggers=loggers,
            resume_iteration=resume_iteration,
        )


def _train_until(
    algo: Algorithm,
    stop: StopCriteria,
    run_dir: Path,
    *,
    checkpoint_every: int,
    show_progress: bool,
    tensorboard: bool,
    max_iterations: int | None,
    console: Console,
    progress: Any,
    started: float,
    retention: Retention | None,
    loggers: Sequence[MetricLogger] = (),
    resume_iteration: int | None = None,
) -> RunSummary:
    """``train_until``'s loop, called with Ctrl-C ignored outside ``_graceful_sigint``."""
    last_saved = -1
    last_evaluation = None
    score: Any = None  # the retention metric's last value

    def save(iteration: int) -> Path:
        path = algo.save(checkpoint_dir(run_dir, iteration))
        if retention is not None:
            retention.record(path, score)
            retention.prune(run_dir)
        return path

    with (
        RunLog(
            run_dir, tensorboard=tensorboard, loggers=loggers, resume_iteration=resume_iteration
        ) as log,
        progress,
        _graceful_sigint(console) as stop_requested,
    ):
        if log.dropped:
            console.print(
                f"dropped {log.dropped} logged iteration(s) after iteration {resume_iteration} "
                "from result.jsonl, progress.csv and TensorBoard: they ran after the last "
                "checkpoint and run again from it",
                highlight=False,
                soft_wrap=True,
            )
        task = progress.add_task(
            "train",
            total=1000,
            iteration=0,
            steps="env steps 0",
            ret="-",
            eval="-",
            sps="-",
            eta="-",
        )
        loop = TrainingLoop(
            algo.train,
            stop,
            max_iterations=max_iterations,
            interrupt_requested=stop_requested.is_set,
        )
        try:
            for result in loop:
                log.write(result)
                last_evaluation = result.get("evaluation", last_evaluation)
                if retention is not None:
                    value = lookup(result, retention.metric)
                    score = value if isinstance(value, int | float) else score
                _show(progress, task, stop, result, time.monotonic() - started)
                if not show_progress:
                    console.print(_progress_line(result), highlight=False)
                iteration = int(result.get("iteration", 0))
                if checkpoint_every and iteration % checkpoint_every == 0:
                    save(iteration)
                    write_profile(run_dir, algo)
                    last_saved = iteration
        except KeyboardInterrupt:
            loop.interrupt()
    assert loop.reason is not None  # the loop only ends with a reason (or raises)
    final: Mapping[str, Any] = loop.result if loop.result is not None else {}
    checkpoint = None
    iteration = int(final.get("iteration", algo.iteration))
    if iteration > 0:
        checkpoint = checkpoint_dir(run_dir, iteration)
        if iteration != last_saved:
            save(iteration)  # Ctrl-C ignored here (train_until)
    write_profile(run_dir, algo)
    return RunSummary(
        result=final,
        reason=loop.reason,
        checkpoint=checkpoint,
        interrupted=loop.interrupted,
        last_evaluation=last_evaluation,
        best=run_dir / "checkpoints" / retention.best if retention and retention.best else None,
    )


def _show(progress: Any, task: Any, stop: StopCriteria, result: Result, elapsed_s: float) -> None:
    """Move the progress bar to ``result``; the ETA extrapolates ``elapsed_s`` (s) over the
    fraction of the way to the nearest stop criterion."""
    frac = stop.progress(result)
    eta = "-"
    if 0.0 < frac < 1.0:
        eta = f"{elapsed_s * (1.0 - frac) / frac:,.0f}s"
    progress.update(
        task,
        completed=int(frac * 1000),
        iteration=result.get("iteration", 0),
        steps=_steps_text(result, short=True),
        ret=_return_text(result),
        sps=_fmt(result.get("env_steps_per_s")) if not _offline(result) else "-",
        eta=eta,
    )
    evaluation = result.get("evaluation")
    if evaluation:  # the last evaluation stays on the bar until the next one
        progress.update(task, eval=_fmt(evaluation.get("episode_return_mean"), ".1f"))


def _progress_line(result: Result) -> str:
    """The plain-text progress line (``--no-progress`` or no terminal)."""
    evaluation = result.get("evaluation")
    greedy = (
        f", eval return {_fmt(evaluation.get('episode_return_mean'), '.1f')}" if evaluation else ""
    )
    return (
        f"iter {result.get('iteration')}: {_steps_text(result)}, "
        f"return {_return_text(result)}{greedy}"
    )


def _offline(result: Mapping[str, Any]) -> bool:
    """Whether the run trains on a dataset without sampling (``ReadExperiences``)."""
    counters = result.get("counters") or {}
    return bool(counters.get("num_env_steps_read")) and not result.get("num_env_steps_sampled")


def _steps_text(result: Mapping[str, Any], *, short: bool = False) -> str:
    """``env steps N`` sampled; for an offline run, ``rows read N (epoch E)`` instead
    (E: the dataset pass under way, 1-based; ``short``: ``rows N (epoch E)``, for the
    progress bar's 80 columns)."""
    if not _offline(result):
        return f"env steps {_fmt(result.get('num_env_steps_sampled'))}"
    counters = result.get("counters") or {}
    epoch = int(counters.get("num_dataset_epochs", 0)) + 1
    label = "rows" if short else "rows read"
    return f"{label} {_fmt(counters.get('num_env_steps_read'))} (epoch {epoch})"


def _return_text(result: Result) -> str:
    """``episode_return_mean`` as shown; a multi-agent run shows one return per policy
    (``ppo_policy 500.0, dqn_policy 451.7``: its agents' episodes)."""
    policies = result.get("policies")
    if not policies:
        return _fmt(result.get("episode_return_mean"), ".1f")
    return ", ".join(
        f"{pid} {_fmt(p.get('episode_return_mean'), '.1f')}" for pid, p in policies.items()
    )


SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("iterations", "iteration", ",.0f"),
    ("env steps sampled", "num_env_steps_sampled", ",.0f"),
    ("env steps trained", "num_env_steps_trained", ",.0f"),
    ("rows read (offline)", "counters/num_env_steps_read", ",.0f"),
    ("dataset epochs completed (offline)", "counters/num_dataset_epochs", ",.0f"),
    ("env steps recorded", "counters/num_env_steps_recorded", ",.0f"),
    ("episodes", "episodes_total", ",.0f"),
    ("episode return mean (last 100)", "episode_return_mean", ".2f"),
    ("episode length mean", "episode_len_mean", ".1f"),
    ("evaluation return mean (greedy)", "evaluation/episode_return_mean", ".2f"),
    ("training time (s)", "time_total_s", ".1f"),
    ("env steps/s (overall)", "env_steps_per_s_total", ",.0f"),
)
"""The summary table: (label, ``Result`` key, format spec) per row. Rows of
``_WHEN_PRESENT`` appear only in runs that have the value."""

_WHEN_PRESENT = frozenset({"counters/num_env_steps_recorded"})
"""Rows only some runs have: rows written to a dataset (``--record``, ``WriteExperiences``)."""


def summary_table(summary: RunSummary) -> Any:
    """A rich table of the final result's headline figures."""
    from rich.table import Table

    r = dict(summary.result)
    if summary.last_evaluation is not None:
        r["evaluation"] = summary.last_evaluation
    table = Table(title="plangraph run", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    for name, key, spec in SUMMARY_ROWS:
        if name.endswith("(offline)") and not _offline(r):
            continue
        if _offline(r) and key in ("num_env_steps_sampled", "env_steps_per_s_total"):
            continue  # an offline run samples nothing
        if key in _WHEN_PRESENT and lookup(r, key) is None:
            continue
        table.add_row(name, _fmt(lookup(r, key), spec))
    return table
