"""``plangraph run --resume``: refuse a plan its checkpoint cannot be restored into.

The rules (which changes block, which are harmless) are
``plangraph.runtime.resume_check``'s; this module feeds it the two plans as each launch ran
them (``--env``/``--num-workers`` applied) and writes the refusal or the note.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from plangraph.commands.run_args import RunArgs

__all__ = ["check_resumed_plan"]


def check_resumed_plan(
    compiled: Any,
    plan_path: str,
    checkpoint: Any,
    run_dir: Path,
    saved: RunArgs,
    *,
    env: str | None,
    num_workers: int | None,
    cli_env: str | None,
    cli_num_workers: int | None,
) -> None:
    """Compare ``compiled`` (the plan resuming, from ``plan_path``, with this launch's
    ``env``/``num_workers``) with the plan that wrote ``checkpoint`` (its ``plan.json``,
    with ``saved``'s ``run.json`` settings).

    Prints the harmless changes as a note on stderr.

    Raises:
        CheckpointError: a change makes the checkpoint unusable; the message lists each
            such change (where it was made, the JSON pointer, the values, why), then a
            hint. Also: the saved plan is corrupt, or (a run directory without any
            ``plan.json``) the checkpoint is of another plan.
    """
    from plangraph.compiler.plan_view import PlanView, read_saved_view
    from plangraph.errors import CheckpointError
    from plangraph.runtime.resume_check import check_resume, saved_plan_file

    saved_file = saved_plan_file(checkpoint.path, run_dir)
    if saved_file is None:  # a run directory from before plans were saved with checkpoints
        if checkpoint.meta.plan != compiled.plan.name:
            raise CheckpointError(
                f"{checkpoint.path}: checkpoint of plan {checkpoint.meta.plan!r}, "
                f"not of {compiled.plan.name!r}"
            )
        print(
            f"plangraph run: note: neither {checkpoint.path} nor {run_dir} holds plan.json: "
            "the plan is not compared with the one that wrote the checkpoint",
            file=sys.stderr,
        )
        return
    before = _launched(read_saved_view(saved_file), saved.env, saved.num_workers)
    after = _launched(PlanView.from_compiled(compiled), env, num_workers)
    # A WorkerSet's env and num_workers given on this command line override the plan's:
    # a change of them was made there, not in the plan file.
    given = {
        "env": f"--env {cli_env}" if cli_env is not None else None,
        "num_workers": f"--num-workers {cli_num_workers}" if cli_num_workers is not None else None,
    }

    def locate(pointer: str) -> str | None:
        parts = pointer.split("/")  # "", "resources", id, "params", name
        if len(parts) == 5 and parts[1] == "resources" and parts[3] == "params":
            res = after.resources.get(parts[2])
            if res is not None and res.kind == "WorkerSet" and given.get(parts[4]):
                return given[parts[4]]
        loc = after.locate(pointer)
        return str(loc) if loc else None

    verdict = check_resume(before, after, checkpoint.state, locate=locate)
    name = checkpoint.path.name
    if not verdict.ok:
        total = len(verdict.blocking) + len(verdict.harmless)
        lines = [
            f"--resume {run_dir}: the plan changed in ways its checkpoint {name} cannot be "
            f"restored into ({len(verdict.blocking)} of {total} changes):",
            *(f"  {issue.format()}" for issue in verdict.blocking),
            f"  hint: resume with the plan it was saved with (plangraph run --resume {run_dir}, "
            "without PLAN), undo these changes, or start a new run (--out NEW_DIR); every "
            f"change: plangraph diff {saved_file.parent} {plan_path}",
        ]
        raise CheckpointError("\n".join(lines))
    if verdict.harmless:
        print(
            f"plangraph run: note: the plan differs from the one that wrote {name}; these "
            "changes leave the checkpoint usable:",
            file=sys.stderr,
        )
        for issue in verdict.harmless:
            print(f"  {issue.format()}", file=sys.stderr)


def _launched(view: Any, env: str | None, num_workers: int | None) -> Any:
    """``view`` as a launch with these ``--env``/``--num-workers`` runs it."""
    updates = {k: v for k, v in (("env", env), ("num_workers", num_workers)) if v is not None}
    return view.with_resource_params("WorkerSet", updates)
