"""tools/bench_replay.py measures what it says: each plan's own buffer, filled by its own
rollout worker, with the bytes per env step the memory estimate uses."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_replay", ROOT / "tools" / "bench_replay.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_plan_gets_its_own_buffer_and_row_size() -> None:
    from plangraph.rl.replay_buffer import (
        PrioritizedReplayBuffer,
        ReplayBuffer,
        SequenceReplayBuffer,
    )

    tool = _tool()
    kinds = {
        "dqn": ReplayBuffer,
        "dqn_prioritized": PrioritizedReplayBuffer,
        "r2d2": SequenceReplayBuffer,
    }
    sizes = {}
    for plan, kind in kinds.items():
        buffer, fragments, batch_size = tool._setup(plan, 600)
        assert type(buffer) is kind and len(buffer) >= 600
        assert sum(f.count for f in fragments) == len(buffer)
        assert batch_size == (16 if plan == "r2d2" else 128)
        sizes[plan] = buffer.row_nbytes
    # the same transitions either way; R2D2's rows carry their worker's LSTM state too
    assert sizes["dqn"] == sizes["dqn_prioritized"] < sizes["r2d2"]


@pytest.mark.parametrize("plan", ["dqn", "r2d2"])
def test_the_table_has_a_row_per_operation(plan: str, capsys: pytest.CaptureFixture[str]) -> None:
    tool = _tool()
    assert tool.main(["--plans", plan, "--fill", "600", "--seconds", "0.01", "--rounds", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {plan} ")]
    ops = [row.split("|")[5].strip() for row in rows]
    assert ops == (["add", "sample", "update"] if plan == "r2d2" else ["add", "sample"])
    rates = [float(row.split("|")[8].replace(",", "")) for row in rows]
    assert all(np.isfinite(r) and r > 0 for r in rates)
    sys.modules.pop("bench_replay", None)
