"""AggregateBatches (IMPALA's tree aggregation, RLlib 1.x ``num_aggregation_workers``):
the aggregation actors on real Ray with real rollout workers, the compiler's checks
(PG215-PG217), where ``explain`` and the diagram say it runs, and ``plans/impala_agg``
end to end (its learning run is in ``tests/test_learning_slow.py``)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray

import plangraph
from plangraph.algorithms.impala import IMPALAConfig
from plangraph.compiler import analyze
from plangraph.runtime.aggregation import assign_workers, start_aggregators

PLANS = Path(__file__).resolve().parent.parent / "plans"


def _plan() -> dict[str, Any]:
    plan: dict[str, Any] = json.loads((PLANS / "impala_agg.json").read_text(encoding="utf-8"))
    plan.pop("$schema", None)
    return plan


def _codes(plan: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    compiled = analyze(plan)
    return [(d.code, d.node, d.pointer) for d in compiled.diagnostics]


# -- the actors ------------------------------------------------------------------------------


def test_assign_workers_is_round_robin_and_refuses_idle_aggregators() -> None:
    assert assign_workers(["w1", "w2", "w3", "w4", "w5"], 2) == [["w1", "w3", "w5"], ["w2", "w4"]]
    assert assign_workers(["w1", "w2"], 2) == [["w1"], ["w2"]]
    with pytest.raises(ValueError, match="between 1 and the 2 rollout workers"):
        assign_workers(["w1", "w2"], 3)
    with pytest.raises(ValueError):
        assign_workers(["w1"], 0)


@pytest.mark.usefixtures("ray_session")
def test_aggregator_concatenates_whole_fragments_and_passes_the_weights_on() -> None:
    from plangraph.rl.worker_set import WorkerSet

    # 2 workers x 3 sub-envs x 20 steps = 60 env steps per fragment; 150 -> 3 fragments.
    ws = WorkerSet("CartPole-v1", 2, 3, 20, IMPALAConfig(hiddens=(16, 16)), seed=3)
    (agg,) = start_aggregators(ws.remote_workers, 1, 150, 1, 1, "aggregate")
    try:
        batch, syncs = ray.get(agg.next_batch.remote())
        assert batch.env_steps() == 180  # whole fragments, never split: 3 x 60 >= 150
        assert syncs == 0  # no weights handed over yet: nothing to pass on
        workers = set((np.asarray(batch["eps_id"]) >> 40).tolist())
        assert workers <= {1, 2}  # fragments of the owned workers, in completion order
        assert set(np.asarray(batch["policy_version"])) == {0}

        # New weights (zeros, so that they differ), handed over as a boxed object ref.
        zeros = {k: np.zeros_like(v) for k, v in ws.local_policy.get_weights().items()}
        ray.get(agg.set_weights.remote([ray.put(zeros)], {"policy_version": 7}))
        total, versions = 0, set()
        for _ in range(6):
            batch, syncs = ray.get(agg.next_batch.remote())
            total += syncs
            versions |= set(np.asarray(batch["policy_version"]).tolist())
            workers |= set((np.asarray(batch["eps_id"]) >> 40).tolist())
        assert workers == {1, 2}  # both owned workers sampled
        # One sync per worker and version (each worker's next fragment after the hand-over).
        assert total == 2
        assert 7 in versions
        got = ray.get([w.get_weights.remote() for w in ws.remote_workers])
        assert all(all(not np.any(g[k]) for k in g) for g in got)
    finally:
        ray.kill(agg)
        ws.stop()


@pytest.mark.usefixtures("ray_session")
def test_a_dead_rollout_worker_stops_the_aggregator_naming_the_node() -> None:
    from plangraph.rl.worker_set import WorkerSet

    ws = WorkerSet("CartPole-v1", 1, 2, 10, IMPALAConfig(hiddens=(8,)), seed=4)
    (agg,) = start_aggregators(ws.remote_workers, 1, 40, 1, 1, "my_agg")
    try:
        ray.get(agg.next_batch.remote())
        ray.kill(ws.remote_workers[0])
        with pytest.raises(ray.exceptions.RayTaskError, match="my_agg"):
            for _ in range(20):
                ray.get(agg.next_batch.remote())
    finally:
        ray.kill(agg)
        ws.stop()


# -- the compiler ----------------------------------------------------------------------------


def test_impala_agg_compiles_clean_with_the_aggregation_on_its_actors() -> None:
    compiled = plangraph.compile(PLANS / "impala_agg.json")
    assert compiled.diagnostics == ()
    assert compiled.nodes["aggregate"].placement == "aggregators"
    assert compiled.placement("aggregate").startswith("aggregation actors")
    text = compiled.explain()
    # the placement rows are aligned on the longest label the plan uses
    assert re.search(r"\n  aggregation actors +aggregate\n", text), text
    from plangraph.diagram import to_dot

    assert "AggregateBatches · on aggregation actors" in to_dot(compiled)


def test_pg215_a_bulk_sync_source() -> None:
    plan = _plan()
    plan["nodes"]["rollouts"]["params"]["mode"] = "bulk_sync"
    assert _codes(plan) == [("PG215", "rollouts", "/nodes/rollouts/params/mode")]


def test_pg215_an_operator_between_the_source_and_the_aggregators() -> None:
    plan = _plan()
    plan["nodes"]["sync"] = {
        "op": "UpdateWorkerWeights",
        "inputs": ["rollouts"],
        "params": {},
    }
    plan["nodes"]["aggregate"]["inputs"] = ["sync"]
    assert ("PG215", "aggregate", "/nodes/aggregate/inputs/0") in _codes(plan)


def test_pg215_another_worker_set_than_the_source() -> None:
    plan = _plan()
    plan["resources"]["other"] = copy.deepcopy(plan["resources"]["workers"])
    plan["nodes"]["aggregate"]["params"]["workers"] = "@other"
    assert ("PG215", "aggregate", "/nodes/aggregate/params/workers") in _codes(plan)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_pg216_more_aggregators_than_rollout_workers(num_workers: int) -> None:
    plan = _plan()
    plan["config"]["num_workers"] = num_workers
    codes = _codes(plan)
    assert (
        "PG216",
        "aggregate",
        "/nodes/aggregate/params/num_aggregation_workers",
    ) in codes


def test_pg217_restarts_that_the_aggregators_cannot_honour() -> None:
    plan = _plan()
    del plan["resources"]["workers"]["params"]["max_worker_restarts"]
    assert _codes(plan) == [("PG217", "aggregate", "/resources/workers/params/max_worker_restarts")]


def test_pg174_a_batch_size_of_no_whole_fragments() -> None:
    plan = _plan()
    plan["config"]["train_batch_size"] = 600  # fragments of 8 x 32 = 256 env steps
    assert ("PG174", "aggregate", "/nodes/aggregate/params/min_batch_size") in _codes(plan)


# -- end to end -------------------------------------------------------------------------------


@pytest.mark.usefixtures("ray_session")
def test_impala_agg_trains_and_counts_whole_train_batches() -> None:
    compiled = plangraph.compile(PLANS / "impala_agg.json", config={"min_env_steps_per_iter": 2048})
    with plangraph.build(compiled, seed=0) as algo:
        result = algo.train()
        result = algo.train()
    counters = result["counters"]
    sampled = result["num_env_steps_sampled"]
    # Counted once per train batch as it reaches the driver: 2 fragments x 256 env steps.
    assert sampled >= 4096 and sampled % 512 == 0
    assert counters["num_env_steps_enqueued"] <= sampled
    # Asynchronous: the learner thread may still hold a few batches, never more than it got.
    assert 0 < result["num_env_steps_trained"] <= counters["num_env_steps_enqueued"]
    assert counters["num_weight_syncs"] > 0  # the aggregators synced their workers
    assert "policy_lag" in result["learner"]
    assert result.get("episode_return_mean") is not None


def test_rollout_sizing_sizes_auto_fragments_for_the_aggregated_train_batch() -> None:
    compiled = plangraph.compile(
        PLANS / "impala_agg.json", config={"rollout_fragment_length": "auto"}
    )
    sized = compiled.executed.resources["workers"].params
    assert sized.rollout_fragment_length == 32  # 2 workers x 8 envs x 32 = 512


@pytest.mark.usefixtures("ray_session")
def test_a_restored_run_stops_the_last_dataflows_aggregators(tmp_path: Path) -> None:
    from plangraph.runtime.ops import combine

    compiled = plangraph.compile(PLANS / "impala_agg.json", config={"min_env_steps_per_iter": 1024})
    with plangraph.build(compiled, seed=1) as algo:
        algo.train()
        checkpoint = algo.save(tmp_path / "ckpt")
        (first,) = [a for k, a in combine._AGGREGATORS.items() if k[1] == "aggregate"]
        algo.restore(checkpoint)
        result = algo.train()
        (second,) = [a for k, a in combine._AGGREGATORS.items() if k[1] == "aggregate"]
        assert second is not first and len(second) == 2
        for agg in first:  # killed: they would keep taking the workers' fragments
            with pytest.raises(ray.exceptions.RayActorError):
                ray.get(agg.num_workers.remote(), timeout=60)
        assert ray.get([a.num_workers.remote() for a in second]) == [1, 1]
    assert result["num_env_steps_sampled"] > 1024
    assert not [k for k in combine._AGGREGATORS if k[1] == "aggregate"]  # stop() closed them
