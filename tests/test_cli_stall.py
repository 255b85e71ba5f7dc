"""A plan that starves at run time: ``plangraph run`` ends with the watchdog's message as
one error line set (no traceback), exit status 1, and no run directory left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DROP_ALL = '''
from plangraph.ops import OpParams, register_op
from plangraph.runtime.implementations import register_impl


@register_op(category="combine", apply="filter", inputs=["SampleBatch"],
             output="SampleBatch", replace=True)
class DropAll(OpParams):
    """Keep no batch."""


@register_impl("DropAll")
def drop_all(params):
    return lambda batch: False
'''


def test_a_starved_run_ends_with_the_watchdog_message_and_status_1(tmp_path: Path) -> None:
    (tmp_path / "drop_all.py").write_text(DROP_ALL, encoding="utf-8")
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text(encoding="utf-8"))
    plan.pop("$schema")
    plan["config"].update({"num_workers": 1, "num_envs_per_worker": 2})
    plan["nodes"]["drop"] = {"op": "DropAll", "inputs": ["rollouts"], "params": {}}
    plan["nodes"]["concat"]["inputs"] = ["drop"]
    plan["nodes"]["metrics"]["params"]["max_idle_s"] = 5.0
    (tmp_path / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    command = ["run", "plan.json", "--import", "drop_all.py", "--max-iterations", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "plangraph", *command, "--no-progress", "--out", "runs/stall"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "plangraph run: error: " in proc.stderr
    assert "PlanStalledError: no item reached plan node 'metrics'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs" / "stall").exists()
