"""How a Concurrently drives its branches (PG176-PG178) and what a plan asks of the
machine (PG179-PG181): exact cases around each check's boundary, the hang refused before
launch is a real hang, the seed plans stay clean, and the Ray cluster's capacity."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph import cli
from plangraph.compiler import CHECKS, Capacity, PlanValidationError, analyze
from plangraph.compiler.capacity import parse_size
from plangraph.compiler.resource_checks import DRIVER_BYTES, WORKER_BYTES

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "fixtures" / "bad_plans"
NEW_CODES = {"PG176", "PG177", "PG178", "PG179", "PG180", "PG181"}
ROOMY = Capacity("a roomy machine", 64.0, 2**40)


def fixture(name: str) -> dict[str, Any]:
    return json.loads((BAD / name).read_text())


def codes(plan: Any, capacity: Capacity = ROOMY) -> list[str]:
    return [d.code for d in analyze(plan, capacity=capacity).diagnostics]


def test_seed_plans_draw_none_of_the_new_diagnostics() -> None:
    for path in sorted((ROOT / "plans").glob("*.json")):
        assert not set(codes(path, Capacity.local())) & NEW_CODES, path.name


# -- PG176: a branch that can never produce --------------------------------------------


def test_a_buffer_fed_by_its_own_reader_is_refused_before_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = fixture("PG176_replay_fed_by_itself.json")
    with pytest.raises(PlanValidationError) as info:
        plangraph.compile(plan)
    assert [d.code for d in info.value.diagnostics] == ["PG176"]
    # plangraph run stops at the diagnostic: no Ray, no run directory.
    rc = cli.main(
        ["run", str(BAD / "PG176_replay_fed_by_itself.json"), "--max-iterations", "1",
         "--out", str(tmp_path / "run")]
    )  # fmt: skip
    assert rc == 1
    assert "PG176" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    # Fed from the rollouts (what the hint says), it is clean.
    plan["nodes"]["restore"]["inputs"] = ["rollouts"]
    plan["nodes"]["train"]["inputs"] = ["replayed"]
    plan["nodes"]["concurrently"]["inputs"] = ["restore", "train"]
    assert codes(plan) == []


def test_a_dead_branch_that_is_not_output_is_named_as_such() -> None:
    plan = fixture("PG176_replay_fed_by_itself.json")
    # A second, live output branch: the plan runs, but the dead one never does its work.
    plan["nodes"]["fresh"] = {"op": "ParallelRollouts", "inputs": [], "params": {}}
    plan["nodes"]["concat"] = {
        "op": "ConcatBatches", "inputs": ["fresh"], "params": {"min_batch_size": 1024}
    }  # fmt: skip
    plan["nodes"]["train2"] = {"op": "TrainOneStep", "inputs": ["concat"], "params": {}}
    plan["nodes"]["concurrently"]["inputs"] = ["rollouts", "train", "train2"]
    plan["nodes"]["concurrently"]["params"]["output_indexes"] = [2]
    diags = [d for d in analyze(plan, capacity=ROOMY).diagnostics if d.code == "PG176"]
    assert len(diags) == 1
    assert diags[0].pointer == "/nodes/concurrently/inputs/1"
    assert diags[0].message.endswith("That branch never does its work")


def test_a_dead_inner_concurrently_is_reported_once_where_it_starts() -> None:
    plan = fixture("PG176_replay_fed_by_itself.json")
    plan["nodes"]["outer"] = {
        "op": "Concurrently",
        "inputs": ["concurrently", "tick"],
        "params": {"mode": "round_robin", "output_indexes": [0]},
    }
    plan["nodes"]["tick"] = {"op": "ParallelRollouts", "inputs": [], "params": {}}
    plan["nodes"]["metrics"]["inputs"] = ["outer"]
    diags = [d for d in analyze(plan, capacity=ROOMY).diagnostics if d.code == "PG176"]
    assert [d.node for d in diags] == ["concurrently"]


def test_the_refused_plan_really_hangs(ray_session: None) -> None:
    """Built with the check left out, the plan starves: the sink's watchdog (armed here,
    off by default) is the only thing that ever stops it."""
    from plangraph.flow.watchdog import PlanStalledError
    from tests.waiting import rollout_workers_up

    plan = fixture("PG176_replay_fed_by_itself.json")
    plan["resources"]["workers"]["params"].update(
        {"num_workers": 1, "num_envs_per_worker": 2, "rollout_fragment_length": 8}
    )
    plan["nodes"]["metrics"]["params"]["max_idle_s"] = 2.0
    pipeline = [c for c in CHECKS if c.name != "branches-produce"]
    compiled = analyze(plan, checks=pipeline)
    assert compiled.ok, [d.format() for d in compiled.diagnostics]
    algo = plangraph.build(compiled, seed=0)
    try:
        # The rollout workers up first: a start slower than the 2 s watchdog would be
        # reported at "rollouts", before the plan can starve.
        rollout_workers_up(algo)
        with pytest.raises(PlanStalledError) as info:
            algo.train()
        assert info.value.node_id == "replayed"
        assert algo.run_state.counters["num_env_steps_sampled"] > 0  # the rest kept going
    finally:
        algo.stop()


# -- PG177: a branch that keeps its turn ---------------------------------------------------


def test_a_wait_behind_replay_is_refused_only_when_it_can_hang() -> None:
    plan = fixture("PG177_wait_behind_replay.json")
    assert codes(plan) == ["PG177"]
    # At most learning_starts: sampled by the time the buffer is ready, the filter passes.
    assert codes(analyze_config(plan, warmup_steps=1001)) == ["PG177"]
    assert codes(analyze_config(plan, warmup_steps=1000)) == []
    # On the sampling branch it waits for its own rollouts: no hang.
    moved = copy.deepcopy(plan)
    moved["nodes"]["warmup"]["inputs"] = ["rollouts"]
    moved["nodes"]["store"]["inputs"] = ["warmup"]
    moved["nodes"]["train"]["inputs"] = ["replayed"]
    assert codes(moved) == []


def analyze_config(plan: dict[str, Any], **config: Any) -> dict[str, Any]:
    out = copy.deepcopy(plan)
    out["config"].update(config)
    return out


# -- PG178: round-robin throttling ----------------------------------------------------------


def test_throttle_warning_only_where_a_turn_blocks_for_several_rounds() -> None:
    plan = fixture("PG178_round_robin_throttle.json")
    assert codes(plan) == ["PG178"]
    one_round = copy.deepcopy(plan)
    one_round["nodes"]["chunk"]["params"]["min_batch_size"] = 256  # one 2 x 8 x 16 round
    assert codes(one_round) == []
    star = copy.deepcopy(plan)
    star["nodes"]["concurrently"]["params"]["weights"] = ["*", 16]  # polled, never blocks
    assert codes(star) == []
    asynchronous = copy.deepcopy(plan)
    asynchronous["nodes"]["concurrently"]["params"] = {"mode": "async", "output_indexes": [1]}
    assert codes(asynchronous) == []
    # A replay branch waiting for learning_starts yields not-ready: it never throttles.
    replay_side = copy.deepcopy(plan)
    replay_side["nodes"]["store"]["inputs"] = ["rollouts"]
    replay_side["nodes"]["chunk"]["inputs"] = ["replayed"]
    replay_side["nodes"]["train"]["inputs"] = ["chunk"]
    assert codes(replay_side) == []


# -- PG179-PG181: the machine -----------------------------------------------------------------


def _ppo(num_workers: int) -> dict[str, Any]:
    plan = json.loads((ROOT / "plans" / "ppo.json").read_text())
    plan["config"]["num_workers"] = num_workers
    plan["config"]["train_batch_size"] = 512 * max(1, num_workers)
    return plan


@pytest.mark.parametrize(
    ("workers", "cpus", "memory", "expected"),
    [
        (2, 2.0, 2**33, []),
        (3, 2.0, 2**33, ["PG180"]),
        (8, 2.0, 2**33, ["PG180"]),
        (9, 2.0, 2**33, ["PG179"]),
        (4, 16.0, 4 * WORKER_BYTES + DRIVER_BYTES, []),
        (4, 16.0, 4 * WORKER_BYTES + DRIVER_BYTES - 1, ["PG181"]),
        (9, None, None, []),  # nothing known: nothing checked
    ],
)
def test_capacity_boundaries(
    workers: int, cpus: float | None, memory: int | None, expected: list[str]
) -> None:
    got = codes(_ppo(workers), Capacity("the test machine", cpus, memory))
    assert [c for c in got if c in NEW_CODES] == expected


def test_local_capacity_and_sizes() -> None:
    local = Capacity.local()
    assert local.where == "this machine" and local.cpus is not None and local.cpus >= 1
    assert local.memory_bytes is None or local.memory_bytes > 2**20
    assert parse_size("8GiB") == parse_size("8g") == 8 * 2**30
    assert parse_size("512M") == 512 * 2**20 and parse_size("1000") == 1000
    with pytest.raises(ValueError, match="not a memory size"):
        parse_size("lots")


def test_the_ray_cluster_reports_its_capacity(ray_session: None) -> None:
    from plangraph.runtime.ray_session import cluster_capacity

    cap = cluster_capacity("auto")
    assert cap.where == "the Ray cluster at auto"
    assert cap.cpus == 2.0  # the session fixture's ray.init(num_cpus=2)
    assert cap.memory_bytes is not None and cap.memory_bytes > 0
    diag = next(d for d in analyze(_ppo(9), capacity=cap).diagnostics if d.code == "PG179")
    assert "more than the Ray cluster at auto can run: at most 8" in diag.message
    import ray

    assert ray.is_initialized()  # the session's Ray is left as it was


def test_validate_target_options(capsys: pytest.CaptureFixture[str]) -> None:
    ppo = str(ROOT / "plans" / "ppo.json")
    assert cli.main(["validate", "--cpus", "1", "--memory", "64GiB", ppo]) == 0
    assert "PG180" in capsys.readouterr().out
    assert cli.main(["validate", "--address", "auto", "--cpus", "2", ppo]) == 2
    assert "drop --cpus/--memory" in capsys.readouterr().err
    assert cli.main(["validate", "--memory", "lots", ppo]) == 2
    assert "--memory: 'lots' is not a memory size" in capsys.readouterr().err


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (no Ray initialised, nothing imported yet)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_validate_with_a_target_machine_stays_ray_free() -> None:
    dqn = str(ROOT / "plans" / "dqn.json")
    done = _python(
        "import sys; from plangraph import cli; "
        f"rc = cli.main(['validate', '-q', '--cpus', '2', '--memory', '8GiB', {dqn!r}]); "
        "assert rc == 0, rc; assert 'ray' not in sys.modules and 'torch' not in sys.modules"
    )
    assert done.returncode == 0, done.stderr


def test_validate_against_an_unreachable_cluster_is_one_line() -> None:
    ppo = str(ROOT / "plans" / "ppo.json")
    done = _python(
        "import sys; from plangraph import cli; "
        f"sys.exit(cli.main(['validate', '--address', '127.0.0.1:1', {ppo!r}]))"
    )
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "no Ray cluster reachable there" in err[0], done.stderr
