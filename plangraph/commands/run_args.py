"""``run.json``: the settings of a ``plangraph run``, read back by ``--resume``.

A run directory is data from whoever shared it: ``run.json`` is validated here (frozen,
``extra="forbid"``, strict types) and its ``plan`` is a record of where the plan came
from, never a file to load: ``--resume`` builds from the run's ``plan.source.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from plangraph.errors import CheckpointError

RUN_ARGS_FILE = "run.json"
PLAN_SNAPSHOT_FILE = "plan.source.json"
"""The plan as declared (IR JSON, ``${key}`` references kept): what ``--resume`` builds."""

MAX_SEED = 2**63 - 1


class RunArgs(BaseModel):
    """The contents of ``run.json`` (all keys required but ``no_pass``, ``imports``,
    ``evaluation_*``, ``keep_checkpoints``, ``checkpoint_score``, ``checkpoint_every`` and
    ``tensorboard``, which older runs lack; ``--resume`` fills in the rest of its command
    line from them)."""

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)

    plan: str = Field(description="the plan file first run (a record; never loaded)")
    env: str | None = Field(min_length=1, description="gymnasium env id, or the plan's")
    num_workers: int | None = Field(ge=0, description="remote rollout workers, or the plan's")
    seed: int = Field(ge=0, le=MAX_SEED, description="run seed")
    overrides: dict[str, JsonValue] = Field(description="--set config overrides")
    no_pass: list[str] = Field(
        default_factory=list,
        description="optimisation passes turned off (--no-pass); absent in older runs",
    )
    stop: dict[str, float] = Field(description="stop criteria: result key -> threshold")
    imports: list[str] = Field(
        default_factory=list,
        description="--import modules (a record: --resume never imports them by itself)",
    )
    evaluation_interval: int = Field(0, ge=0, description="iterations between evaluations")
    evaluation_episodes: int = Field(10, ge=1, description="episodes per evaluation")
    keep_checkpoints: int = Field(3, ge=0, description="newest checkpoints kept (0: all)")
    checkpoint_score: str | None = Field(None, description="result key ranking checkpoints")
    checkpoint_every: int = Field(
        10, ge=0, description="iterations between checkpoints (0: only at the end)"
    )
    tensorboard: bool = Field(True, description="TensorBoard event files written")


def read_run_args(run_dir: Path) -> RunArgs:
    """Validate ``run_dir/run.json``.

    Raises:
        CheckpointError: no such file, not JSON, or not the ``RunArgs`` shape (one line:
            the file, the field and what is wrong).
    """
    path = run_dir / RUN_ARGS_FILE
    if not path.is_file():
        raise CheckpointError(
            f"--resume {run_dir}: no {RUN_ARGS_FILE} there; is it a run directory?"
        )
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointError(
            f"{path}: not readable JSON ({exc}); the file is corrupt or was edited"
        ) from None
    try:
        return RunArgs.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(map(str, err["loc"])) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise CheckpointError(
            f"{path}: {where}: {err['msg']}{more}; the file is corrupt or was edited"
        ) from None


def registration_hint(run_dir: Path) -> str:
    """For an env, algorithm or model type the run may have registered itself: ``"; if
    the run's plan or modules registered it, pass --import P.py"`` (its Python plan and
    ``--import`` modules, from ``run_dir/run.json``); ``""`` when there are none. Never
    imports anything: it only names what to pass."""
    flags = import_flags(run_dir)
    if not flags:
        return ""
    return f"; if the run's plan or modules registered it, pass {flags}"


def import_flags(run_dir: Path) -> str:
    """``"--import my_envs --import plan.py"``: what ``--resume`` or ``plangraph eval`` of
    ``run_dir`` needs to register the run's own envs and operators again (its ``--import``
    modules and its Python plan, from ``run_dir/run.json``); ``""`` for none or an
    unreadable ``run.json``. Never imports anything."""
    try:
        saved = read_run_args(run_dir)
    except CheckpointError:
        return ""
    names = list(saved.imports)
    if saved.plan.endswith(".py") and saved.plan not in names:
        names.append(saved.plan)
    return " ".join(f"--import {n}" for n in names)
