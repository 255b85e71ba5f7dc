"""Bounded worker restarts and the idle watchdog, on real Ray actors and gymnasium envs.

* An env that kills its worker process on every step: ``train()`` stops with
  ``WorkerRestartError`` naming the node, the worker and the original cause, after exactly
  ``max_worker_restarts`` replacements (before: replaced forever, ``train()`` never
  returned).
* An env that kills its worker once: the run continues, ``num_worker_restarts == 1``.
* An env that raises in ``step``: an ``OperatorError`` at once, no replacement.
* An env whose ``step`` never returns: ``train()`` (and a ``WorkerSet`` call) stops at the
  reply deadline with an error naming the node, the workers and the call (before: a hang).
* A plan whose output branch does not produce (replay below ``learning_starts`` for longer
  than the test runs): the sink's watchdog raises ``PlanStalledError`` naming the starved
  node (before: a hang). A buffer that can *never* reach ``learning_starts`` (capacity
  below it) is refused by the compiler (PG173) before launch.

The pytest-timeout marks turn a regression into a failure instead of a hung suite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import plangraph
from plangraph.flow import deadlines
from plangraph.flow.errors import OperatorError, OperatorTimeoutError
from plangraph.flow.watchdog import PlanStalledError
from plangraph.rl.restarts import RestartPolicy, WorkerRestartError
from plangraph.rl.worker_set import WorkerSet
from plangraph.runtime.algorithm import Algorithm
from tests import crash_envs
from tests.waiting import rollout_workers_up

PLANS = Path(__file__).resolve().parent.parent / "plans"

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.timeout(240)]


def env_id(name: str) -> str:
    return f"tests.crash_envs:{name}"


def build_a2c(env: str, **worker_params: Any) -> Algorithm:
    plan = json.loads((PLANS / "a2c.json").read_text())
    plan["resources"]["workers"]["params"].update(worker_params)
    config = {
        "env": env,
        "num_workers": 2,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 8,
        "train_batch_size": 32,
    }
    return plangraph.build(plangraph.compile(plan, config=config), seed=0)


@pytest.fixture
def algos() -> Iterator[list[Algorithm]]:
    made: list[Algorithm] = []
    yield made
    for algo in made:
        algo.stop()


def test_a_worker_that_always_dies_stops_the_run_naming_node_worker_and_cause(
    algos: list[Algorithm],
) -> None:
    algo = build_a2c(
        env_id(crash_envs.CRASH_ON_STEP), max_worker_restarts=2, worker_restart_backoff_s=0.05
    )
    algos.append(algo)
    with pytest.raises(WorkerRestartError) as info:
        algo.train()
    err = info.value
    assert isinstance(err, OperatorError)
    assert err.node_id == "rollouts"
    assert err.worker_index in (1, 2)
    assert err.num_restarts == 2
    message = str(err)
    assert "'rollouts'" in message and f"rollout worker {err.worker_index}" in message
    assert "max_worker_restarts=2" in message
    # The original cause: the process died (Ray's exit report), and what it said on stderr.
    assert "exit type SYSTEM_ERROR" in err.cause
    assert "simulated native crash in step()" in err.cause
    # Every replacement was counted in the run's counters (the other worker may have been
    # replaced too before the first one ran out of restarts).
    restarts = algo.run_state.counters["num_worker_restarts"]
    assert 2 <= restarts <= 4


def test_a_worker_that_dies_once_is_replaced_and_the_run_continues(
    algos: list[Algorithm],
) -> None:
    crash_envs.CRASH_ONCE_MARKER.unlink(missing_ok=True)
    try:
        algo = build_a2c(env_id(crash_envs.CRASH_ONCE), worker_restart_backoff_s=0.05)
        algos.append(algo)
        results = [algo.train() for _ in range(3)]
    finally:
        crash_envs.CRASH_ONCE_MARKER.unlink(missing_ok=True)
    assert [r["num_worker_restarts"] for r in results] == [1, 1, 1]
    assert results[-1]["counters"]["num_worker_restarts"] == 1
    # Sampling went on with both workers: 2 workers x 2 sub-envs x 8 steps per round.
    assert results[-1]["num_env_steps_sampled"] == 3 * 32


def test_a_healthy_run_reports_no_restarts_and_keeps_its_counters(
    algos: list[Algorithm],
) -> None:
    algo = build_a2c("CartPole-v1")
    algos.append(algo)
    result = algo.train()
    assert result["num_worker_restarts"] == 0
    assert "num_worker_restarts" not in result["counters"]


def test_an_env_that_raises_fails_at_once_without_a_restart(algos: list[Algorithm]) -> None:
    algo = build_a2c(env_id(crash_envs.RAISE_ON_STEP))
    algos.append(algo)
    with pytest.raises(OperatorError, match="the simulator rejected the action") as info:
        algo.train()
    assert not isinstance(info.value, WorkerRestartError)
    assert info.value.node_id == "rollouts"
    assert algo.run_state.counters.get("num_worker_restarts", 0) == 0


def test_an_env_that_hangs_stops_the_run_at_the_reply_deadline(
    algos: list[Algorithm], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both workers' env steps never return: ``train()`` raises at the reply deadline (2 s
    here, instead of 30 min), naming the node, the shards, their actors and the call."""
    algo = build_a2c(env_id(crash_envs.HANG_ON_STEP))
    algos.append(algo)
    monkeypatch.setattr(deadlines, "REPLY_DEADLINE_S", 2.0)
    with pytest.raises(OperatorTimeoutError) as info:
        algo.train()
    err = info.value
    assert isinstance(err, plangraph.WaitTimeoutError)
    assert err.node_id == "rollouts"
    assert "did not answer sample() within 2 s" in err.detail
    assert "shard 0" in err.detail and "RolloutWorker" in (err.actor or "")
    assert "is the actor stuck inside that call" in str(err)


