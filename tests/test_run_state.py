"""RunState (counters, iteration, time, episode window in one object) and the declared
Result schema, without Ray: the sink's real results are checked in test_run_algorithm."""

from __future__ import annotations

import io
import re
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plangraph.flow.metrics import MetricsContext
from plangraph.runtime.result import (
    EPISODE_STAT_KEYS,
    EVALUATION_KEY,
    MULTI_AGENT_KEYS,
    NESTED_RESULT_KEYS,
    RESULT_KEYS,
    RESULT_TYPES,
    Result,
)
from plangraph.runtime.run_state import EpisodeWindow, RunState

RESULTS_PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "results.md"


def conforms(value: object, hint: object) -> bool:
    """``value`` has exactly the declared type (an int is not a float, a bool not an int)."""
    if typing.get_origin(hint) is dict:
        key_type, value_type = typing.get_args(hint)
        return isinstance(value, dict) and all(
            conforms(k, key_type) and conforms(v, value_type) for k, v in value.items()
        )
    return type(value) is hint


def test_result_keys_are_derived_from_the_schema() -> None:
    assert RESULT_KEYS == set(Result.__annotations__)
    assert set(NESTED_RESULT_KEYS) == {"counters", "timers", "learner", "evaluation", "policies"}
    assert EPISODE_STAT_KEYS == {
        "episode_return_mean",
        "episode_return_min",
        "episode_return_max",
        "episode_len_mean",
    }
    assert (
        RESULT_KEYS - EPISODE_STAT_KEYS - MULTI_AGENT_KEYS - {EVALUATION_KEY}
        == Result.__required_keys__
    )


def documented_result_table() -> dict[str, str]:
    """``{key: type}`` from the table of the documentation's Result keys page."""
    lines = RESULTS_PAGE.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Result keys"))
    rows: dict[str, str] = {}
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            in_table = True
            m = re.match(r"\| `([a-z_]+)` \| ([^|]+) \|", line)
            if m:
                rows[m.group(1)] = m.group(2).strip()
        elif in_table:
            break
    return rows


def test_the_docs_document_exactly_the_declared_result_keys() -> None:
    table = documented_result_table()
    assert set(table) == RESULT_KEYS
    for key, type_text in table.items():
        hint = RESULT_TYPES[key]
        declared = (
            f"dict[{', '.join(a.__name__ for a in typing.get_args(hint))}]"
            if typing.get_origin(hint) is dict
            else hint.__name__
        )
        assert type_text == declared, key


def test_summary_table_rows_name_result_keys() -> None:
    from plangraph.runtime.run_loop import SUMMARY_ROWS
    from plangraph.runtime.stopping import check_result_key

    for _label, key, _spec in SUMMARY_ROWS:
        check_result_key(key, what="summary row")  # raises unless it names a result value


def test_end_iteration_advances_the_run_and_makes_a_result() -> None:
    state = RunState(episodes=EpisodeWindow(size=2))
    start = state.begin_iteration()
    state.counters["num_env_steps_sampled"] += 40
    state.counters["num_env_steps_trained"] += 32
    state.metrics.info["learner"] = {"loss": 0.5}
    elapsed_s, steps = state.iteration_progress(start)
    assert steps == 40 and elapsed_s >= 0
    first = state.end_iteration(start, 2.0)
    # No episode has ended: the episode statistics are absent, never NaN.
    assert set(first) == RESULT_KEYS - EPISODE_STAT_KEYS - MULTI_AGENT_KEYS - {EVALUATION_KEY}
    assert all(conforms(first[k], RESULT_TYPES[k]) for k in first)
    assert (first["iteration"], first["time_total_s"], first["env_steps_per_s"]) == (1, 2.0, 20.0)
    assert first["counters"] == {"num_env_steps_sampled": 40, "num_env_steps_trained": 32}
    assert first["learner"] == {"loss": 0.5}

    start = state.begin_iteration()
    state.episodes.add(np.array([10.0, 20.0, 30.0]), np.array([10, 20, 30]))
    state.counters["num_env_steps_sampled"] += 60
    second = state.end_iteration(start, 3.0)
    assert set(second) == RESULT_KEYS - MULTI_AGENT_KEYS - {EVALUATION_KEY}
    assert all(conforms(second[k], RESULT_TYPES[k]) for k in second)
    assert second["iteration"] == state.iteration == 2
    assert second["time_total_s"] == state.time_total_s == 5.0
    assert second["num_env_steps_sampled_this_iter"] == 60
    assert second["env_steps_per_s_total"] == 100 / 5.0
    assert (second["episodes_this_iter"], second["episodes_total"]) == (3, 3)
    assert second["episode_return_mean"] == 25.0  # the window holds the last 2 episodes


def test_reading_global_vars_adds_no_counter() -> None:
    state = RunState()
    assert state.global_vars() == {"timestep": 0}
    assert dict(state.counters) == {}


def test_run_state_checkpoint_round_trip() -> None:
    state = RunState(episodes=EpisodeWindow(size=3))
    start = state.begin_iteration()
    state.counters["num_env_steps_sampled"] += 7
    state.metrics.info["learner"] = {"loss": 1.0}
    state.episodes.add(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 2, 3, 4]))
    state.end_iteration(start, 1.5)
    saved = state.get_state()

    restored = RunState(episodes=EpisodeWindow(size=3))
    window, metrics = restored.episodes, restored.metrics
    restored.set_state({**saved, "policies": {}, "buffers": {}})  # a whole checkpoint
    # In place: operators that hold the window or the metrics context keep seeing the run.
    assert restored.episodes is window and restored.metrics is metrics
    assert (restored.iteration, restored.time_total_s) == (1, 1.5)
    assert restored.counters == {"num_env_steps_sampled": 7}
    assert restored.learner == {"loss": 1.0}
    assert list(restored.episodes.returns) == [2.0, 3.0, 4.0]
    assert restored.episodes.total == 4
    assert restored.get_state() == saved


def test_run_state_metrics_is_the_flow_context() -> None:
    assert isinstance(RunState().metrics, MetricsContext)
    state = RunState()
    assert state.counters is state.metrics.counters
    assert state.timers is state.metrics.timers


@pytest.mark.parametrize("window", [1, 5])
def test_run_state_for_plan_sizes_the_window(window: int) -> None:
    import plangraph

    plan = {
        "name": "w",
        "resources": {
            "workers": {"kind": "WorkerSet", "params": {"policy": {"algo": "a2c"}}},
        },
        "nodes": {
            "rollouts": {"op": "ParallelRollouts"},
            "train": {"op": "TrainOneStep", "inputs": ["rollouts"]},
            "metrics": {
                "op": "StandardMetricsReporting",
                "inputs": ["train"],
                "params": {"metrics_window": window},
            },
        },
        "output": "metrics",
    }
    assert RunState.for_plan(plangraph.compile(plan)).episodes.size == window


def test_summary_table_shows_recorded_env_steps_only_in_runs_that_record() -> None:
    from rich.console import Console

    from plangraph.runtime.run_loop import RunSummary, summary_table

    def shown(result: dict[str, Any]) -> str:
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(summary_table(RunSummary(result, "done", None, False)))
        return console.export_text()

    base = {"iteration": 3, "num_env_steps_sampled": 3072, "counters": {}}
    assert "env steps recorded" not in shown(base)
    recorded = {**base, "counters": {"num_env_steps_recorded": 3072}}
    assert "env steps recorded" in shown(recorded) and "3,072" in shown(recorded)
