"""``plangraph run --resume`` with a changed plan, end to end in subprocesses.

A real short run writes a checkpoint; resuming it with a plan whose model changed (or with
another ``--num-workers``) is refused before Ray starts, with the change located and
nothing written; a plan with a new learning rate and reporting param resumes, the changes
listed as a note. ``plangraph diff`` reads the same run directory.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_run_cli import PLAN, SMALL, plangraph, results

ONE_WORKER = [*SMALL, "--set", "num_workers=1"]


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _changed_plan(tmp_path: Path, name: str, edit: dict[str, object]) -> tuple[Path, int]:
    """a2c.json with ``edit`` ("a/b/c": value) applied; the line of the last edit."""
    data = json.loads(PLAN.read_text())
    for path, value in edit.items():
        *parents, last = path.split("/")
        here = data
        for p in parents:
            here = here[p]
        here[last] = value
    out = tmp_path / name
    text = json.dumps(data, indent=2)
    out.write_text(text)
    key = f'"{last}": '
    line = next(i for i, t in enumerate(text.splitlines(), 1) if key in t)
    return out, line


def test_resume_refuses_an_incompatible_plan_and_accepts_a_compatible_one(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    first = plangraph(
        "run", str(PLAN), *ONE_WORKER, "--stop", "iteration=2", "--out", str(run_dir),
        "--checkpoint-every", "1", "--no-progress", "--no-tensorboard", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert [r["iteration"] for r in results(run_dir)] == [1, 2]

    # The run directory is its saved plan: the same plan with the run's --set is identical.
    sets = [a.replace("--set", "--set-b") for a in ONE_WORKER]
    same = plangraph("diff", str(run_dir), str(PLAN), *sets, cwd=tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical" in same.stdout

    narrow, line = _changed_plan(
        tmp_path, "narrow.json", {"resources/workers/params/policy/hiddens": [32]}
    )
    differs = plangraph("diff", str(run_dir), str(narrow), *sets, "--format", "json", cwd=tmp_path)
    assert differs.returncode == 1, differs.stderr
    assert json.loads(differs.stdout)["resources"]["changed"]["workers"]["params"] == {
        "policy.hiddens": {"a": [64, 64], "b": [32]}
    }

    # Refused before Ray starts: one error naming the change where it was made, a hint,
    # and the run directory left as it was.
    before = _files(run_dir)
    refused = plangraph(
        "run", str(narrow), "--resume", str(run_dir), "--stop", "iteration=3", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert lines[0] == (
        f"plangraph run: error: --resume {run_dir}: the plan changed in ways its checkpoint "
        "iter_000002 cannot be restored into (1 of 1 changes):"
    )
    assert lines[1].startswith(f"  narrow.json:{line}:")  # as given, relative to the cwd
    assert lines[1].endswith(
        ": /resources/workers/params/policy/hiddens: [64, 64] -> [32]: the saved weights "
        "have the old layer widths"
    )
    assert lines[2].startswith("  hint: resume with the plan it was saved with")
    assert len(lines) == 3 and "Traceback" not in refused.stderr
    assert _files(run_dir) == before

    # Another number of rollout workers: made on the command line, and said so.
    workers = plangraph(
        "run", "--resume", str(run_dir), "--num-workers", "2", "--stop", "iteration=3",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert workers.returncode == 2, workers.stderr
    assert (
        "  --num-workers 2: /resources/workers/params/num_workers: 1 -> 2: the checkpoint "
        "holds one state per rollout worker"
    ) in workers.stderr
    assert _files(run_dir) == before

    # A new learning rate and a reporting param: the checkpoint is restored, changes noted.
    faster, _ = _changed_plan(
        tmp_path, "faster.json", {"config/lr": 0.001, "nodes/metrics/params/metrics_window": 20}
    )
    resumed = plangraph(
        "run", str(faster), "--resume", str(run_dir), "--stop", "iteration=3", "--no-progress",
        "--no-tensorboard", cwd=tmp_path,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    note = resumed.stderr
    assert "note: the plan differs from the one that wrote iter_000002" in note
    assert ": /config/lr: 0.005 -> 0.001" in note
    assert ": /resources/workers/params/policy/lr: 0.005 -> 0.001" in note
    assert ": /nodes/metrics/params/metrics_window: 100 -> 20" in note
    assert "resumed from" in note
    lines = results(run_dir)
    assert [r["iteration"] for r in lines] == [1, 2, 3]
    assert lines[2]["num_env_steps_sampled"] > lines[1]["num_env_steps_sampled"]
    # The learner follows the new schedule from the restored step count.
    assert lines[2]["learner"]["cur_lr"] < 0.001