def test_a_worker_set_call_to_a_hung_worker_names_the_worker_and_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws = WorkerSet(env_id(crash_envs.HANG_ON_STEP), 1, 1, 8, {"algo": "a2c"}, seed=0)
    try:
        monkeypatch.setattr(deadlines, "REPLY_DEADLINE_S", 2.0)  # after start-up
        with pytest.raises(
            plangraph.WaitTimeoutError,
            match=r"rollout worker 1 did not answer sample\(\) within 2 s",
        ):
            ws.sample()
        # A call queued behind the hung sample() is waited for as long, and says which.
        with pytest.raises(plangraph.WaitTimeoutError, match=r"did not answer get_state\(\)"):
            ws.get_state()
    finally:
        ws.stop()


def test_restart_policy_counts_per_worker_within_the_window_with_backoff() -> None:
    policy = RestartPolicy(max_restarts=2, window_s=300.0, backoff_s=0.5)
    assert policy.admit(1) == 0.5
    assert policy.admit(2) == 0.5  # another worker has its own budget
    assert policy.admit(1) == 1.0
    assert policy.admit(1) is None
    assert policy.restarts_in_window(1) == 2
    # Deaths older than the window no longer count.
    expired = RestartPolicy(max_restarts=1, window_s=1e-9, backoff_s=0.0)
    assert expired.admit(1) == 0.0
    assert expired.admit(1) == 0.0
    with pytest.raises(ValueError, match="max_restarts"):
        RestartPolicy(max_restarts=-1)


def test_the_watchdog_names_a_replay_that_never_reaches_learning_starts(
    algos: list[Algorithm],
) -> None:
    plan = json.loads((PLANS / "dqn.json").read_text())
    metrics = next(n for n in plan["nodes"].values() if n["op"] == "StandardMetricsReporting")
    metrics["params"]["max_idle_s"] = 3.0
    config = {
        "num_workers": 1,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 8,
        # The buffer could hold learning_starts (the compiler accepts the plan), but at a
        # few thousand env steps per second it gets nowhere near them before the watchdog's
        # 3 s: a starvation only the running plan can see.
        "buffer_size": 1_000_000,
        "learning_starts": 1_000_000,
    }
    algo = plangraph.build(plangraph.compile(plan, config=config), seed=0)
    algos.append(algo)
    rollout_workers_up(algo)
    with pytest.raises(PlanStalledError) as info:
        algo.train()
    err = info.value
    replay = next(k for k, n in plan["nodes"].items() if n["op"] == "LocalReplay")
    assert err.node_id == replay
    assert err.sink == next(k for k, n in plan["nodes"].items() if n is metrics)
    message = str(err)
    assert "fewer than learning_starts=1000000" in message
    assert "is its writer, StoreToReplay, driven and fed?" in message
    # The counters show upstream kept running while the output starved.
    sampled = algo.run_state.counters["num_env_steps_sampled"]
    assert 0 < sampled < 1_000_000
    assert f"num_env_steps_sampled 0 -> {sampled}" in message
