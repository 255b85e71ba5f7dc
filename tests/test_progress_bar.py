"""The ``plangraph run`` progress bar fits an 80-column terminal."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from plangraph.runtime.run_loop import progress_columns


def _line(
    *,
    evaluating: bool,
    width: int,
    steps: str = "env steps 56,320",
    ret: str = "471.7",
    sps: str = "7,398",
) -> str:
    console = Console(width=width, record=True, force_terminal=True, file=io.StringIO())
    progress = Progress(*progress_columns(evaluating=evaluating), console=console)
    progress.add_task(
        "train", total=1000, completed=990, iteration=55, steps=steps, ret=ret,
        eval="500.0", sps=sps, eta="0s",
    )  # fmt: skip
    console.print(progress.get_renderable())
    return console.export_text().rstrip("\n")


def test_a_run_that_does_not_evaluate_fits_80_columns_in_full() -> None:
    line = _line(evaluating=False, width=80)
    assert "eval" not in line and "…" not in line
    assert line.startswith("iter 55 ━")
    assert line.endswith("99% env steps 56,320 return 471.7 7,398 steps/s 0:00:00 ETA 0s")


def test_a_run_that_evaluates_shows_the_greedy_return() -> None:
    line = _line(evaluating=True, width=120)
    assert "return 471.7 eval 500.0 7,398 steps/s 0:00:00 ETA 0s" in line


def test_an_offline_run_shows_rows_read_and_its_epoch_in_80_columns() -> None:
    # An offline run samples no episodes (return -) and no env steps (- steps/s).
    line = _line(evaluating=False, width=80, steps="rows 100,352 (epoch 2)", ret="-", sps="-")
    assert "…" not in line
    assert line.endswith("rows 100,352 (epoch 2) return - - steps/s 0:00:00 ETA 0s")
